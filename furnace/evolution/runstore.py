"""The store as a run's breeder sees it: parents read once, new agents written behind.

During a run, every fusion loads its parents and persists its child. On DuckDB that is a
dozen statements per child on the unit's own thread, between its model calls, while the
other units compete for the same file. :class:`RunStore` keeps them off the unit:

- **reads once**: a parent loaded (and verified) from the store is kept for the run; an
  agent bred in this run is served as bred (what the isolated runner's driver does too);
- **writes behind**: a new agent is handed to ``queue`` (the run's record writer, as a ``NewAgent``), which
  saves it in the unit of work that saves the records put after it, batched with the other
  agents and records finished at the same time. So a saved record always has its agent, and
  an agent not yet written when the process dies is bred again by the rerun (the unit's
  record was not written either).

Only ``fuse``'s store calls are served here; anything else goes to the store itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from furnace.domain.agent import Agent
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import NotFound
from furnace.evolution.writer import NewAgent


class RunStore:
    """A view of ``store`` for one run's breeder (see the module docstring)."""

    def __init__(self, store: Any, queue: Callable[[NewAgent], None]) -> None:
        self.store = store
        self._queue = queue
        self._lock = threading.Lock()
        self._agents: dict[str, Agent] = {}  # bred in this run, or read from the store
        self._absent: set[str] = set()  # ids the store did not hold when asked (and nobody bred since)
        self._elixirs: dict[tuple[str, int | None, str], Elixir] = {}  # parents loaded for fusion, by ref

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

    def save_agent(self, agent: Agent) -> bool:
        """Keep ``agent`` for the run and queue its write; False when it existed (in the store or
        bred in this run), like the store's own ``save_agent``."""
        with self._lock:
            if agent.id in self._agents:
                return False
            checked = agent.id in self._absent
        if not checked:  # the synthesis cache served it without asking the store: does the store hold it?
            try:
                self.get_agent(agent.id)
                return False
            except NotFound:
                pass
        with self._lock:
            if agent.id in self._agents:  # bred by another unit meanwhile
                return False
            self._agents[agent.id] = agent
            self._absent.discard(agent.id)
        self._queue(NewAgent(self.store, agent))
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
