"""The store as a run's breeder sees it: parents read once, new agents written behind.

During a run, every fusion loads its parents and persists its child: a dozen statements per
child on the unit's own thread, between its model calls, while the other units take their
turns to write the same file. :class:`RunStore` keeps them off the unit:

- **reads once**: a parent loaded (and verified) from the store is kept for the run; an
  agent bred in this run is served as bred (what the isolated runner's driver does too);
- **knows what is not stored**: before a child is made, ``fuse`` asks whether it was stored
  earlier (:meth:`RunStore.stored_child`). A stored agent has a lineage edge from each of its
  parents, so a child is not stored when one of its parents has no such edge to it: a parent
  bred here while absent from the store has no stored children, and a stored parent's children
  are listed once per run (``child_ids``, one query). Only a child that every parent lists is
  read (and verified). Another process storing the same child meanwhile is handled as before:
  the writer keeps the stored agent (``save_agents`` skips an id that exists);
- **writes behind**: a new agent is handed to ``queue`` (the run's record writer, as a ``NewAgent``), which
  saves it in the unit of work that saves the records put after it, batched with the other
  agents and records finished at the same time. So a saved record always has its agent, and
  an agent not yet written when the process dies is bred again by the rerun (the unit's
  record was not written either). For the same reason the view holds no store transaction for
  ``fuse`` (:meth:`RunStore.atomically`): nothing of the store's is written on the unit's thread.

Only ``fuse``'s store calls are served here; anything else goes to the store itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from furnace.domain.agent import Agent
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import NotFound
from furnace.domain.guarded import Guarded, serialized
from furnace.evolution.writer import NewAgent
from furnace.storage.protocols import ElixirStore

T = TypeVar("T")


class RunStore(Guarded):
    """A view of ``store`` for one run's breeder (see the module docstring). What it keeps is under its
    one lock (:mod:`furnace.domain.guarded`): the serialized helpers below; the store is read outside it."""

    def __init__(self, store: ElixirStore, queue: Callable[[NewAgent], None]) -> None:
        self.store = store
        self._queue = queue
        self._agents: dict[str, Agent] = {}  # bred in this run, or read from the store
        self._absent: set[str] = set()  # ids the store did not hold when asked (and nobody bred since)
        self._elixirs: dict[tuple[str, int | None, str], Elixir] = {}  # parents loaded for fusion, by ref
        self._fresh: set[str] = set()  # bred here while absent from the store: no stored children
        self._children: dict[str, frozenset[str]] = {}  # a stored parent -> its children's ids (edges)

    # --- what the view keeps (under its lock) ---------------------------------

    @serialized
    def _kept(self, ref: ElixirRef) -> Elixir | None:
        """The parent ``ref`` as loaded before, or as bred in this run."""
        found = self._elixirs.get((ref.id, ref.version, ref.content_hash))
        bred = self._agents.get(ref.id)
        if found is None and bred is not None and bred.elixir.ref == ref:
            return bred.elixir
        return found

    @serialized
    def _keep_elixirs(self, loaded: Sequence[Elixir]) -> None:
        for elixir in loaded:
            self._elixirs.setdefault((elixir.id, elixir.version, elixir.content_hash), elixir)

    @serialized
    def _keep_children(self, listed: dict[str, set[str]], parents: Sequence[str]) -> None:
        for p in parents:
            self._children.setdefault(p, frozenset(listed.get(p, ())))

    @serialized
    def _agent(self, id: str) -> Agent | None:
        return self._agents.get(id)

    @serialized
    def _keep_agent(self, agent: Agent) -> Agent:
        return self._agents.setdefault(agent.id, agent)

    @serialized
    def _mark_absent(self, id: str) -> None:
        if id not in self._agents:
            self._absent.add(id)

    @serialized
    def _not_stored(self, id: str, parents: Sequence[str]) -> bool:
        """True when the store cannot hold ``id``, a child of ``parents``: one of them has no edge to it.
        The parents not listed yet are listed here, under the lock: one listing of a parent's children
        even when two units ask at once (a query per parent and run, most of them read ahead by
        :meth:`prefetch`)."""
        if not parents:
            return False
        if any(p in self._fresh for p in parents):
            return True
        unknown = [p for p in dict.fromkeys(parents) if p not in self._children]
        if unknown:
            self._keep_children(self.store.child_ids(unknown), unknown)
        return any(id not in self._children[p] for p in parents)

    @serialized
    def _checked(self, id: str) -> bool | None:
        """None when ``id`` is bred or read in this run already; else whether the store was asked for it."""
        return None if id in self._agents else id in self._absent

    @serialized
    def _bred(self, agent: Agent) -> bool:
        """Keep ``agent`` as bred here; False when another unit kept it meanwhile."""
        if agent.id in self._agents:
            return False
        self._agents[agent.id] = agent
        self._absent.discard(agent.id)
        self._fresh.add(agent.id)
        return True

    # --- fuse's store calls ------------------------------------------------------

    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        if not isinstance(ref_or_id, ElixirRef):  # "the latest version": may change, ask the store
            return self.store.load_for_fusion(ref_or_id)
        found = self._kept(ref_or_id)
        if found is not None:
            return found
        loaded = self.store.load_for_fusion(ref_or_id)  # verified (withdrawn, tampered) as always
        self._keep_elixirs([loaded])
        return loaded

    def prefetch(self, refs: Sequence[ElixirRef]) -> None:
        """Read ahead the run's first parents (the seeds): their elixirs, verified as ``load_for_fusion``
        verifies (``load_many_for_fusion``), and their children's ids, a query for each instead of
        two reads per parent and a listing per child. What it leaves out is read where it is used."""
        loaded = self.store.load_many_for_fusion(list(refs))
        self._keep_elixirs(loaded)
        ids = [e.id for e in loaded]
        if ids:
            self._keep_children(self.store.child_ids(ids), ids)

    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        return self.store.get_elixir(id, version)

    def get_agent(self, id: str) -> Agent:
        found = self._agent(id)
        if found is not None:
            return found
        try:
            agent = self.store.get_agent(id)
        except NotFound:
            self._mark_absent(id)
            raise
        return self._keep_agent(agent)

    def stored_child(self, id: str, parents: Sequence[ElixirRef]) -> Agent:
        """``get_agent(id)`` for a child of ``parents``: NotFound without a read when one of the parents
        has no lineage edge to it (see the module docstring)."""
        found = self._agent(id)
        if found is None and self._not_stored(id, [p.id for p in parents]):
            self._mark_absent(id)
            raise NotFound(f"no agent {id!r}", field="id")
        return found if found is not None else self.get_agent(id)

    def save_agent(self, agent: Agent) -> bool:
        """Keep ``agent`` for the run and queue its write; False when it existed (in the store or
        bred in this run), like the store's own ``save_agent``."""
        checked = self._checked(agent.id)
        if checked is None:
            return False
        if not checked:  # the synthesis cache served it without asking the store: does the store hold it?
            try:
                self.stored_child(agent.id, agent.lineage.parents)
                return False
            except NotFound:
                pass
        if not self._bred(agent):  # bred by another unit meanwhile
            return False
        self._queue(NewAgent(self.store, agent))
        return True

    def atomically(self, work: Callable[[], T]) -> T:
        """``work()`` as it is. ``fuse`` asks for one transaction around the agent it stores and the
        synthesis entries it keeps; through this view the agent is queued for the run's writer (saved
        with the records after it), so a transaction of the store here would hold nothing of the
        store's: a BEGIN and a COMMIT on the unit's thread for each child. The synthesis entries are
        written as the KV writes them (one statement when it can)."""
        return work()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
