"""Agents: fusion products (child elixir + rendered prompt + tools + lineage).

An agent's id is derived from its lineage hash, so the same fusion always
names the same agent and persisting it twice is a no-op. The child elixir is
stored in the elixir table under the agent's id (``origin='agent'``) so that
agents can be parents of further fusions; promoting ("solidifying") copies it
into the library under a name of its own, keeping a lineage edge.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.lineage import Lineage

AGENT_PREFIX = "agt-"


def agent_id_for(lineage_hash: str) -> str:
    """The deterministic agent id for a lineage hash."""
    return AGENT_PREFIX + lineage_hash[:20]


class Agent(BaseModel):
    """A fusion product. ``members`` is set for ensemble (committee) agents."""

    model_config = ConfigDict(frozen=True)

    id: str
    elixir: Elixir
    lineage: Lineage
    system_prompt: str
    tools: tuple[str, ...] = ()
    members: tuple[ElixirRef, ...] = ()
    created_at: datetime | None = None

    @property
    def lineage_hash(self) -> str:
        return self.lineage.lineage_hash


class LineageNode(BaseModel):
    """One row of an ancestry/descendancy query."""

    model_config = ConfigDict(frozen=True)

    id: str
    depth: int
    operator: str | None = None
    via: str | None = None  # the neighbour it was reached through
