"""An in-memory :class:`~furnace.storage.store.ElixirStore` for tests and notebooks, and the base of
every in-memory store (:class:`InMemory`).

Behaves exactly like ``furnace.storage.sql.store.SQLStore``
(both pass ``tests/storage/``), but keeps everything in dicts. Agent records
are kept as plain data (lineage as its JSON dict) and verified on every read,
just as the stored rows are.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any, TypeVar

from furnace.domain.agent import Agent, LineageNode, record_seal, verify_edges, verify_seal
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import LineageError, NotFound
from furnace.domain.guarded import Guarded, serialized
from furnace.storage.store import (
    ElixirSummary,
    Origin,
    as_stored,
    checked_ref,
    deleted_id_error,
    matches_query,
    stale_version_error,
    utc_now,
    verify_agent_lineage,
    withdrawn_error,
)

T = TypeVar("T")
Edge = tuple[str, str, str, str, int]  # parent, child, operator, op_version, parent_version (0 = unpinned)


class InMemory(Guarded):
    """The base of a store kept in process memory (this module's, ``MemoryResults``,
    ``MemoryContentStore``, ``InMemoryArenaStore``): one coarse lock (:mod:`furnace.domain.guarded`),
    and :class:`~furnace.storage.protocols.Transactional` with nothing to do: there is no connection
    to hold, and no snapshot to refresh."""

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """Nothing to enter: every method is atomic under the store's lock (``atomically`` for more)."""
        return nullcontext()

    def snapshot_soon(self) -> None:
        """Nothing: analysis does not read an in-memory store from snapshots."""


class MemoryStore(InMemory):
    """The elixir library, agents and lineage DAG, in process memory (every public method holds the
    store's one lock: :mod:`furnace.domain.guarded`)."""

    def __init__(self, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._clock = clock
        self._versions: dict[str, list[Elixir]] = {}
        self._origin: dict[str, Origin] = {}
        self._agents: dict[str, dict[str, Any]] = {}
        self._edges: set[Edge] = set()

    # --- elixirs ---------------------------------------------------------

    @serialized
    def save_elixir(self, elixir: Elixir, *, origin: Origin = "library", if_latest: int | None = None) -> ElixirRef:
        """Store new content as the next version; identical content is a no-op. With ``if_latest``,
        only while that version is still the latest (else :class:`StaleVersion`, nothing written)."""
        if if_latest is not None:
            versions = self._versions.get(elixir.id, [])
            latest = versions[-1] if versions else None
            if latest is None or latest.version != if_latest or latest.withdrawn:
                raise stale_version_error(
                    elixir.id, if_latest, latest.version if latest else None, bool(latest and latest.withdrawn)
                )
        return self._save_elixir(elixir, origin, elixir.id)

    @serialized
    def save_elixirs(self, elixirs: Sequence[Elixir], *, origin: Origin = "library") -> list[ElixirRef]:
        """Save several elixirs all-or-nothing (one transaction)."""
        backup = ({k: list(v) for k, v in self._versions.items()}, dict(self._origin))
        try:
            return [self._save_elixir(e, origin, e.id) for e in elixirs]
        except BaseException:
            self._versions, self._origin = backup
            raise

    def _save_elixir(self, elixir: Elixir, origin: Origin, id: str) -> ElixirRef:
        versions = self._versions.get(id, [])
        if versions and versions[-1].withdrawn:
            raise deleted_id_error(id)
        if versions and versions[-1].content_hash == elixir.content_hash:
            return versions[-1].ref
        stored = as_stored(elixir, id=id, version=len(versions) + 1, created_at=self._clock())
        self._versions.setdefault(id, []).append(stored)
        self._origin.setdefault(id, origin)
        return stored.ref

    @serialized
    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        """One version (latest when ``version`` is None); raises NotFound."""
        versions = self._versions.get(id)
        if not versions:
            raise NotFound(f"no elixir {id!r}", field="id")
        if version is None:
            return versions[-1]
        if not 1 <= version <= len(versions):
            raise NotFound(f"elixir {id!r} has no version {version} (latest is {len(versions)})", field="version")
        return versions[version - 1]

    @serialized
    def get_by_ref(self, ref: ElixirRef) -> Elixir:
        """The exact version; raises LineageError if its content hash differs."""
        return checked_ref(self.get_elixir(ref.id, ref.version), ref)

    @serialized
    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        """Like get, but a withdrawn elixir raises LineageError."""
        elixir = self.get_by_ref(ref_or_id) if isinstance(ref_or_id, ElixirRef) else self.get_elixir(ref_or_id)
        if elixir.withdrawn:
            raise withdrawn_error(elixir)
        self._verify_agents_among([elixir.id])  # an agent as a parent: its whole record
        return elixir

    @serialized
    def history(self, id: str) -> list[Elixir]:
        """Every version of ``id``, oldest first."""
        self.get_elixir(id)
        return list(self._versions[id])

    @serialized
    def list_elixirs(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Elixir]:
        """Latest versions, sorted by id; ``query`` matches name, id or expertise."""
        items = sorted(self._versions.items())
        found = [
            versions[-1]
            for id, versions in items
            if (origin is None or self._origin[id] == origin)
            and (include_deleted or not versions[-1].withdrawn)
            and matches_query(versions[-1], query)
        ]
        return found[:limit] if limit is not None else found

    @serialized
    def list_summaries(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[ElixirSummary]:
        """:meth:`list_elixirs` as summaries."""
        found = self.list_elixirs(query=query, origin=origin, include_deleted=include_deleted, limit=limit)
        return [ElixirSummary.of(e) for e in found]

    @serialized
    def delete_elixir(self, id: str) -> None:
        """Soft-delete every version of ``id``; raises NotFound."""
        self.get_elixir(id)
        versions = self._versions[id]
        if versions[-1].withdrawn:
            return
        now = self._clock()
        self._versions[id] = [v.model_copy(update={"deleted_at": now}) for v in versions]

    # --- agents ----------------------------------------------------------

    @serialized
    def save_agent(self, agent: Agent) -> bool:
        """Persist an agent, its child elixir and its lineage edges. Returns False if it existed."""
        if agent.id in self._agents:
            return False
        ref = self._save_elixir(agent.elixir, "agent", agent.id)
        self._agents[agent.id] = {
            "lineage": agent.lineage.model_dump(mode="json"),
            "system_prompt": agent.system_prompt,
            "tools": list(agent.tools),
            "members": [m.model_dump(mode="json") for m in agent.members],
            "elixir_version": ref.version,
            "created_at": self._clock(),
            "seal": record_seal(agent.lineage, ref.content_hash, agent.system_prompt, agent.tools, agent.members),
        }
        for parent in agent.lineage.parents:
            self._add_edge(parent.id, agent.id, agent.lineage.operator, agent.lineage.op_version, parent.version)
        return True

    @serialized
    def save_agents(self, agents: Sequence[Agent]) -> list[bool]:
        """Persist agents all-or-nothing; per agent, False if it existed."""
        return self.atomically(lambda: [self.save_agent(a) for a in agents])

    @serialized
    def atomically(self, work: Callable[[], T]) -> T:
        """Run ``work`` with every write inside it kept together: all of it, or (on an error) none."""
        backup = (
            {k: list(v) for k, v in self._versions.items()},
            dict(self._origin),
            dict(self._agents),
            set(self._edges),
        )
        try:
            return work()
        except BaseException:
            self._versions, self._origin, self._agents, self._edges = backup
            raise

    @serialized
    def load_many_for_fusion(self, refs: Sequence[ElixirRef]) -> list[Elixir]:
        """What ``load_for_fusion`` gives for each of ``refs``, leaving out a ref that would fail there."""
        loaded = []
        for ref in refs:
            try:
                loaded.append(self.load_for_fusion(ref))
            except (NotFound, LineageError):
                continue
        return loaded

    @serialized
    def stored_child(self, id: str, parents: Sequence[ElixirRef]) -> Agent:
        """``get_agent(id)`` for a fusion's child of ``parents``."""
        return self.get_agent(id)

    @serialized
    def get_agent(self, id: str) -> Agent:
        """Load and verify an agent; raises NotFound or LineageError."""
        record = self._agents.get(id)
        if record is None:
            raise NotFound(f"no agent {id!r}", field="id")
        lineage = verify_agent_lineage(id, record["lineage"], self._stored_hash)
        verify_edges(id, lineage, {(p, op, v, pv) for p, c, op, v, pv in self._edge_list() if c == id})
        try:
            agent = Agent(
                id=id,
                elixir=self.get_elixir(id, record["elixir_version"]),
                lineage=lineage,
                system_prompt=record["system_prompt"],
                tools=tuple(record["tools"]),
                members=tuple(ElixirRef.model_validate(m) for m in record["members"]),
                created_at=record["created_at"],
            )
        except (ValueError, TypeError) as err:  # pydantic's ValidationError is a ValueError
            raise LineageError(f"agent {id}: unreadable agent record ({err.__class__.__name__})") from None
        return verify_seal(agent, record.get("seal"))

    @serialized
    def verify_agents(self, ids: Sequence[str]) -> None:
        """Raise LineageError if any agent among ``ids`` was altered; other ids are ignored."""
        self._verify_agents_among(ids)

    def _verify_agents_among(self, ids: Iterable[str]) -> None:
        """Load (and so verify) every agent among ``ids``: a lineage walk never passes a tampered agent."""
        for id in ids:
            if id in self._agents:
                self.get_agent(id)

    def _stored_hash(self, id: str, version: int) -> str | None:
        versions = self._versions.get(id, [])
        return versions[version - 1].content_hash if 1 <= version <= len(versions) else None

    @serialized
    def list_agents(self, *, limit: int | None = None) -> list[Agent]:
        """Agents, newest first."""
        ids = sorted(self._agents, key=lambda i: (-self._agents[i]["created_at"].timestamp(), i))
        return [self.get_agent(i) for i in ids[:limit]]

    # --- lineage DAG -----------------------------------------------------

    @serialized
    def add_edge(
        self, parent: str, child: str, *, operator: str, op_version: str = "", parent_version: int | None = None
    ) -> None:
        """A lineage edge (idempotent)."""
        self._add_edge(parent, child, operator, op_version, parent_version)

    def _add_edge(self, parent: str, child: str, operator: str, op_version: str, parent_version: int | None) -> None:
        self._edges.add((parent, child, operator, op_version or "", parent_version or 0))

    @serialized
    def ancestors(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every ancestor of ``id`` with its shortest depth (recursive); agents on the way are verified."""
        nodes = bfs(id, adjacency((e[1], e[0], e[2]) for e in self._edge_list()), max_depth)
        self._verify_agents_among([id, *(n.id for n in nodes)])
        return nodes

    @serialized
    def descendants(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every descendant of ``id`` with its shortest depth (recursive); agents on the way are verified."""
        nodes = bfs(id, adjacency((e[0], e[1], e[2]) for e in self._edge_list()), max_depth)
        self._verify_agents_among([id, *(n.id for n in nodes)])
        # a redirected edge must not hide a child: agents whose lineage record names a reached node
        leaves = {id, *(n.id for n in nodes if max_depth is None or n.depth < max_depth)}
        named = [i for i, r in self._agents.items() if leaves & {p.get("id") for p in r["lineage"]["parents"]}]
        self._verify_agents_among(named)
        return nodes

    @serialized
    def child_ids(self, parents: Sequence[str]) -> dict[str, set[str]]:
        """The ids of each parent's children by the lineage edges, unverified (see ``SQLStore.child_ids``)."""
        out: dict[str, set[str]] = {p: set() for p in parents}
        for parent, child, *_ in self._edge_list():
            if parent in out:
                out[parent].add(child)
        return out

    def _edge_list(self) -> list[Edge]:
        return list(self._edges)

    @serialized
    def common_ancestors(self, a: str, b: str) -> list[str]:
        """Ids that are ancestors of both."""
        return sorted({n.id for n in self.ancestors(a)} & {n.id for n in self.ancestors(b)})

    @serialized
    def same_blood(self, a: str, b: str) -> bool:
        """True when one descends from the other or they share an ancestor."""
        if a == b:
            return True
        anc_a = {n.id for n in self.ancestors(a)}
        anc_b = {n.id for n in self.ancestors(b)}
        return b in anc_a or a in anc_b or bool(anc_a & anc_b)


Adjacency = dict[str, list[tuple[str, str]]]


def adjacency(links: Iterable[tuple[str, str, str]]) -> Adjacency:
    """``{from: [(to, operator), ...]}`` from ``(from, to, operator)`` links."""
    out: Adjacency = {}
    for src, dst, op in links:
        out.setdefault(src, []).append((dst, op))
    return out


def bfs(start: str, links: Adjacency, max_depth: int | None = None) -> list[LineageNode]:
    """Breadth-first walk from ``start`` over an :func:`adjacency` map.

    Returns every reachable node (not ``start``) at its shortest depth, sorted
    by (depth, id); ``via`` (and its ``operator``) is the smallest neighbour
    id it was reached through at that depth. Also the in-memory baseline of
    ``bench/bench_lineage.py``.
    """
    best: dict[str, tuple[int, str, str | None]] = {}  # id -> (depth, via, operator); nodes built once at the end
    frontier = deque([(start, 0)])
    seen = {start}
    while frontier:
        node, depth = frontier.popleft()
        if max_depth is not None and depth >= max_depth:
            continue
        for nxt, op in links.get(node, ()):
            if nxt == start:
                continue
            known = best.get(nxt)
            if known is None or known[0] == depth + 1 and (node, op) < (known[1] or "", known[2] or ""):
                best[nxt] = (depth + 1, node, op)
            if nxt not in seen:
                seen.add(nxt)
                frontier.append((nxt, depth + 1))
    return [
        LineageNode(id=id, depth=depth, operator=op, via=via)
        for id, (depth, via, op) in sorted(best.items(), key=lambda item: (item[1][0], item[0]))
    ]
