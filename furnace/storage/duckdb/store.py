"""The elixir library, agents and lineage DAG in DuckDB (tables: 0001_library.sql).

Every method opens a short-lived connection through
:class:`~furnace.storage.duckdb.db.Database` and closes it before returning,
so no connection outlives one call. Writes are one transaction each and
idempotent by natural keys; a transaction conflict from another thread of the
same process is retried a few times.

Lineage queries walk an in-memory index of ``lineage_edges`` caught up from
the table before each walk (see :class:`_EdgeIndex` for the measurements
behind the choice); ``_ANCESTORS``/``_DESCENDANTS`` keep the equivalent
recursive CTEs (``USING KEY (id)``) for the benchmark and for SQL users.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, suppress
from datetime import UTC, datetime
from functools import cache, partial
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from furnace.domain.agent import Agent, LineageNode, record_seal
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import NotFound
from furnace.storage.duckdb.db import Database
from furnace.storage.memory import Adjacency, bfs
from furnace.storage.seals import Sealer, agent_mac, elixir_seal
from furnace.storage.store import (
    ElixirSummary,
    Origin,
    as_stored,
    checked_ref,
    loadable_for_fusion,
    plan_versions,
    stale_version_error,
    stored_elixir,
    utc_now,
    verified_agent,
    withdrawn_error,
)

T = TypeVar("T")
Con = duckdb.DuckDBPyConnection

_ELIXIR_COLS = "id, version, content_hash, body, created_at, deleted_at, seal"
_LATEST_KEPT = 1024  # latest versions remembered per store (with the epoch they were read at)
_BODY_EXCLUDE = {"id", "version", "created_at", "deleted_at", "content_hash"}


def _version_row(stored: Elixir, origin: str, sealer: Sealer) -> list[Any]:
    """The ``elixir_versions`` values of a stored elixir, in the INSERTs' column order (its seal last)."""
    body = json.dumps(stored.model_dump(mode="json", exclude=_BODY_EXCLUDE), ensure_ascii=False, sort_keys=True)
    return [
        stored.id,
        stored.version,
        origin,
        stored.name,
        stored.content_hash,
        body,
        _to_db(stored.created_at),  # type: ignore[arg-type]
        stored.language,
        list(stored.expertise),
        elixir_seal(sealer, stored.id, stored.version, stored.content_hash),
    ]


# BFS levels: the start node at depth 0; each step expands only nodes not yet in the
# recurring table (so each keeps its shortest depth and is visited once) and picks,
# per new node, the smallest neighbour id (and its operator) it was reached through.
# {near}/{far} are child/parent for ancestors and parent/child for descendants.
_WALK = """
WITH RECURSIVE walk(id, depth, operator, via) USING KEY (id) AS (
    SELECT ?::VARCHAR, 0, NULL::VARCHAR, NULL::VARCHAR
    UNION
    SELECT e.{far}, min(w.depth) + 1,
           arg_min(e.operator, e.{near} || chr(1) || e.operator), min(e.{near})
    FROM walk w JOIN lineage_edges e ON e.{near} = w.id
    WHERE w.depth < ? AND e.{far} NOT IN (SELECT id FROM recurring.walk)
    GROUP BY e.{far}
)
SELECT id, depth, operator, via FROM walk WHERE depth > 0 ORDER BY depth, id
"""
_ANCESTORS = _WALK.format(near="child", far="parent")
_DESCENDANTS = _WALK.format(near="parent", far="child")
_NO_LIMIT = 2**31 - 1

# One fingerprint per agent over everything its verification reads (see _verify_agents_among). Each
# table is narrowed to the wanted ids before the joins: joining the whole tables built hash tables
# over every body and prompt (~0.45 s of CPU for 1,900 ancestors among 100,000 agents; this: ~0.09 s).
_FINGERPRINTS = """
WITH wanted AS (SELECT unnest(?::VARCHAR[]) AS id),
a AS (SELECT * FROM agents WHERE id IN (SELECT id FROM wanted)),
e AS (SELECT id, version, content_hash, body, seal FROM elixir_versions WHERE id IN (SELECT id FROM wanted)),
edges AS (
    SELECT child, string_agg(concat_ws(chr(30), parent, operator, op_version, parent_version), chr(29)
                             ORDER BY parent, operator, op_version, parent_version) AS edges
    FROM lineage_edges WHERE child IN (SELECT id FROM wanted) GROUP BY child
)
SELECT a.id, md5(concat_ws(chr(31), a.lineage, a.elixir_version, a.system_prompt, a.tools, a.members,
                           a.seal::VARCHAR, e.content_hash, e.body, e.seal, edges.edges))
FROM a
LEFT JOIN e ON e.id = a.id AND e.version = a.elixir_version
LEFT JOIN edges ON edges.child = a.id
"""


def _to_db(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(tzinfo=None)


def _from_db(ts: datetime | None) -> datetime | None:
    return None if ts is None else ts.replace(tzinfo=UTC)


class DuckDBStore:
    """:class:`~furnace.storage.store.ElixirStore` over one DuckDB file."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] = utc_now, conflict_retries: int = 5) -> None:
        self.db = db
        self._clock = clock
        self._verified: dict[str, str] = {}  # agent id -> fingerprint of the record last verified in full
        # (Database.epoch, the ids checked at it): while the epoch is unchanged those need no new look
        self._checked: tuple[int, set[str]] = (-1, set())
        self._checked_lock = threading.Lock()  # parents of one fusion are loaded on two threads at once
        # id -> (Database.epoch, latest version) read at that epoch: while it is unchanged, no newer version
        # (or deletion) can exist, so repeated reads of a latest version (a repeated fusion's parents) skip the query
        self._latest_read: OrderedDict[str, tuple[int, Elixir]] = OrderedDict()
        self._latest_lock = threading.Lock()
        self._conflict_retries = conflict_retries

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/storage.md)."""
        from furnace.storage.duckdb import snapshot

        snapshot.request(self.db)

    def atomically(self, work: Callable[[], T]) -> T:
        """Run ``work`` in one transaction on this file: every write inside it (of this store and of any
        other adapter on the same file, e.g. the synthesis cache's KV) commits together or not at all.
        A write conflict with another thread of this process runs ``work`` again (it must be idempotent);
        inside a unit's open transaction, ``work`` joins it."""
        return self._write(lambda con: work())

    # --- plumbing --------------------------------------------------------

    def _write(self, work: Callable[[Con], T]) -> T:
        """Run ``work`` in one transaction, retrying same-process write conflicts."""
        return self.db.write(work, retries=self._conflict_retries)

    def _row_to_elixir(self, row: Sequence[Any], *, verify: bool = True) -> Elixir:
        """The stored elixir; ``verify`` checks its keyed seal and content hash (a listing does not: re-hashing
        every body made ``elixir list`` slow)."""
        return stored_elixir(row, self.db.sealer, verify=verify)

    def _fetch(self, con: Con, id: str, version: int | None) -> Elixir:
        return self._fetch_flagged(con, id, version, agent_flag=False)[0]

    def _fetch_flagged(self, con: Con, id: str, version: int | None, *, agent_flag: bool) -> tuple[Elixir, bool]:
        """The elixir (latest when ``version`` is None) and, with ``agent_flag``, whether ``id`` is an agent
        (in the same statement: a fusion's parent needs its agent record verified only when it is one)."""
        flag = ", EXISTS (SELECT 1 FROM agents WHERE id = ?)" if agent_flag else ", FALSE"
        head = [id] if agent_flag else []
        if version is None:
            rows = con.execute(  # QUALIFY: a third less CPU than ORDER BY version DESC LIMIT 1 in DuckDB 2.0
                f"SELECT {_ELIXIR_COLS}{flag} FROM elixir_versions WHERE id = ? QUALIFY version = max(version) OVER ()",
                [*head, id],
            ).fetchall()
            if not rows:
                raise NotFound(f"no elixir {id!r}", field="id")
            return self._row_to_elixir(rows[0][:-1]), bool(rows[0][-1])
        rows = con.execute(
            f"SELECT {_ELIXIR_COLS}{flag} FROM elixir_versions WHERE id = ? AND version = ?", [*head, id, version]
        ).fetchall()
        if rows:
            return self._row_to_elixir(rows[0][:-1]), bool(rows[0][-1])
        latest = con.execute("SELECT max(version) FROM elixir_versions WHERE id = ?", [id]).fetchall()[0][0]
        if latest is None:
            raise NotFound(f"no elixir {id!r}", field="id")
        raise NotFound(f"elixir {id!r} has no version {version} (latest is {latest})", field="version")

    def _save_elixir(self, con: Con, elixir: Elixir, origin: Origin, id: str) -> ElixirRef:
        return self._save_many(con, [(elixir, id)], origin)[0]

    def _save_many(self, con: Con, items: Sequence[tuple[Elixir, str]], origin: Origin) -> list[ElixirRef]:
        """Save ``(elixir, id)`` pairs: one query for the latest rows, one insert for all new versions."""
        ids = list(dict.fromkeys(id for _, id in items))
        latest: dict[str, tuple[int, str, Any, str]] = {}
        if len(ids) == 1:  # one elixir (an agent, an edit): its versions' small columns, the latest picked here
            versions = con.execute(  # (a third of the CPU of ORDER BY version DESC LIMIT 1 in DuckDB 2.0)
                "SELECT version, content_hash, deleted_at, origin FROM elixir_versions WHERE id = ?", ids
            ).fetchall()
            if versions:
                latest[ids[0]] = max(versions, key=lambda row: row[0])
            ids = []
        for chunk in range(0, len(ids), 1000):
            for id, version, content_hash, deleted_at, row_origin in con.execute(
                "SELECT id, max(version), arg_max(content_hash, version), arg_max(deleted_at, version),"
                " arg_max(origin, version) FROM elixir_versions WHERE list_contains(?::VARCHAR[], id) GROUP BY id",
                [ids[chunk : chunk + 1000]],
            ).fetchall():
                latest[id] = (version, content_hash, deleted_at, row_origin)
        refs, new = plan_versions(items, latest, origin, self._clock)
        rows = [_version_row(e, o, self.db.sealer) for e, o in new]
        for chunk in range(0, len(rows), 500):
            part = rows[chunk : chunk + 500]
            con.execute(
                "INSERT INTO elixir_versions (id, version, origin, name, content_hash, body, created_at, language,"
                " expertise, seal) SELECT unnest(?::VARCHAR[]), unnest(?::INTEGER[]), unnest(?::VARCHAR[]),"
                " unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::TIMESTAMP[]),"
                " unnest(?::VARCHAR[]), unnest(?::VARCHAR[][]), unnest(?::VARCHAR[])",
                [list(column) for column in zip(*part, strict=True)],
            )
        return refs

    # --- elixirs ---------------------------------------------------------

    def save_elixir(self, elixir: Elixir, *, origin: Origin = "library", if_latest: int | None = None) -> ElixirRef:
        """Store new content as the next version; identical content is a no-op.

        One read and at most one INSERT, so no BEGIN/COMMIT around them (``write_one``): a
        concurrent save of the same id makes the INSERT collide on ``(id, version)`` and the
        read + insert is retried, as a transaction would be. With ``if_latest`` (compare-and-set)
        the check is inside the INSERT (one statement, no read, when it succeeds; on its own, a
        version saved meanwhile makes it collide on ``(id, version)``, which is cheaper than a
        subquery looking for one)."""
        if if_latest is not None:
            return self.db.write_one(lambda con: self._save_if_latest(con, elixir, if_latest), retries=0)
        return self.db.write_one(
            lambda con: self._save_elixir(con, elixir, origin, elixir.id), retries=self._conflict_retries
        )

    def _save_if_latest(self, con: Con, elixir: Elixir, expected: int) -> ElixirRef:
        """Insert version ``expected + 1`` only while ``expected`` is the latest, not deleted, and holds other
        content (its origin is carried over inside the statement); otherwise say why, writing nothing."""
        stored = as_stored(elixir, id=elixir.id, version=expected + 1, created_at=self._clock())
        row = _version_row(stored, "", self.db.sealer)
        insert = (
            "INSERT INTO elixir_versions (id, version, origin, name, content_hash, body, created_at, language,"
            " expertise, seal) SELECT ?, ?, origin, ?, ?, ?, ?, ?, ?, ? FROM elixir_versions"
            " WHERE id = ? AND version = ? AND deleted_at IS NULL AND content_hash <> ?"
        )
        params = [*row[:2], *row[3:], stored.id, expected, stored.content_hash]
        if self.db.in_transaction:  # a failed statement would end the caller's transaction: check, don't collide
            insert += " AND NOT EXISTS (SELECT 1 FROM elixir_versions WHERE id = ? AND version > ?)"
            params += [stored.id, expected]
        try:  # on its own, versions being contiguous, a later version makes ``expected + 1`` collide
            inserted = con.execute(insert + " RETURNING version", params).fetchall()
        except (duckdb.ConstraintException, duckdb.TransactionException):
            inserted = []
        if inserted:
            return stored.ref
        found = con.execute(
            "SELECT version, content_hash, deleted_at FROM elixir_versions WHERE id = ?"
            " QUALIFY version = max(version) OVER ()",
            [stored.id],
        ).fetchall()
        if found and found[0][0] == expected and found[0][2] is None:  # same content: the usual no-op
            return ElixirRef(id=stored.id, version=expected, content_hash=found[0][1])
        raise stale_version_error(
            stored.id, expected, found[0][0] if found else None, bool(found and found[0][2] is not None)
        )

    def save_elixirs(self, elixirs: Sequence[Elixir], *, origin: Origin = "library") -> list[ElixirRef]:
        """Save several elixirs all-or-nothing, in one transaction."""
        return self._write(lambda con: self._save_many(con, [(e, e.id) for e in elixirs], origin))

    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        """One version (latest when ``version`` is None); raises NotFound.

        A latest version read at the current ``Database.epoch`` is reused without a query: the epoch
        moves with every open of the file and around every statement that may write."""
        if version is not None:
            with self.db.connect() as con:
                return self._fetch(con, id, version)
        epoch = self.db.epoch  # taken before reading: a write from here on makes the next call read again
        known = self._known_latest(id, epoch)
        if known is not None:
            return known
        with self.db.connect() as con:
            elixir = self._fetch(con, id, None)
        self._remember_latest(epoch, elixir)
        return elixir

    def _known_latest(self, id: str, epoch: int) -> Elixir | None:
        """The latest version of ``id`` when it was read at ``epoch`` (so it still is the latest)."""
        with self._latest_lock:
            known = self._latest_read.get(id)
        return known[1] if known is not None and known[0] == epoch else None

    def _remember_latest(self, epoch: int, elixir: Elixir) -> None:
        with self._latest_lock:
            self._latest_read[elixir.id] = (epoch, elixir)
            self._latest_read.move_to_end(elixir.id)
            while len(self._latest_read) > _LATEST_KEPT:
                self._latest_read.popitem(last=False)

    def _mark_checked(self, epoch: int, ids: Sequence[str]) -> None:
        """Record ``ids`` as verified agents or non-agents at ``epoch`` (see ``_verify_agents_among``)."""
        with self._checked_lock:
            checked_epoch, checked = self._checked
            if epoch >= checked_epoch:  # (a mark of an older epoch is stale already)
                self._checked = (epoch, (checked if epoch == checked_epoch else set()) | set(ids))

    def get_by_ref(self, ref: ElixirRef) -> Elixir:
        """The exact version; raises LineageError if its content hash differs."""
        return checked_ref(self.get_elixir(ref.id, ref.version), ref)

    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        """Like get, but a withdrawn elixir raises LineageError; an agent's whole record is verified.

        One statement for a parent that is not an agent (the usual library parent): the version and
        whether an agent of that id exists; only an agent's record is then fingerprinted and verified
        (``_verify_agents_among``). A latest version already read and checked at the current epoch
        costs no statement."""
        ref = ref_or_id if isinstance(ref_or_id, ElixirRef) else None
        id = ref.id if ref is not None else str(ref_or_id)
        epoch = self.db.epoch  # taken before reading: a write from here on makes the next call look again
        checked_epoch, checked = self._checked
        elixir = self._known_latest(id, epoch) if ref is None else None
        if elixir is None or checked_epoch != epoch or id not in checked:
            with self.db.connect() as con:
                elixir, is_agent = self._fetch_flagged(
                    con, id, ref.version if ref is not None else None, agent_flag=True
                )
            if ref is None:
                self._remember_latest(epoch, elixir)
            if not is_agent:
                self._mark_checked(epoch, [id])
        if ref is not None:
            checked_ref(elixir, ref)
        if elixir.withdrawn:
            raise withdrawn_error(elixir)
        self._verify_agents_among([id])  # no statement for an id marked checked at this epoch
        return elixir

    def load_many_for_fusion(self, refs: Sequence[ElixirRef]) -> list[Elixir]:
        """What ``load_for_fusion`` gives for each of ``refs``, in two queries (a run's parents read ahead).
        A ref that would fail there (missing, altered, withdrawn, a tampered agent among them) is left
        out, so its own load raises where it is used."""
        wanted = [r for r in refs if r.version is not None]
        if not wanted:
            return []
        with self.db.unit() as con:
            rows = con.execute(
                f"SELECT {_ELIXIR_COLS} FROM elixir_versions WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                [sorted({r.id for r in wanted})],
            ).fetchall()
        return loadable_for_fusion(wanted, rows, self.db.sealer, self._verify_agents_among)

    def history(self, id: str) -> list[Elixir]:
        """Every version of ``id``, oldest first."""
        rows = self.db.query(f"SELECT {_ELIXIR_COLS} FROM elixir_versions WHERE id = ? ORDER BY version", [id])
        if not rows:
            raise NotFound(f"no elixir {id!r}", field="id")
        return [self._row_to_elixir(r) for r in rows]

    @staticmethod
    def _latest(
        cols: str, *, query: str | None, origin: Origin | None, include_deleted: bool, limit: int | None
    ) -> tuple[str, dict[str, str]]:
        """The SQL selecting ``cols`` of the latest versions, sorted by id, and its parameters."""
        where: list[str] = ["TRUE"]
        named: dict[str, str] = {}
        if origin is not None:
            where.append("origin = $origin")
            named["origin"] = origin
        if not include_deleted:
            where.append("deleted_at IS NULL")
        if query and query.strip():
            where.append(
                "(contains(lower(id), $q) OR contains(lower(name), $q)"
                " OR len(list_filter(expertise, lambda x: contains(lower(x), $q))) > 0)"
            )
            named["q"] = query.strip().lower()
        sql = (
            f"SELECT {cols} FROM (SELECT * FROM elixir_versions"
            " QUALIFY row_number() OVER (PARTITION BY id ORDER BY version DESC) = 1)"
            f" WHERE {' AND '.join(where)} ORDER BY id"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return sql, named

    def list_elixirs(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Elixir]:
        """Latest versions, sorted by id; ``query`` matches name, id or expertise."""
        sql, named = self._latest(
            _ELIXIR_COLS, query=query, origin=origin, include_deleted=include_deleted, limit=limit
        )
        return [self._row_to_elixir(r, verify=False) for r in self.db.query(sql, named)]

    def list_summaries(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[ElixirSummary]:
        """:meth:`list_elixirs` as summaries: the listing's fields straight from their columns (language
        and expertise are written with each version, migration 0014): no body is read, decoded or validated."""
        cols = "id, version, name, language, expertise, content_hash, created_at, deleted_at"
        sql, named = self._latest(cols, query=query, origin=origin, include_deleted=include_deleted, limit=limit)
        return [
            ElixirSummary(i, v, n, lang, tuple(exp or ()), h, _from_db(c), d is not None)
            for i, v, n, lang, exp, h, c, d in self.db.query(sql, named)
        ]

    def delete_elixir(self, id: str) -> None:
        """Soft-delete every version of ``id``; raises NotFound."""

        def work(con: Con) -> None:
            found = con.execute("SELECT count(*) FROM elixir_versions WHERE id = ?", [id]).fetchall()[0][0]
            if not found:
                raise NotFound(f"no elixir {id!r}", field="id")
            con.execute(
                "UPDATE elixir_versions SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                [_to_db(self._clock()), id],
            )

        self._write(work)

    # --- agents ----------------------------------------------------------

    def save_agent(self, agent: Agent) -> bool:
        """Persist agent + child elixir + lineage edges in one transaction. False if it existed."""
        return self.save_agents([agent])[0]

    def save_agents(self, agents: Sequence[Agent]) -> list[bool]:
        """Persist agents (each with its child elixir and lineage edges) in one transaction, one
        statement per table for all of them; per agent, False if it existed (kept as stored)."""

        def work(con: Con) -> list[bool]:
            ids = list(dict.fromkeys(a.id for a in agents))
            if len(agents) == 1:
                new_one = self._save_new_agent(con, agents[0])
                if new_one is not None:
                    return [new_one]
            if len(ids) == 1:
                found = con.execute("SELECT id FROM agents WHERE id = ?", ids).fetchall()
            else:
                found = con.execute("SELECT id FROM agents WHERE id IN (SELECT unnest(?::VARCHAR[]))", [ids]).fetchall()
            seen = {row[0] for row in found}
            new: list[Agent] = []
            for agent in agents:
                if agent.id not in seen:
                    seen.add(agent.id)
                    new.append(agent)
            if not new:
                return [False] * len(agents)
            refs = self._save_many(con, [(a.elixir, a.id) for a in new], "agent")
            rows: list[Any] = []
            edges: list[Any] = []
            for agent, ref in zip(new, refs, strict=True):
                lineage = agent.lineage
                rows += self._agent_row(agent, ref.version, ref.content_hash)
                edges += [
                    v
                    for p in lineage.parents
                    for v in (p.id, agent.id, lineage.operator, lineage.op_version, p.version)
                ]
            con.execute(
                "INSERT INTO agents (id, lineage, lineage_hash, elixir_version, system_prompt, tools, members,"
                " created_at, seal) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(new)),
                rows,
            )
            if edges:  # one statement for every edge (executemany runs one per row)
                con.execute(
                    "INSERT INTO lineage_edges VALUES "
                    + ", ".join(["(?, ?, ?, ?, ?)"] * (len(edges) // 5))
                    + " ON CONFLICT DO NOTHING",
                    edges,
                )
            saved = {a.id for a in new}
            out = []
            for agent in agents:  # the first of an id listed twice is the one saved
                out.append(agent.id in saved)
                saved.discard(agent.id)
            return out

        return self._write(work)

    def _agent_row(self, agent: Agent, version: int, content_hash: str) -> list[Any]:
        """The ``agents`` columns of ``agent`` whose persona is stored as ``version`` with ``content_hash``."""
        lineage = agent.lineage
        seal = record_seal(lineage, content_hash, agent.system_prompt, agent.tools, agent.members)
        seal["mac"] = agent_mac(self.db.sealer, agent.id, version, seal["record_hash"])
        return [
            agent.id,
            lineage.model_dump_json(),
            lineage.lineage_hash,
            version,
            agent.system_prompt,
            json.dumps(list(agent.tools)),
            json.dumps([m.model_dump(mode="json") for m in agent.members]),
            _to_db(self._clock()),
            json.dumps(seal, sort_keys=True),
        ]

    def _save_new_agent(self, con: Con, agent: Agent) -> bool | None:
        """Save a new agent in three plain INSERTs (True); None, having written nothing, unless it is new.

        The agent's row goes first, guarded inside its INSERT: written only while the file holds no
        agent, no persona version and no lineage edge under its id. Then nothing of it can exist, so
        its persona is version 1 and its edges go in without ``ON CONFLICT`` (which costs ~2.5 ms of
        CPU more). Anything else (the agent exists: ``save_agents`` answers False) takes the general
        path. Called inside ``save_agents``' transaction: all three rows commit together."""
        lineage = agent.lineage
        stored = as_stored(agent.elixir, id=agent.id, version=1, created_at=self._clock())
        inserted = con.execute(
            "INSERT INTO agents (id, lineage, lineage_hash, elixir_version, system_prompt, tools, members,"
            " created_at, seal) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?"
            " WHERE NOT EXISTS (SELECT 1 FROM agents WHERE id = ?)"
            " AND NOT EXISTS (SELECT 1 FROM elixir_versions WHERE id = ?)"
            " AND NOT EXISTS (SELECT 1 FROM lineage_edges WHERE child = ?) RETURNING id",
            [*self._agent_row(agent, 1, stored.content_hash), agent.id, agent.id, agent.id],
        ).fetchall()
        if not inserted:
            return None
        con.execute(
            "INSERT INTO elixir_versions (id, version, origin, name, content_hash, body, created_at, language,"
            " expertise, seal) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _version_row(stored, "agent", self.db.sealer),
        )
        edges = list(
            dict.fromkeys((p.id, agent.id, lineage.operator, lineage.op_version, p.version) for p in lineage.parents)
        )
        if edges:  # a parent listed twice is one edge
            con.execute(
                "INSERT INTO lineage_edges VALUES " + ", ".join(["(?, ?, ?, ?, ?)"] * len(edges)),
                [v for edge in edges for v in edge],
            )
        return True

    def _load_agents(self, con: Con, where: str, params: list[Any], limit: int | None = None) -> list[Agent]:
        sql = (
            "SELECT id, lineage, elixir_version, system_prompt, tools, members, created_at, seal"
            f" FROM agents WHERE {where} ORDER BY created_at DESC, id"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = con.execute(sql, params).fetchall()
        if not rows:  # nothing to verify (a fusion's "is this agent stored yet?" usually ends here)
            return []
        edges: dict[str, set[tuple[str, str, str, int]]] = {row[0]: set() for row in rows}
        if edges:
            for parent, child, operator, op_version, parent_version in con.execute(
                "SELECT parent, child, operator, op_version, parent_version FROM lineage_edges"
                " WHERE list_contains(?::VARCHAR[], child)",
                [list(edges)],
            ).fetchall():
                edges[child].add((parent, operator, op_version, parent_version))
        elixirs = self._elixirs_for(con, rows)

        def stored_hash(pid: str, version: int) -> str | None:
            found = elixirs.get((pid, version))
            return found().content_hash if found is not None else None

        sealer = self.db.sealer

        def persona(id: str, version: int) -> Elixir:
            found = elixirs.get((id, version))
            return found() if found is not None else self._fetch(con, id, version)

        return [
            verified_agent(
                row, sealer=sealer, stored_hash=stored_hash, edges=edges[row[0]], persona=persona, created_at=_from_db
            )
            for row in rows
        ]

    def _elixirs_for(self, con: Con, rows: Sequence[Sequence[Any]]) -> dict[tuple[str, int], Callable[[], Elixir]]:
        """Every stored elixir version the agent ``rows`` name (their personas and their lineage's parents),
        read in one query; each is decoded and its hash verified once, when first asked for."""
        ids = {row[0] for row in rows}
        for row in rows:
            with suppress(ValueError, TypeError, AttributeError):  # unreadable: the per-agent checks say so
                ids.update(p["id"] for p in json.loads(row[1])["parents"])
        found: dict[tuple[str, int], Callable[[], Elixir]] = {}
        for row in con.execute(
            f"SELECT {_ELIXIR_COLS} FROM elixir_versions WHERE id IN (SELECT unnest(?::VARCHAR[]))",
            [sorted(i for i in ids if isinstance(i, str))],
        ).fetchall():
            found[(row[0], row[1])] = cache(partial(self._row_to_elixir, row))
        return found

    def verify_agents(self, ids: Sequence[str]) -> None:
        """Raise LineageError (naming the agent and field group) if any agent among ``ids`` was altered;
        ids that are not agents are ignored. For readers that walk lineage with SQL of their own."""
        self._verify_agents_among(ids)

    def _verify_agents_among(self, ids: Sequence[str]) -> None:
        """Verify every agent among ``ids``: a lineage walk never passes a tampered agent.

        DuckDB fingerprints each agent's raw record (its row, its persona row and the edges into
        it) in one query; an agent is loaded and verified in full (seal, lineage, edges, persona
        hash) unless this store already verified that exact fingerprint. A walk over a thousand
        ancestors so costs one query after the first, and any edit to a row changes its
        fingerprint and is verified again. While ``Database.epoch`` is unchanged (no open of the
        file, no statement that may write) ids already checked at that epoch skip even the query.
        """
        if not ids:
            return
        wanted = list(dict.fromkeys(ids))
        with self.db.unit() as con:
            epoch = self.db.epoch  # taken before reading: a write from here on makes the next call look again
            checked_epoch, checked = self._checked
            if epoch == checked_epoch and checked.issuperset(wanted):
                return  # each was checked at this epoch, and nothing in the file has changed since
            rows = con.execute(_FINGERPRINTS, [wanted]).fetchall()
            stale = {id: fp for id, fp in rows if self._verified.get(id) != fp}
            if stale:
                self._load_agents(con, "id IN (SELECT unnest(?::VARCHAR[]))", [list(stale)])
                self._verified.update(stale)
            # every wanted id is now known at this epoch: a verified agent, or not an agent at all
            self._mark_checked(epoch, wanted)

    def child_ids(self, parents: Sequence[str]) -> dict[str, set[str]]:
        """The ids of each parent's children by the lineage edges, in one query, unverified: a filter for
        "might this agent be stored?" (a stored agent has an edge from each of its parents), never a read
        of an agent."""
        out: dict[str, set[str]] = {p: set() for p in parents}
        if out:
            for parent, child in self.db.query(
                "SELECT parent, child FROM lineage_edges WHERE parent IN (SELECT unnest(?::VARCHAR[]))", [list(out)]
            ):
                out[parent].add(child)
        return out

    def stored_child(self, id: str, parents: Sequence[ElixirRef]) -> Agent:
        """``get_agent(id)`` for a fusion's child (``fuse`` asks before building it): the usual answer,
        "not stored", costs a point read of the id alone; a stored one is loaded and verified."""
        if not self.db.query("SELECT id FROM agents WHERE id = ?", [id]):
            raise NotFound(f"no agent {id!r}", field="id")
        return self.get_agent(id)

    def get_agent(self, id: str) -> Agent:
        """Load and verify an agent; raises NotFound or LineageError."""
        with self.db.connect() as con:
            found = self._load_agents(con, "id = ?", [id])
        if not found:
            raise NotFound(f"no agent {id!r}", field="id")
        return found[0]

    def list_agents(self, *, limit: int | None = None) -> list[Agent]:
        """Agents, newest first (each verified)."""
        with self.db.connect() as con:
            return self._load_agents(con, "TRUE", [], limit)

    # --- lineage DAG -----------------------------------------------------

    def add_edge(
        self, parent: str, child: str, *, operator: str, op_version: str = "", parent_version: int | None = None
    ) -> None:
        """A lineage edge (idempotent)."""
        self._write(
            lambda con: con.execute(
                "INSERT INTO lineage_edges VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [parent, child, operator, op_version or "", parent_version or 0],
            )
        )

    def _edges(self) -> _EdgeIndex:
        index = _edge_index(self.db.path)
        with self.db.unit() as con:
            index.sync(con)
        return index

    def _walk(self, id: str, *, up: bool, max_depth: int | None) -> list[LineageNode]:
        """Walk the edge index and verify every agent it reached (and, walking down, every agent whose
        lineage record names a reached node as a parent, so a redirected edge cannot hide a child)."""
        nodes = self._edges().walk(id, up=up, max_depth=max_depth)
        reached = [id, *(n.id for n in nodes)]
        with self.db.unit() as con:
            if not up:
                leaves = reached if max_depth is None else [id, *(n.id for n in nodes if n.depth < max_depth)]
                named = con.execute(
                    "SELECT id FROM agents WHERE"
                    " len(list_intersect(json_extract_string(lineage, '$.parents[*].id'), ?::VARCHAR[])) > 0",
                    [leaves],
                ).fetchall()
                reached += [r[0] for r in named]
            self._verify_agents_among(reached)
        return nodes

    def ancestors(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every ancestor of ``id`` with its shortest depth."""
        return self._walk(id, up=True, max_depth=max_depth)

    def descendants(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every descendant of ``id`` with its shortest depth."""
        return self._walk(id, up=False, max_depth=max_depth)

    def common_ancestors(self, a: str, b: str) -> list[str]:
        """Ids that are ancestors of both (every agent involved verified)."""
        index = self._edges()
        both = sorted({n.id for n in index.walk(a, up=True)} & {n.id for n in index.walk(b, up=True)})
        self._verify_agents_among([a, b, *both])
        return both

    def same_blood(self, a: str, b: str) -> bool:
        """True when one descends from the other or they share an ancestor."""
        if a == b:
            return True
        index = self._edges()
        anc_a = {n.id for n in index.walk(a, up=True)}
        anc_b = {n.id for n in index.walk(b, up=True)}
        return b in anc_a or a in anc_b or bool(anc_a & anc_b)


class _EdgeIndex:
    """``lineage_edges`` in memory, both directions, caught up from the table before every walk.

    Measured on a 100,000-agent DAG (``python -m bench lineage``): the recursive
    CTE (``_ANCESTORS``) takes ~45-55 ms even on an open connection (about a
    hundred tiny iterations, each a join over all edges); a closure table would
    hold ~10^8 rows for DAGs whose ancestries span several experiments. Edges
    are only ever appended, so the index reads just the rows past the highest
    ``rowid`` it has seen (a full reload if the count disagrees: rows of another
    process or a rebuilt file) and walks them with the same BFS as
    :class:`~furnace.storage.memory.MemoryStore`: a few ms per walk.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.top = -1
        self.count = 0
        self.up: Adjacency = {}
        self.down: Adjacency = {}

    def _add(self, rows: Sequence[tuple[Any, ...]]) -> None:
        for parent, child, operator in rows:
            self.up.setdefault(child, []).append((parent, operator))
            self.down.setdefault(parent, []).append((child, operator))
        self.count += len(rows)

    def sync(self, con: Con) -> None:
        [(top, count)] = con.execute("SELECT coalesce(max(rowid), -1), count(*) FROM lineage_edges").fetchall()
        with self.lock:
            if (top, count) == (self.top, self.count):
                return
            if top > self.top and count > self.count:
                self._add(
                    con.execute(
                        "SELECT parent, child, operator FROM lineage_edges WHERE rowid > ? ORDER BY rowid", [self.top]
                    ).fetchall()
                )
            if self.count != count:  # not a plain append: read everything again
                self.up, self.down, self.count = {}, {}, 0
                self._add(con.execute("SELECT parent, child, operator FROM lineage_edges ORDER BY rowid").fetchall())
            self.top = top

    def walk(self, id: str, *, up: bool, max_depth: int | None = None) -> list[LineageNode]:
        with self.lock:
            return bfs(id, self.up if up else self.down, max_depth)


_indexes: dict[str, _EdgeIndex] = {}
_indexes_lock = threading.Lock()


def _edge_index(path: Path) -> _EdgeIndex:
    with _indexes_lock:
        return _indexes.setdefault(str(path), _EdgeIndex())
