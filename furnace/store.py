"""Store protocols for the elixir library, agents and lineage.

Two implementations pass one contract suite (``tests/store/``):
``furnace.memory_store.MemoryStore`` and
``furnace.adapters.duckdb_store.DuckDBStore``.

Rules every implementation keeps:

- **Immutable versions.** ``save_elixir`` of new content stores ``version + 1``
  (version 1 for a new id); saving content identical to the latest version is
  a no-op that returns the existing ref. The ``version`` on the passed value is
  ignored; the store assigns it.
- **Soft delete.** ``delete_elixir`` marks every version withdrawn.
  ``get_elixir`` still returns withdrawn versions (history stays readable);
  ``load_for_fusion`` refuses them with a :class:`LineageError`.
- **Lineage verified on read.** ``get_agent`` recomputes the lineage hash and
  raises :class:`LineageError` on a mismatch.
- **Idempotent writes.** Saving the same agent twice writes nothing new.
"""

from __future__ import annotations

from typing import Literal, Protocol

from furnace.agent import Agent, LineageNode
from furnace.elixir import Elixir, ElixirRef

Origin = Literal["library", "agent"]


class ElixirStore(Protocol):
    """The elixir library, agents and the lineage DAG."""

    def save_elixir(self, elixir: Elixir, *, origin: Origin = "library") -> ElixirRef:
        """Store new content as the next version; identical content is a no-op."""
        ...

    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        """One version (latest when ``version`` is None); raises NotFound."""
        ...

    def get_by_ref(self, ref: ElixirRef) -> Elixir:
        """The exact version; raises LineageError if its content hash differs."""
        ...

    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        """Like get, but a withdrawn elixir raises LineageError
        ("agent depends on withdrawn elixir X v3")."""
        ...

    def history(self, id: str) -> list[Elixir]:
        """Every version of ``id``, oldest first."""
        ...

    def list_elixirs(
        self, *, query: str | None = None, origin: Origin | None = "library", include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Elixir]:
        """Latest versions, sorted by id; ``query`` matches name, id or expertise (case-insensitive)."""
        ...

    def delete_elixir(self, id: str) -> None:
        """Soft-delete every version of ``id``; raises NotFound."""
        ...

    def save_agent(self, agent: Agent) -> bool:
        """Persist an agent, its child elixir and its lineage edges. Returns False if it existed."""
        ...

    def get_agent(self, id: str) -> Agent:
        """Load and verify an agent; raises NotFound or LineageError."""
        ...

    def list_agents(self, *, limit: int | None = None) -> list[Agent]:
        """Agents, newest first."""
        ...

    def add_edge(self, parent: str, child: str, *, operator: str, op_version: str = "", parent_version: int | None = None) -> None:
        """A lineage edge (idempotent)."""
        ...

    def ancestors(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every ancestor of ``id`` with its shortest depth (recursive)."""
        ...

    def descendants(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every descendant of ``id`` with its shortest depth (recursive)."""
        ...

    def common_ancestors(self, a: str, b: str) -> list[str]:
        """Ids that are ancestors of both."""
        ...

    def same_blood(self, a: str, b: str) -> bool:
        """True when one descends from the other or they share an ancestor."""
        ...
