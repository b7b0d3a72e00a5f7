"""The store as a run's breeder sees it: parents read once, new agents written behind.

During a run, every fusion loads its parents and persists its child. On DuckDB that is a
dozen statements per child on the unit's own thread, between its model calls, while the
other units compete for the same file. :class:`RunStore` keeps them off the unit:

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

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from furnace.domain.agent import Agent
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import NotFound
from furnace.evolution.writer import NewAgent

T = TypeVar("T")


class RunStore:
    """A view of ``store`` for one run's breeder (see the module docstring)."""

    def __init__(self, store: Any, queue: Callable[[NewAgent], None]) -> None:
        self.store = store
        self._queue = queue
        self._lock = threading.Lock()
        self._listing = threading.Lock()  # one listing of a parent's children even when two units ask at once
        self._agents: dict[str, Agent] = {}  # bred in this run, or read from the store
        self._absent: set[str] = set()  # ids the store did not hold when asked (and nobody bred since)
        self._elixirs: dict[tuple[str, int | None, str], Elixir] = {}  # parents loaded for fusion, by ref
        self._fresh: set[str] = set()  # bred here while absent from the store: no stored children
        self._children: dict[str, frozenset[str]] = {}  # a stored parent -> its children's ids (edges)

    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        if not isinstance(ref_or_id, ElixirRef):  # "the latest version": may change, ask the store
            return self.store.load_for_fusion(ref_or_id)  # type: ignore[no-any-return]
        key = (ref_or_id.id, ref_or_id.version, ref_or_id.content_hash)
        with self._lock:
            found = self._elixirs.get(key)
            bred = self._agents.get(ref_or_id.id)
        if found is not None:
            return found
        if bred is not None and bred.elixir.ref == ref_or_id:
            return bred.elixir
        loaded: Elixir = self.store.load_for_fusion(ref_or_id)  # verified (withdrawn, tampered) as always
        with self._lock:
            self._elixirs[key] = loaded
        return loaded

    def prefetch(self, refs: Sequence[ElixirRef]) -> None:
        """Read ahead the run's first parents (the seeds): their elixirs, verified as ``load_for_fusion``
        verifies (``load_many_for_fusion``), and their children's ids, a query for each instead of
        two reads per parent and a listing per child. Never raises: what it leaves out is read where
        it is used."""
        many = getattr(self.store, "load_many_for_fusion", None)
        loaded = list(many(list(refs))) if callable(many) else []
        with self._lock:
            for elixir in loaded:
                self._elixirs.setdefault((elixir.id, elixir.version, elixir.content_hash), elixir)
        child_ids = getattr(self.store, "child_ids", None)
        ids = [e.id for e in loaded]
        if ids and callable(child_ids):
            listed = child_ids(ids)
            with self._lock:
                for p in ids:
                    self._children.setdefault(p, frozenset(listed.get(p, ())))

    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        return self.store.get_elixir(id, version)  # type: ignore[no-any-return]

    def get_agent(self, id: str) -> Agent:
        with self._lock:
            found = self._agents.get(id)
        if found is not None:
            return found
        try:
            agent: Agent = self.store.get_agent(id)
        except NotFound:
            with self._lock:
                if id not in self._agents:
                    self._absent.add(id)
            raise
        with self._lock:
            return self._agents.setdefault(id, agent)

    def stored_child(self, id: str, parents: Sequence[ElixirRef]) -> Agent:
        """``get_agent(id)`` for a child of ``parents``: NotFound without a read when one of the parents
        has no lineage edge to it (see the module docstring)."""
        with self._lock:
            found = self._agents.get(id)
        if found is None and self._not_stored(id, [p.id for p in parents]):
            with self._lock:
                if id not in self._agents:
                    self._absent.add(id)
            raise NotFound(f"no agent {id!r}", field="id")
        return found if found is not None else self.get_agent(id)

    def _not_stored(self, id: str, parents: Sequence[str]) -> bool:
        """True when the store cannot hold ``id``, a child of ``parents``: one of them has no edge to it."""
        child_ids = getattr(self.store, "child_ids", None)
        if not parents or not callable(child_ids):
            return False
        with self._lock:
            if any(p in self._fresh for p in parents):
                return True
        with self._listing:
            with self._lock:
                unknown = [p for p in dict.fromkeys(parents) if p not in self._children]
            if unknown:
                listed = child_ids(unknown)
                with self._lock:
                    for p in unknown:
                        self._children.setdefault(p, frozenset(listed.get(p, ())))
        with self._lock:
            return any(id not in self._children[p] for p in parents)

    def save_agent(self, agent: Agent) -> bool:
        """Keep ``agent`` for the run and queue its write; False when it existed (in the store or
        bred in this run), like the store's own ``save_agent``."""
        with self._lock:
            if agent.id in self._agents:
                return False
            checked = agent.id in self._absent
        if not checked:  # the synthesis cache served it without asking the store: does the store hold it?
            try:
                self.stored_child(agent.id, agent.lineage.parents)
                return False
            except NotFound:
                pass
        with self._lock:
            if agent.id in self._agents:  # bred by another unit meanwhile
                return False
            self._agents[agent.id] = agent
            self._absent.discard(agent.id)
            self._fresh.add(agent.id)
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
