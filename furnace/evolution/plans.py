"""What one slot of a run makes (its plan), the plan's content key, and whether a stored record is what a
plan makes: shared by the loop (:mod:`furnace.evolution.engine`) and its scheduler
(:mod:`furnace.evolution.scheduler`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir
from furnace.evolution.records import IndividualRecord


@dataclass(frozen=True)
class Plan:
    """One slot of a generation: what to make (drawn in the main thread)."""

    slot: int
    operator: str
    parents: tuple[IndividualRecord, ...] = ()
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    elixir: Elixir | None = None  # generation 0: the library elixir itself


def plan_key(plan: Plan) -> str:
    """The content key of what ``plan`` makes: its operator, its parents (ids and lineage hashes), seed and
    params (a mutation's moves, a reflection's minibatch), or a seed's elixir. Kept on the record it made."""
    if plan.elixir is not None:
        return content_key({"operator": "seed", "elixir": plan.elixir.content_hash})
    return content_key(
        {
            "operator": plan.operator,
            "parents": [[p.agent_id, p.lineage_hash] for p in plan.parents],
            "seed": plan.seed,
            "params": plan.params,
        }
    )


def made_by(record: IndividualRecord, plan: Plan) -> bool:
    """True when ``record`` is what ``plan`` makes. A retried failure changes the population later plans
    are drawn from: the same operator and parents with another seed or other params is another child, so
    the whole plan is compared (records written before the plan key was kept: operator and parents)."""
    if record.plan:
        return record.plan == plan_key(plan)
    if plan.elixir is not None:
        return record.operator == "seed" and record.agent_id == plan.elixir.id
    return record.operator == plan.operator and record.parents == tuple(p.agent_id for p in plan.parents)
