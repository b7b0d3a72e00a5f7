"""Agents: fusion products (child elixir + rendered prompt + tools + lineage).

An agent's id is derived from its lineage hash, so the same fusion always
names the same agent and persisting it twice is a no-op. The child elixir is
stored in the elixir table under the agent's id (``origin='agent'``) so that
agents can be parents of further fusions; promoting ("solidifying") copies it
into the library under a name of its own, keeping a lineage edge.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import LineageError
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

    @property
    def seal(self) -> dict[str, Any]:
        """This agent's record seal (see :func:`record_seal`)."""
        return record_seal(self.lineage, self.elixir.content_hash, self.system_prompt, self.tools, self.members)


# The field groups an agent's record hash covers, in the order they are checked.
SEAL_GROUPS = ("lineage", "parent refs", "resolution notes", "child persona", "system prompt", "tools", "members")


def record_seal(
    lineage: Lineage, child_hash: str, system_prompt: str, tools: Iterable[str], members: Iterable[ElixirRef]
) -> dict[str, Any]:
    """Everything an agent is and uses, hashed per field group, plus one record hash over the groups.

    ``{"groups": {group: hash}, "record_hash": content_key(groups)}``; stored with the agent and
    checked on every read by :func:`verify_seal`, so an edit to any group names that group.
    """
    groups = {
        "lineage": lineage.lineage_hash,
        "parent refs": content_key([p.model_dump(mode="json") for p in lineage.parents]),
        "resolution notes": content_key([n.model_dump(mode="json") for n in lineage.resolution_notes]),
        "child persona": child_hash,
        "system prompt": content_key(system_prompt),
        "tools": content_key(list(tools)),
        "members": content_key([m.model_dump(mode="json") for m in members]),
    }
    return {"groups": groups, "record_hash": content_key(groups)}


def verify_seal(agent: Agent, stored: Any) -> Agent:
    """``agent`` when it matches its stored seal; else a LineageError naming the agent and the field group."""
    what = f"agent {agent.id}"
    if not isinstance(stored, dict) or not isinstance(stored.get("groups"), dict):
        raise LineageError(f"{what}: the record hash is missing or unreadable: the record was altered")
    if stored.get("record_hash") != content_key(stored["groups"]):
        raise LineageError(f"{what}: the record hash does not match its field groups: the record was altered")
    actual = agent.seal["groups"]
    for group in SEAL_GROUPS:
        if stored["groups"].get(group) != actual[group]:
            raise LineageError(f"{what}: {group} does not match the record hash: the record was altered")
    return agent


def verify_edges(agent_id: str, lineage: Lineage, edges: Iterable[tuple[str, str, str, int]]) -> None:
    """Check the lineage edges into an agent, ``(parent, operator, op_version, parent_version)``,
    against its lineage record: one edge per parent, nothing else. LineageError otherwise."""
    expected = {(p.id, lineage.operator, lineage.op_version, p.version) for p in lineage.parents}
    found = set(edges)
    if found != expected:
        missing = sorted(f"{p}@{v}" for p, _, _, v in expected - found)
        extra = sorted(f"{p}@{v} ({op})" for p, op, _, v in found - expected)
        detail = "; ".join(
            part
            for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unexpected {', '.join(extra)}" if extra else "",
            )
            if part
        )
        raise LineageError(f"agent {agent_id}: lineage edges do not match its lineage record ({detail}): altered")


class LineageNode(BaseModel):
    """One row of an ancestry/descendancy query."""

    model_config = ConfigDict(frozen=True)

    id: str
    depth: int
    operator: str | None = None
    via: str | None = None  # the neighbour it was reached through
