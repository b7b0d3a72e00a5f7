"""The elixir library, agents and lineage DAG in the relational store (tables: ``schema.py``).

Every write is one transaction at the point it happens (``SQLDatabase.write``): a save of an id's next
version that races another writer collides on ``(id, version)`` and is run again, so versions stay
contiguous and no save is lost, across threads, processes and machines. Every read of one elixir checks
its keyed seal and recomputes its content hash; every read of an agent checks its seal, lineage, edges
and persona (``docs/store.md``). Lineage walks fetch the reachable edges with one recursive query (on
SQLite: those no walk read while the lineage tables are unchanged) and walk them with the same BFS as
:class:`~furnace.storage.memory.MemoryStore`; the agents they reach are verified in full once, and the walk
and its edges are remembered while the lineage tables are unchanged, or changed only where their change log
says the walk is not touched (:class:`VerifiedAgents`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, and_, bindparam, func, or_, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError

import furnace.domain.secrets  # noqa: F401  (the secret scan of every save: imported here, never inside a write transaction)
from furnace.domain.agent import Agent, LineageNode, record_seal
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import NotFound
from furnace.domain.guarded import Guarded, serialized
from furnace.storage.memory import Adjacency, adjacency, bfs
from furnace.storage.seals import Sealer, agent_mac, elixir_seal
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.lineage_log import Changes, named_parents, read_changes
from furnace.storage.sql.schema import agents as agent_rows
from furnace.storage.sql.schema import elixir_versions, lineage_edges
from furnace.storage.store import (
    ElixirSummary,
    Origin,
    checked_ref,
    loadable_for_fusion,
    matches_query,
    plan_versions,
    stale_version_error,
    stored_elixir,
    utc_now,
    verified_agent,
    withdrawn_error,
)

T = TypeVar("T")
CHUNK = 500  # ids per IN (...) list
_EV = elixir_versions.c
_ELIXIR_COLS = (_EV.id, _EV.version, _EV.content_hash, _EV.body, _EV.created_at, _EV.deleted_at, _EV.seal)
# the point reads every load makes, built once (a statement's construction costs as much as its run on SQLite)
_LATEST_VERSION = select(*_ELIXIR_COLS).where(_EV.id == bindparam("id")).order_by(_EV.version.desc()).limit(1)
_ONE_VERSION = select(*_ELIXIR_COLS).where(_EV.id == bindparam("id"), _EV.version == bindparam("version"))
_EDGES_INTO = select(lineage_edges).where(lineage_edges.c.child.in_(bindparam("ids", expanding=True)))
_BODY_EXCLUDE = {"id", "version", "created_at", "deleted_at", "content_hash"}
_AGENT_COLS = (
    agent_rows.c.id,
    agent_rows.c.lineage,
    agent_rows.c.elixir_version,
    agent_rows.c.system_prompt,
    agent_rows.c.tools,
    agent_rows.c.members,
    agent_rows.c.created_at,
    agent_rows.c.seal,
)


_Edge = tuple[str, str, str, int]  # (parent, operator, op_version, parent_version) of an edge into an agent
_EdgesInto = dict[str, set[_Edge]] | dict[str, frozenset[_Edge]]
_WalkKey = tuple[str, bool, int | None]  # (start, up, max_depth) of a lineage walk
_Link = tuple[str, str, str, int]  # (far end, operator, op_version, parent_version) of an edge from a node
_LINK_LEVELS = 4  # levels of a walk read node by node before the rest is read by one recursive query
# SQLite's change stamp of what walks read (migration 0004): the ``lineage_stamp`` row, moved by triggers on
# every change to agents, lineage edges and the elixir versions they name (in a write transaction: by its
# own writes too, with a token no other state shows), and the schema cookie (a dropped trigger moves it)
_SQLITE_STAMP = "SELECT s.n, s.token, v.schema_version FROM lineage_stamp s, pragma_schema_version v"


@dataclass(frozen=True, slots=True)
class Verified:
    """One id a walk verified: confirmed at ``epoch``; an agent's ``digest`` of the stored bytes its
    verification read (its row, its persona's row, its parents' stored hashes, the edges into it), those
    ``edges`` and its ``parents``; ``digest`` empty: the id is no agent."""

    epoch: int
    digest: bytes = b""
    edges: frozenset[_Edge] = frozenset()
    parents: tuple[tuple[str, int], ...] = ()


def record_digest(
    row: Sequence[Any], edges: Set[_Edge], elixirs: dict[tuple[str, int], Any], parents: Iterable[tuple[str, int]]
) -> bytes:
    """The digest of every stored value an agent's verification reads: its ``agents`` row, the edges into
    it, its persona's ``elixir_versions`` row and each parent's stored content hash (values as plain
    tuples: a SQLAlchemy row's ``repr`` shortens long values)."""
    persona = elixirs.get((row[0], row[2]))
    hashes = [None if (found := elixirs.get(p)) is None else found[2] for p in parents]
    digest = hashlib.blake2b(digest_size=32)
    for value in (*row, repr(sorted(edges)), *(persona if persona is not None else (None,)), repr(hashes)):
        data = (value if isinstance(value, str) else repr(value)).encode()  # each value with its type and length
        digest.update(b"%s %d:" % (type(value).__name__.encode(), len(data)))
        digest.update(data)
    return digest.digest()


@dataclass(frozen=True, slots=True)
class RememberedWalk:
    """A walk's nodes and what a change must touch to alter it: ``touch``, the ids whose records its
    verification read or whose edges in its direction it followed (every node reached, the agents a walk down
    found naming one, the parents of each); ``ends`` (a walk down only): its nodes, whose edges out and whose
    naming agents a walk down reads."""

    nodes: tuple[LineageNode, ...]
    touch: frozenset[str]
    ends: frozenset[str] = frozenset()

    @property
    def size(self) -> int:
        return len(self.nodes) + len(self.touch) + len(self.ends)

    def touched_by(self, up: bool, changes: Changes) -> bool:
        """True when one of ``changes`` may alter this walk (in direction ``up``)."""
        if not self.touch.isdisjoint(changes.records):
            return True  # an agent, an edge into a node or an elixir it read
        if up:
            return False  # a walk up follows and verifies the edges into its nodes only
        return changes.naming is None or not (
            self.ends.isdisjoint(changes.parents) and self.ends.isdisjoint(changes.naming)
        )


class VerifiedAgents(Guarded):
    """What this process's lineage walks verified, and the walks themselves, so a walk need not read or
    verify again what the database cannot have changed since.

    Tied to SQLite's stamp of the lineage tables (``lineage_stamp``, migration 0004: triggers move it on
    every change to ``agents`` or ``lineage_edges``, on every update or delete of an ``elixir_versions`` row
    and on an insert that replaces one or adds a version a lineage edge names; and the schema cookie) and to
    its change log (``lineage_changes``, migration 0005: one row per move naming the keys it touched). Each
    walk reads the stamp in its own read transaction (one point read): a stamp other than the one seen
    last, by whichever connection, starts a new ``epoch``. The log rows between the two stamps, read in the
    same read transaction (:func:`~furnace.storage.sql.lineage_log.read_changes`), say what changed: what
    they touch is forgotten and the rest is kept into the new epoch; when the log cannot tell (another
    schema, rows pruned, a stamp a rolled-back transaction showed, more than ``READ_LIMIT`` moves),
    everything is. A commit that touches none of these tables (a cached answer, a ledger row, a library
    elixir's new version, an arena turn) moves nothing. An epoch is one state of those tables: the token is
    fresh random bytes at every change, so the stamp a write transaction's own uncommitted writes showed is
    never shown -- nor confirmed by a log row -- again once it rolls back.

    * The agents verified in full (seal, lineage, persona, parents' hashes and the lineage edges into
      each), each with the digest of the stored bytes its verification read. A walk skips an agent
      confirmed since everything was last forgotten and not touched by a change since (its row, an edge
      into it, its persona or a parent's version logged), whose edges it read are the remembered ones; one
      confirmed earlier or touched is read again and its digest compared (a forged row, edge or seal changes
      it: verified in full then); anything else is verified in full. Bounded: past ``limit`` ids everything
      is forgotten.
    * The walks (start, direction, depth limit -> the nodes found, :class:`RememberedWalk`) whose every
      reached agent was verified, read outside any write transaction. In the same epoch, or a later one
      whose logged changes do not touch it, such a walk is answered from memory: no statement but the
      stamp's (and the log's, once per move), nothing verified again. Bounded: past ``walk_limit`` entries
      (nodes and touched ids) every walk is forgotten.
    * The edges walks read, per direction: ``node -> every edge at it`` (up: into it, from its parents;
      down: out of it, to its children), each list complete as read. A walk from a start not walked before
      follows them in Python and reads only the nodes missing. A logged edge forgets its child's list (up)
      and its parent's (down). Bounded: past ``walk_limit`` edges they are forgotten.

    Reads confirmed in an epoch other than the current one are not remembered. No stamp (PostgreSQL, or a
    SQLite file whose stamp table or row is gone): nothing is remembered, every walk reads and verifies in
    full."""

    def __init__(self, limit: int = 250_000, walk_limit: int = 1_000_000) -> None:
        self.limit = limit
        self.walk_limit = walk_limit
        self._known: dict[str, Verified] = {}
        self._walks: dict[_WalkKey, RememberedWalk] = {}
        self._walk_nodes = 0
        self._links: dict[bool, dict[str, tuple[_Link, ...]]] = {True: {}, False: {}}
        self._link_count = 0
        self._epoch = 0
        self._valid_from = 0  # agents confirmed in an epoch before it are confirmed again by their bytes
        self._stamp: tuple[Any, ...] | None = None  # the stamp the current epoch is of

    def begin(self, conn: Connection, dialect: str) -> int | None:
        """The epoch a read on ``conn`` (in its read transaction) confirms in, a new one if the lineage tables
        ``conn`` sees are not those of the current epoch (what changed in between is forgotten then: what
        the change log names, or everything); None: remember nothing."""
        if dialect != "sqlite":
            return None
        try:
            found = conn.exec_driver_sql(_SQLITE_STAMP).first()
        except OperationalError as err:
            if "no such table" not in str(err.orig):
                raise
            return None  # no stamp table: a schema altered past furnace's migrations
        if found is None:  # no stamp row
            return None
        stamp = tuple(found)
        epoch, seen, down = self._epoch_of(stamp)
        if epoch is not None:
            return epoch
        changes = read_changes(conn, seen, stamp, naming=down) if seen is not None else None  # a read: unlocked
        return self._move_to(stamp, seen, changes)

    @serialized
    def _epoch_of(self, stamp: tuple[Any, ...]) -> tuple[int | None, tuple[Any, ...] | None, bool]:
        """The current epoch if ``stamp`` is its stamp (else None), the stamp it is of, and whether a walk
        down is remembered (the agents a logged change names are read for those)."""
        seen = self._stamp
        if stamp == seen:
            return self._epoch, seen, False
        return None, seen, any(not up for _, up, _ in self._walks)

    @serialized
    def _move_to(self, stamp: tuple[Any, ...], seen: tuple[Any, ...] | None, changes: Changes | None) -> int:
        """The epoch of ``stamp``, a new one unless another thread began it meanwhile: forgetting what
        ``changes`` (logged between ``seen`` and ``stamp``) touched, or everything when the epoch moved
        past ``seen`` since or nothing was logged."""
        if stamp != self._stamp:
            if changes is not None and self._stamp == seen:
                self._forget_touched(changes)
            else:
                self._forget_all()
            self._epoch += 1
            self._stamp = stamp
        return self._epoch

    def _forget_all(self) -> None:
        self._valid_from = self._epoch + 1
        self._walks.clear()
        self._walk_nodes = 0
        self._forget_links()

    def _forget_touched(self, changes: Changes) -> None:
        """Forget what ``changes`` may have altered: the walks they touch, the edges at the ends of a logged
        edge, the agents whose verification read a logged key (kept, to be confirmed by their bytes)."""
        for key, walk in list(self._walks.items()):
            if walk.touched_by(key[1], changes):
                del self._walks[key]
                self._walk_nodes -= walk.size
        for up, ends in ((True, changes.children), (False, changes.parents)):
            for node in ends:
                dropped = self._links[up].pop(node, None)
                if dropped is not None:
                    self._link_count -= len(dropped) + 1
        stale = changes.records & self._known.keys()
        if changes.elixirs:  # a parent's stored hash: read by each agent naming that version
            stale |= {id for id, k in self._known.items() if not changes.elixirs.isdisjoint(k.parents)}
        for id in stale:
            self._known[id] = replace(self._known[id], epoch=-1)

    def _forget_links(self) -> None:
        self._links = {True: {}, False: {}}
        self._link_count = 0

    @serialized
    def links(self, epoch: int, up: bool, ids: Iterable[str]) -> dict[str, tuple[_Link, ...]]:
        """The edges at each of ``ids`` (up: into it) read in ``epoch``; ids not read are left out."""
        if epoch != self._epoch:
            return {}
        known = self._links[up]
        return {i: found for i in ids if (found := known.get(i)) is not None}

    @serialized
    def has_links(self, epoch: int, up: bool) -> bool:
        """True when edges in direction ``up`` are remembered in ``epoch``."""
        return epoch == self._epoch and bool(self._links[up])

    @serialized
    def remember_links(self, epoch: int, up: bool, links: dict[str, tuple[_Link, ...]]) -> None:
        """Remember every edge at each node of ``links`` read in ``epoch`` (dropped if a newer epoch began)."""
        if epoch != self._epoch:
            return
        added = sum(len(v) + 1 for v in links.values())
        if self._link_count + added > self.walk_limit:
            self._forget_links()
        known = self._links[up]
        for node, found in links.items():
            if node not in known:
                self._link_count += len(found) + 1
            known[node] = found

    def get(self, id: str) -> Verified | None:
        """What is remembered of ``id``, confirmed in whichever epoch."""
        return self._known.get(id)

    def holds(self, id: str, epoch: int, edges_into: Set[_Edge]) -> bool:
        """True when ``id`` is confirmed for a read in ``epoch`` (an agent: with exactly ``edges_into`` into it)."""
        return not self.pending(epoch, [id], {id: edges_into})

    @serialized
    def pending(self, epoch: int, ids: Iterable[str], into: Mapping[str, Set[_Edge]]) -> list[str]:
        """The ids among ``ids`` not confirmed for a read in ``epoch``: all of them unless ``epoch`` is the
        current one; else those never confirmed, confirmed before everything was last forgotten, touched by
        a logged change since, or (an agent) confirmed with other edges into it than ``into`` gives."""
        if epoch != self._epoch:
            return list(ids)
        out = []
        for id in ids:
            known = self._known.get(id)
            if (
                known is None
                or known.epoch < self._valid_from
                or (known.digest and known.edges != into.get(id, frozenset()))
            ):
                out.append(id)
        return out

    @serialized
    def remember(self, epoch: int, confirmed: dict[str, Verified]) -> None:
        """Remember ids confirmed in a read in ``epoch`` (dropped if a newer epoch began since)."""
        if epoch != self._epoch:
            return
        if len(self._known) + len(confirmed) > self.limit:
            self._known.clear()
        self._known.update(confirmed)

    @serialized
    def walk(self, epoch: int, key: _WalkKey) -> tuple[LineageNode, ...] | None:
        """The nodes of the walk ``key`` remembered for a read in ``epoch`` (None: not remembered, or
        ``epoch`` is not the current one)."""
        found = self._walks.get(key) if epoch == self._epoch else None
        return None if found is None else found.nodes

    @serialized
    def remember_walk(self, epoch: int, key: _WalkKey, walk: RememberedWalk) -> None:
        """Remember a walk read in ``epoch``, every agent it reached verified (dropped if a newer epoch began
        since)."""
        if epoch != self._epoch:
            return
        if self._walk_nodes + walk.size > self.walk_limit:
            self._walks.clear()
            self._walk_nodes = 0
        replaced = self._walks.get(key)
        self._walk_nodes += walk.size - (replaced.size if replaced is not None else 0)
        self._walks[key] = walk


def edges_into(agent: Agent) -> frozenset[_Edge]:
    """The lineage edges into a verified agent, ``(parent, operator, op_version, parent_version)``: exactly
    its parents (``verify_edges`` checked the stored ones equal these)."""
    lineage = agent.lineage
    return frozenset((p.id, lineage.operator, lineage.op_version, p.version) for p in lineage.parents)


@dataclass(frozen=True)
class Planned:
    """What a save of elixir versions writes, planned from the latest rows ``basis`` (``id -> (version,
    content_hash, deleted_at, origin)``): the ref of each item and the rows to insert, sealed."""

    basis: dict[str, tuple[int, str, Any, str]]
    refs: list[ElixirRef]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class _AgentsAhead:
    """What :meth:`SQLStore.save_agents` makes before its transaction: the agents not stored yet, their
    elixirs' versions planned, their rows and their lineage edges' rows."""

    new: list[Agent]
    planned: Planned
    rows: list[dict[str, Any]]
    edges: list[dict[str, Any]]


# the inserts a save runs, built once (SQLAlchemy memoizes a statement's cache key on the object: compiled
# ahead of the transaction and run in it, the key is made once)
_INSERT_VERSIONS = elixir_versions.insert()
_INSERT_AGENTS = agent_rows.insert()


def _edge_rows(agents: Sequence[Agent]) -> list[dict[str, Any]]:
    """The ``lineage_edges`` rows of ``agents`` (one per parent, each edge once)."""
    edges = {
        (p.id, a.id, a.lineage.operator, a.lineage.op_version or "", p.version or 0): None
        for a in agents
        for p in a.lineage.parents
    }
    keys = ("parent", "child", "operator", "op_version", "parent_version")
    return [dict(zip(keys, edge, strict=True)) for edge in edges]


def to_db(ts: datetime) -> datetime:
    """A timestamp as stored: naive UTC."""
    return ts.astimezone(UTC).replace(tzinfo=None)


def from_db(ts: datetime | None) -> datetime | None:
    """A stored timestamp as an aware UTC one."""
    return None if ts is None else ts.replace(tzinfo=UTC)


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterable[Sequence[T]]:
    """``items`` in slices of at most ``size`` (bound parameter lists stay under every driver's limit)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def version_row(stored: Elixir, origin: str, sealer: Sealer) -> dict[str, Any]:
    """The ``elixir_versions`` row of a stored elixir, sealed."""
    body = json.dumps(stored.model_dump(mode="json", exclude=_BODY_EXCLUDE), ensure_ascii=False, sort_keys=True)
    return {
        "id": stored.id,
        "version": stored.version,
        "origin": origin,
        "name": stored.name,
        "content_hash": stored.content_hash,
        "body": body,
        "created_at": to_db(stored.created_at) if stored.created_at else None,
        "language": stored.language,
        "expertise": json.dumps(list(stored.expertise), ensure_ascii=False),
        "seal": elixir_seal(sealer, stored.id, stored.version, stored.content_hash),
    }


def _newest_versions(*cols: Any, ids: Sequence[str] | None = None) -> Any:
    """SELECT ``cols`` of each id's newest version (of ``ids``, or every id): the newest version per id
    found on the primary key's index, joined back to its row."""
    newest = select(_EV.id.label("id"), func.max(_EV.version).label("version"))
    if ids is not None:
        newest = newest.where(_EV.id.in_(ids))
    top = newest.group_by(_EV.id).subquery("newest")
    return select(*cols).join_from(elixir_versions, top, and_(top.c.id == _EV.id, top.c.version == _EV.version))


class SQLStore:
    """:class:`~furnace.storage.store.ElixirStore` on a :class:`SQLDatabase`."""

    def __init__(self, db: SQLDatabase, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.db = db
        self._clock = clock
        self._verified = VerifiedAgents()

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/store.md)."""
        self.db.snapshot_soon()

    def atomically(self, work: Callable[[], T]) -> T:
        """Run ``work`` in one transaction: every write inside it (of this store and of any other adapter on
        the same database, e.g. the synthesis cache's KV) commits together or not at all. The transaction
        begins at the first write, so what ``work`` reads and builds before it (a save's rows, planned and
        sealed) takes no write lock; inside a unit whose writes are not one transaction, it begins at once."""
        unit = self.db._unit()
        if unit is not None and not unit.one_transaction:
            with self.db.transaction():
                return work()
        with self.db.unit(one_transaction=True):
            return work()

    # --- elixirs -------------------------------------------------------------------------------------

    def _row_to_elixir(self, row: Sequence[Any], *, verify: bool = True) -> Elixir:
        return stored_elixir(row, self.db.sealer, verify=verify)

    def _fetch(self, conn: Connection, id: str, version: int | None) -> Elixir:
        if version is None:
            row = conn.execute(_LATEST_VERSION, {"id": id}).first()
        else:
            row = conn.execute(_ONE_VERSION, {"id": id, "version": version}).first()
        if row is not None:
            return self._row_to_elixir(row)
        newest = conn.execute(select(func.max(_EV.version)).where(_EV.id == id)).scalar()
        if newest is None:
            raise NotFound(f"no elixir {id!r}", field="id")
        raise NotFound(f"elixir {id!r} has no version {version} (latest is {newest})", field="version")

    def _latest_rows(self, conn: Connection, ids: Sequence[str]) -> dict[str, tuple[int, str, Any, str]]:
        """``id -> (version, content_hash, deleted_at, origin)`` of each id's latest version: one row per id
        (the newest version found on the primary key's index), however many versions it has."""
        latest: dict[str, tuple[int, str, Any, str]] = {}
        for part in chunks(list(ids)):
            query = _newest_versions(_EV.id, _EV.version, _EV.content_hash, _EV.deleted_at, _EV.origin, ids=part)
            for id, version, content_hash, deleted_at, origin in conn.execute(query):
                latest[id] = (version, content_hash, deleted_at, origin)
        return latest

    def _plan(
        self, latest: dict[str, tuple[int, str, Any, str]], items: Sequence[tuple[Elixir, str]], origin: Origin
    ) -> Planned:
        """The versions saving ``items`` writes over the ``latest`` rows, their rows made and sealed."""
        refs, new = plan_versions(items, dict(latest), origin, self._clock)
        return Planned(latest, refs, [version_row(e, o, self.db.sealer) for e, o in new])

    def _planned_ahead(self, items: Sequence[tuple[Elixir, str]], origin: Origin) -> Planned | None:
        """The plan of a save made from a read before its write transaction (re-validating, hashing and
        sealing outside SQLite's write lock); None inside a transaction already (nothing to gain)."""
        if self.db.in_transaction:
            return None
        with self.db.connect() as conn:
            latest = self._latest_rows(conn, list(dict.fromkeys(id for _, id in items)))
        planned = self._plan(latest, items, origin)
        if planned.rows:
            self.db.compile_ahead(_INSERT_VERSIONS, planned.rows)
        return planned

    def _save_many(
        self, conn: Connection, items: Sequence[tuple[Elixir, str]], origin: Origin, ahead: Planned | None = None
    ) -> list[ElixirRef]:
        """Save ``(elixir, id)`` pairs: one read of the latest rows, one insert of every new version; the rows
        planned ``ahead`` when the latest rows are still the ones it was planned from (else planned here).

        On PostgreSQL the ids are locked first (advisory, until the transaction ends), so concurrent saves
        of one id take turns instead of colliding on its next version (SQLite's writers take turns anyway)."""
        ids = list(dict.fromkeys(id for _, id in items))
        if self.db.dialect == "postgresql":
            for id in sorted(ids):
                conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:id))"), {"id": id})
        latest = self._latest_rows(conn, ids)
        planned = ahead if ahead is not None and ahead.basis == latest else self._plan(latest, items, origin)
        if planned.rows:
            conn.execute(_INSERT_VERSIONS, planned.rows)
        return planned.refs

    def save_elixir(self, elixir: Elixir, *, origin: Origin = "library", if_latest: int | None = None) -> ElixirRef:
        """Store new content as the next version; identical content is a no-op. With ``if_latest``, only
        while that version is still the latest (else :class:`StaleVersion`, nothing written)."""
        if if_latest is None:
            items = [(elixir, elixir.id)]
            ahead = self._planned_ahead(items, origin)
            return self.db.write(lambda conn: self._save_many(conn, items, origin, ahead)[0])
        expected = if_latest

        def work(conn: Connection) -> ElixirRef:
            found = self._latest_rows(conn, [elixir.id]).get(elixir.id)
            if found is None or found[0] != expected or found[2] is not None:
                raise stale_version_error(
                    elixir.id, expected, found[0] if found else None, bool(found and found[2] is not None)
                )
            return self._save_many(conn, [(elixir, elixir.id)], origin)[0]

        try:
            return self.db.write(work, retries=0)
        except IntegrityError:  # another writer saved version expected + 1 meanwhile
            with self.db.connect() as conn:
                found = self._latest_rows(conn, [elixir.id]).get(elixir.id)
            raise stale_version_error(
                elixir.id, expected, found[0] if found else None, bool(found and found[2] is not None)
            ) from None

    def save_elixirs(self, elixirs: Sequence[Elixir], *, origin: Origin = "library") -> list[ElixirRef]:
        """Save several elixirs all-or-nothing, in one transaction."""
        items = [(e, e.id) for e in elixirs]
        ahead = self._planned_ahead(items, origin)
        return self.db.write(lambda conn: self._save_many(conn, items, origin, ahead))

    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        """One version (latest when ``version`` is None), verified; raises NotFound."""
        with self.db.connect() as conn:
            return self._fetch(conn, id, version)

    def get_by_ref(self, ref: ElixirRef) -> Elixir:
        """The exact version; raises LineageError if its content hash differs."""
        return checked_ref(self.get_elixir(ref.id, ref.version), ref)

    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        """Like get, but a withdrawn elixir raises LineageError; an agent's whole record is verified (in the
        same read transaction: the version and its verification see one state of the store)."""
        with self.db.connect() as conn:
            if isinstance(ref_or_id, ElixirRef):
                elixir = checked_ref(self._fetch(conn, ref_or_id.id, ref_or_id.version), ref_or_id)
            else:
                elixir = self._fetch(conn, ref_or_id, None)
            if elixir.withdrawn:
                raise withdrawn_error(elixir)
            self._verify_in(conn, [elixir.id], None)
        return elixir

    def load_many_for_fusion(self, refs: Sequence[ElixirRef]) -> list[Elixir]:
        """What ``load_for_fusion`` gives for each of ``refs`` (a run's parents read ahead); a ref that would
        fail there (missing, altered, withdrawn, a tampered agent among them) is left out, so its own load
        raises where it is used."""
        wanted = [r for r in refs if r.version is not None]
        if not wanted:
            return []
        rows: list[Any] = []
        with self.db.connect() as conn:
            for part in chunks(sorted({r.id for r in wanted})):
                rows += conn.execute(select(*_ELIXIR_COLS).where(_EV.id.in_(part))).all()
        return loadable_for_fusion(wanted, rows, self.db.sealer, self._verify_agents_among)

    def history(self, id: str) -> list[Elixir]:
        """Every version of ``id``, oldest first."""
        rows = self.db.query(select(*_ELIXIR_COLS).where(_EV.id == id).order_by(_EV.version))
        if not rows:
            raise NotFound(f"no elixir {id!r}", field="id")
        return [self._row_to_elixir(r) for r in rows]

    def _latest_selection(
        self, cols: Sequence[Any], *, query: str | None, origin: Origin | None, include_deleted: bool
    ) -> Any:
        sel = _newest_versions(*cols)
        if origin is not None:
            sel = sel.where(_EV.origin == origin)
        if not include_deleted:
            sel = sel.where(_EV.deleted_at.is_(None))
        if query and query.strip():
            q = query.strip().lower()
            # id and name in SQL; expertise (a JSON list) is matched exactly in Python after
            sel = sel.where(
                or_(
                    func.lower(_EV.id).contains(q, autoescape=True),
                    func.lower(_EV.name).contains(q, autoescape=True),
                    func.lower(_EV.expertise).contains(q, autoescape=True),
                )
            )
        return sel.order_by(_EV.id)

    def list_elixirs(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Elixir]:
        """Latest versions, sorted by id; ``query`` matches name, id or expertise (case-insensitive)."""
        sel = self._latest_selection(_ELIXIR_COLS, query=query, origin=origin, include_deleted=include_deleted)
        found = [self._row_to_elixir(r, verify=False) for r in self.db.query(sel)]
        found = [e for e in found if matches_query(e, query)]
        return found[:limit] if limit is not None else found

    def list_summaries(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[ElixirSummary]:
        """:meth:`list_elixirs` as summaries, from the listing's columns (no body is read)."""
        cols: tuple[Any, ...] = (_EV.id, _EV.version, _EV.name, _EV.language, _EV.expertise, _EV.content_hash)
        cols += (_EV.created_at, _EV.deleted_at)
        sel = self._latest_selection(cols, query=query, origin=origin, include_deleted=include_deleted)
        out = []
        for i, v, n, lang, exp, h, c, d in self.db.query(sel):
            summary = ElixirSummary(i, v, n, lang or "", tuple(json.loads(exp or "[]")), h, from_db(c), d is not None)
            q = (query or "").strip().lower()
            if not q or any(q in t.lower() for t in (i, n, *summary.expertise)):
                out.append(summary)
        return out[:limit] if limit is not None else out

    def delete_elixir(self, id: str) -> None:
        """Soft-delete every version of ``id``; raises NotFound."""

        def work(conn: Connection) -> None:
            if not conn.execute(select(func.count()).where(_EV.id == id)).scalar():
                raise NotFound(f"no elixir {id!r}", field="id")
            conn.execute(
                update(elixir_versions)
                .where(_EV.id == id, _EV.deleted_at.is_(None))
                .values(deleted_at=to_db(self._clock()))
            )

        self.db.write(work)

    # --- agents --------------------------------------------------------------------------------------

    def save_agent(self, agent: Agent) -> bool:
        """Persist agent + child elixir + lineage edges in one transaction. False if it existed."""
        return self.save_agents([agent])[0]

    def save_agents(self, agents: Sequence[Agent]) -> list[bool]:
        """Persist agents (each with its child elixir and lineage edges) in one transaction; per agent,
        False if it existed (kept as stored)."""

        ahead: _AgentsAhead | None = None
        if not self.db.in_transaction:  # rows made and sealed outside the write transaction (see _planned_ahead)
            with self.db.connect() as conn:
                new = self._new_agents(conn, agents)
            if new:
                planned = self._planned_ahead([(a.elixir, a.id) for a in new], "agent")
                assert planned is not None
                rows = [self._agent_row(a, r.version, r.content_hash) for a, r in zip(new, planned.refs, strict=True)]
                ahead = _AgentsAhead(new, planned, rows, _edge_rows(new))
                self.db.compile_ahead(_INSERT_AGENTS, rows)
                if ahead.edges:
                    self.db.compile_ahead(self.db.insert_if_absent(lineage_edges), ahead.edges)

        def work(conn: Connection) -> list[bool]:
            new = self._new_agents(conn, agents)
            if not new:
                return [False] * len(agents)
            # what was made ahead holds while the same agents are new
            same = ahead if ahead is not None and [a.id for a in ahead.new] == [a.id for a in new] else None
            items = [(a.elixir, a.id) for a in new]
            refs = self._save_many(conn, items, "agent", same.planned if same else None)
            if same is not None and refs == same.planned.refs:
                rows = same.rows
            else:
                rows = [self._agent_row(a, ref.version, ref.content_hash) for a, ref in zip(new, refs, strict=True)]
            conn.execute(_INSERT_AGENTS, rows)
            edges = same.edges if same is not None else _edge_rows(new)
            if edges:
                conn.execute(self.db.insert_if_absent(lineage_edges), edges)
            saved = {a.id for a in new}
            out = []
            for agent in agents:  # the first of an id listed twice is the one saved
                out.append(agent.id in saved)
                saved.discard(agent.id)
            return out

        return self.db.write(work)

    def _new_agents(self, conn: Connection, agents: Sequence[Agent]) -> list[Agent]:
        """The agents not stored yet (the first of an id listed twice)."""
        seen: set[str] = set()
        for part in chunks(list(dict.fromkeys(a.id for a in agents))):
            seen.update(r[0] for r in conn.execute(select(agent_rows.c.id).where(agent_rows.c.id.in_(part))))
        new: list[Agent] = []
        for agent in agents:
            if agent.id not in seen:
                seen.add(agent.id)
                new.append(agent)
        return new

    def _agent_row(self, agent: Agent, version: int, content_hash: str) -> dict[str, Any]:
        lineage = agent.lineage
        seal = record_seal(lineage, content_hash, agent.system_prompt, agent.tools, agent.members)
        seal["mac"] = agent_mac(self.db.sealer, agent.id, version, seal["record_hash"])
        return {
            "id": agent.id,
            "lineage": lineage.model_dump_json(),
            "lineage_hash": lineage.lineage_hash,
            "elixir_version": version,
            "system_prompt": agent.system_prompt,
            "tools": json.dumps(list(agent.tools)),
            "members": json.dumps([m.model_dump(mode="json") for m in agent.members]),
            "created_at": to_db(self._clock()),
            "seal": json.dumps(seal, sort_keys=True),
        }

    def _load_agents(self, conn: Connection, ids: Sequence[str] | None, limit: int | None = None) -> list[Agent]:
        """The agents among ``ids`` (every agent when None), newest first, each verified in full."""
        rows, edges, elixirs = self._agent_reads(conn, ids, limit)
        return [self._verified_row(conn, row, edges[row[0]], elixirs) for row in rows]

    def _agent_reads(
        self, conn: Connection, ids: Sequence[str] | None, limit: int | None = None
    ) -> tuple[list[Any], dict[str, set[_Edge]], dict[tuple[str, int], Any]]:
        """The agent rows among ``ids`` (every agent when None; newest first), the edges into each and every
        stored version they name (see :meth:`_elixirs_for`)."""
        rows: list[Any] = []
        order = (agent_rows.c.created_at.desc(), agent_rows.c.id)
        if ids is None:
            query = select(*_AGENT_COLS).order_by(*order)
            rows = list(conn.execute(query.limit(limit) if limit is not None else query))
        else:
            for part in chunks(list(dict.fromkeys(ids))):
                rows += conn.execute(select(*_AGENT_COLS).where(agent_rows.c.id.in_(part)).order_by(*order)).all()
            rows.sort(key=lambda r: (-r[6].timestamp(), r[0]))
        if not rows:
            return [], {}, {}
        edges: dict[str, set[_Edge]] = {row[0]: set() for row in rows}
        edges.update(self._edges_into(conn, list(edges)))  # type: ignore[arg-type]
        return rows, edges, self._elixirs_for(conn, rows)

    def _verified_row(
        self, conn: Connection, row: Sequence[Any], edges: Set[_Edge], elixirs: dict[tuple[str, int], Any]
    ) -> Agent:
        """The agent of a stored row, every check made (its persona and parents among ``elixirs``)."""

        def stored_hash(pid: str, version: int) -> str | None:
            found = elixirs.get((pid, version))
            return found[2] if found is not None else None

        def persona(id: str, version: int) -> Elixir:
            found = elixirs.get((id, version))
            return self._row_to_elixir(found) if found is not None else self._fetch(conn, id, version)

        return verified_agent(
            row, sealer=self.db.sealer, stored_hash=stored_hash, edges=edges, persona=persona, created_at=from_db
        )

    def _elixirs_for(self, conn: Connection, rows: Sequence[Sequence[Any]]) -> dict[tuple[str, int], Any]:
        """Every stored version the agent ``rows`` name (their personas and their lineage's parents)."""
        ids = {row[0] for row in rows}
        for row in rows:
            try:
                ids.update(p["id"] for p in json.loads(row[1])["parents"])
            except (ValueError, TypeError, KeyError, AttributeError):
                continue  # unreadable: the per-agent checks say so
        return self._versions_of(conn, ids)

    def _versions_of(self, conn: Connection, ids: Iterable[Any]) -> dict[tuple[str, int], Any]:
        """Every stored version of ``ids``, by ``(id, version)``."""
        found: dict[tuple[str, int], Any] = {}
        for part in chunks(sorted(i for i in set(ids) if isinstance(i, str))):
            for row in conn.execute(select(*_ELIXIR_COLS).where(_EV.id.in_(part))):
                found[(row[0], row[1])] = row
        return found

    def verify_agents(self, ids: Sequence[str]) -> None:
        """Raise LineageError (naming the agent and field group) if any agent among ``ids`` was altered;
        ids that are not agents are ignored."""
        self._verify_agents_among(ids)

    def _verify_agents_among(self, ids: Sequence[str]) -> None:
        if ids:
            with self.db.connect() as conn:
                self._verify_in(conn, ids, None)

    def _verify_in(self, conn: Connection, ids: Sequence[str], into: _EdgesInto | None) -> _EdgesInto:
        """Verify the agents among ``ids``: not those :class:`VerifiedAgents` holds confirmed for this epoch
        with the same edges into them (``into``: read here when None, else every edge into each of ``ids``);
        those remembered from before by the digest of their stored bytes; the others in full. Returns the
        edges into each of ``ids`` (empty when nothing is remembered)."""
        unique = list(dict.fromkeys(ids))
        epoch = self._verified.begin(conn, self.db.dialect)
        if epoch is None:
            self._load_agents(conn, unique)
            return {}
        if into is None:
            into = self._edges_into(conn, unique)
        pending = self._verified.pending(epoch, unique, into)
        if not pending:
            return into
        confirmed = self._confirmed_by_digest(conn, epoch, pending)
        rest = [i for i in pending if i not in confirmed]
        rows, edges, elixirs = self._agent_reads(conn, rest)
        for row in rows:
            agent = self._verified_row(conn, row, edges[row[0]], elixirs)
            parents = tuple((p.id, p.version) for p in agent.lineage.parents if p.version is not None)
            digest = record_digest(row, edges[row[0]], elixirs, parents)
            confirmed[agent.id] = Verified(epoch, digest, edges_into(agent), parents)
        for id in rest:
            confirmed.setdefault(id, Verified(epoch))  # no agent row: nothing of it to verify
        self._verified.remember(epoch, confirmed)
        return into

    def _confirmed_by_digest(self, conn: Connection, epoch: int, ids: Sequence[str]) -> dict[str, Verified]:
        """The agents among ``ids`` remembered from an earlier epoch whose stored bytes are still those their
        verification read (one read of their rows, edges, personas and parents)."""
        known = {i: k for i in ids if (k := self._verified.get(i)) is not None and k.digest}
        if not known:
            return {}
        rows: list[Any] = []
        for part in chunks(list(known)):
            rows += conn.execute(select(*_AGENT_COLS).where(agent_rows.c.id.in_(part))).all()
        edges = self._edges_into(conn, list(known))
        elixirs = self._versions_of(conn, [*known, *(p for k in known.values() for p, _ in k.parents)])
        confirmed: dict[str, Verified] = {}
        for row in rows:
            k = known[row[0]]
            into = edges.get(row[0], frozenset())
            if into == k.edges and record_digest(row, into, elixirs, k.parents) == k.digest:
                confirmed[row[0]] = Verified(epoch, k.digest, k.edges, k.parents)
        return confirmed

    def _edges_into(self, conn: Connection, ids: Sequence[str]) -> dict[str, frozenset[_Edge]]:
        """``child -> {(parent, operator, op_version, parent_version)}`` of every edge into ``ids``."""
        into: dict[str, set[_Edge]] = {}
        for part in chunks(ids):
            for parent, child, operator, op_version, parent_version in conn.execute(_EDGES_INTO, {"ids": part}):
                into.setdefault(child, set()).add((parent, operator, op_version, parent_version))
        return {child: frozenset(edges) for child, edges in into.items()}

    def child_ids(self, parents: Sequence[str]) -> dict[str, set[str]]:
        """The ids of each parent's children by the lineage edges, unverified: a filter for "might this
        agent be stored?", never a read of an agent."""
        out: dict[str, set[str]] = {p: set() for p in parents}
        with self.db.connect() as conn:
            for part in chunks(list(out)):
                for parent, child in conn.execute(
                    select(lineage_edges.c.parent, lineage_edges.c.child).where(lineage_edges.c.parent.in_(part))
                ):
                    out[parent].add(child)
        return out

    def stored_child(self, id: str, parents: Sequence[ElixirRef]) -> Agent:
        """``get_agent(id)`` for a fusion's child: "not stored" costs a point read of the id alone."""
        if not self.db.query(select(agent_rows.c.id).where(agent_rows.c.id == id)):
            raise NotFound(f"no agent {id!r}", field="id")
        return self.get_agent(id)

    def get_agent(self, id: str) -> Agent:
        """Load and verify an agent; raises NotFound or LineageError."""
        with self.db.connect() as conn:
            found = self._load_agents(conn, [id])
        if not found:
            raise NotFound(f"no agent {id!r}", field="id")
        return found[0]

    def list_agents(self, *, limit: int | None = None) -> list[Agent]:
        """Agents, newest first (each verified)."""
        with self.db.connect() as conn:
            return self._load_agents(conn, None, limit)

    # --- lineage DAG ---------------------------------------------------------------------------------

    def add_edge(
        self, parent: str, child: str, *, operator: str, op_version: str = "", parent_version: int | None = None
    ) -> None:
        """A lineage edge (idempotent)."""
        row = {
            "parent": parent,
            "child": child,
            "operator": operator,
            "op_version": op_version or "",
            "parent_version": parent_version or 0,
        }
        self.db.write(lambda conn: conn.execute(self.db.insert_if_absent(lineage_edges), row))

    def _reach(self, conn: Connection, id: str, *, up: bool) -> list[tuple[str, str, str, str, int]]:
        """``(from, to, operator, op_version, parent_version)`` of every edge reachable from ``id`` (up:
        towards parents; every edge into each reached node then), one query."""
        near, far = ("child", "parent") if up else ("parent", "child")
        sql = text(
            f"WITH RECURSIVE reach(id) AS (SELECT CAST(:start AS VARCHAR) UNION SELECT e.{far} FROM lineage_edges e"
            f" JOIN reach r ON e.{near} = r.id) SELECT e.{near}, e.{far}, e.operator, e.op_version, e.parent_version"
            f" FROM lineage_edges e WHERE e.{near} IN (SELECT id FROM reach)"
        )
        return conn.execute(sql, {"start": id}).tuples().all()  # type: ignore[return-value]

    def _reached_links(self, conn: Connection, epoch: int, id: str, up: bool) -> dict[str, tuple[_Link, ...]]:
        """Every edge at each node reachable from ``id`` (up: into it), complete: those remembered in
        ``epoch`` and reads of the nodes missing, level by level for :data:`_LINK_LEVELS` levels, then of
        everything reachable from the nodes still missing in one recursive query (SQLite only; at once when
        nothing is remembered in ``epoch``)."""
        found: dict[str, tuple[_Link, ...]] = {}
        frontier = {id}
        levels = 0 if self._verified.has_links(epoch, up) else _LINK_LEVELS
        while frontier:
            found.update(self._verified.links(epoch, up, frontier))
            missing = sorted(n for n in frontier if n not in found)
            if missing:
                levels += 1
                read = self._links_of(conn, missing, up, recursive=levels > _LINK_LEVELS)
                self._verified.remember_links(epoch, up, read)
                found.update(read)
            frontier = {far for node in frontier for far, *_ in found[node] if far not in found}
        return found

    def _links_of(
        self, conn: Connection, ids: Sequence[str], up: bool, *, recursive: bool
    ) -> dict[str, tuple[_Link, ...]]:
        """``node -> every edge at it`` (up: into it) of ``ids`` (recursive: and of everything reachable from
        them); a node without such edges maps to ``()``."""
        near, far = ("child", "parent") if up else ("parent", "child")
        read: dict[str, list[_Link]] = {}
        for part in chunks(ids):
            seeds = json.dumps(list(part))
            reach = (
                f"WITH RECURSIVE reach(id) AS (SELECT value FROM json_each(:seeds) UNION SELECT e.{far}"
                f" FROM lineage_edges e JOIN reach r ON e.{near} = r.id)"
                if recursive
                else "WITH reach(id) AS (SELECT value FROM json_each(:seeds))"
            )
            sql = text(
                f"{reach} SELECT r.id, e.{far}, e.operator, e.op_version, e.parent_version FROM reach r"
                f" LEFT JOIN lineage_edges e ON e.{near} = r.id"
            )
            for node, other, operator, op_version, parent_version in conn.execute(sql, {"seeds": seeds}):
                out = read.setdefault(node, [])
                if other is not None:
                    out.append((other, operator, op_version, parent_version))
        return {node: tuple(out) for node, out in read.items()}

    def _reachable(self, id: str, *, up: bool) -> list[tuple[str, str, str]]:
        """``(from, to, operator)`` of every edge reachable from ``id`` (up: towards parents), one query."""
        with self.db.connect() as conn:
            return [(a, b, op) for a, b, op, _, _ in self._reach(conn, id, up=up)]

    def _walk(self, id: str, *, up: bool, max_depth: int | None) -> list[LineageNode]:
        key = (id, up, max_depth)
        with self.db.connect() as conn:  # one read: the edges walked are the edges verified
            epoch = self._verified.begin(conn, self.db.dialect)
            if conn.info.get("furnace_write"):  # uncommitted rows may be rolled back: never a walk to remember
                epoch = None
            if epoch is not None and (remembered := self._verified.walk(epoch, key)) is not None:
                return list(remembered)  # the stamp unchanged since it was verified: the file holds what it read
            links: Adjacency = {}
            into: _EdgesInto | None = None  # up: every edge into each reached node
            if epoch is None:
                found: dict[str, set[_Edge]] = {}
                for near, far, operator, op_version, parent_version in self._reach(conn, id, up=up):
                    links.setdefault(near, []).append((far, operator))  # one pass over ~2 rows per node
                    found.setdefault(near, set()).add((far, operator, op_version, parent_version))
                into = found if up else None
            else:  # the edges remembered in this epoch, the nodes missing read
                at = self._reached_links(conn, epoch, id, up)
                links = {node: [(far, operator) for far, operator, _, _ in out] for node, out in at.items() if out}
                into = {node: frozenset(out) for node, out in at.items()} if up else None
            nodes = bfs(id, links, max_depth)
            reached = [id, *(n.id for n in nodes)]
            ends = frozenset(reached) if not up else frozenset()
            if not up:  # a redirected edge must not hide a child: agents whose lineage names a reached node
                leaves = {id, *(n.id for n in nodes if max_depth is None or n.depth < max_depth)}
                reached += self._naming(conn, leaves)
            verified_into = self._verify_in(conn, reached, into)
            if epoch is not None:  # what a change must touch to alter it: the nodes reached and their parents
                touch = frozenset({*reached, *(far for node in reached for far, *_ in verified_into.get(node, ()))})
                self._verified.remember_walk(epoch, key, RememberedWalk(tuple(nodes), touch, ends))
        return nodes

    def _naming(self, conn: Connection, ids: set[str]) -> list[str]:
        """Agents whose lineage record names one of ``ids`` as a parent (a text match narrowed in Python)."""
        named: list[str] = []
        for part in chunks(sorted(ids), 50):
            clause = or_(*(agent_rows.c.lineage.contains(json.dumps(i), autoescape=True) for i in part))
            for agent_id, lineage_json in conn.execute(select(agent_rows.c.id, agent_rows.c.lineage).where(clause)):
                parents = named_parents(lineage_json)
                if parents is None or parents & ids:  # unreadable: verified (and refused) with the others
                    named.append(agent_id)
        return named

    def ancestors(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every ancestor of ``id`` with its shortest depth (agents on the way verified)."""
        return self._walk(id, up=True, max_depth=max_depth)

    def descendants(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every descendant of ``id`` with its shortest depth (agents on the way verified)."""
        return self._walk(id, up=False, max_depth=max_depth)

    def common_ancestors(self, a: str, b: str) -> list[str]:
        """Ids that are ancestors of both (every agent involved verified)."""
        up_a = {n.id for n in bfs(a, adjacency(self._reachable(a, up=True)))}
        up_b = {n.id for n in bfs(b, adjacency(self._reachable(b, up=True)))}
        both = sorted(up_a & up_b)
        self._verify_agents_among([a, b, *both])
        return both

    def same_blood(self, a: str, b: str) -> bool:
        """True when one descends from the other or they share an ancestor."""
        if a == b:
            return True
        anc_a = {n.id for n in bfs(a, adjacency(self._reachable(a, up=True)))}
        anc_b = {n.id for n in bfs(b, adjacency(self._reachable(b, up=True)))}
        return b in anc_a or a in anc_b or bool(anc_a & anc_b)
