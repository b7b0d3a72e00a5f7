"""What the loop hands each operator: its parents (tournament or per-probe Pareto) and its params.

A multi-parent operator's (crossover's) second parent is a *founder* — a scored seed of
generation 0 other than the first parent, drawn uniformly — not a second tournament winner.
Selection fills the population with the best line within a generation or two (with elitism =
half, the weaker seeds are displaced by the first children), so two tournament winners are
near-copies whose union adds nothing (on the search benchmark's Chinese target: 46 such
crossovers over 10 seeds, none better than its parent); a founder brings back the material
selection dropped (there: personal-finance x lifestyle-blogger, 防晒 and a warmer tone, +0.06).

``reflect`` gets the parent's reflection brief — the judge's feedback on its weakest
probes, with the probes' messages — built from the parent's stored score rows, so the
plan (and the unit key) depends only on recorded facts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from furnace.evolution.config import ExperimentConfig
from furnace.evolution.records import IndividualRecord
from furnace.evolution.selection import pareto_parent, tournament
from furnace.scoring.feedback import reflection_brief
from furnace.scoring.probes import ProbeSet

SINGLE_PARENT = ("mutation", "reflect")
WEAKEST_PROBES = 2


def parent_picker(
    config: ExperimentConfig, population: Sequence[IndividualRecord], rng: random.Random
) -> Callable[[], IndividualRecord]:
    """A draw of one parent by the configured selection method."""
    size = config.selection.tournament_size
    if config.selection.method == "pareto":
        return lambda: pareto_parent(population, config.scorers, rng, size)
    return lambda: tournament(population, size, rng)


def founder_partner(
    first: IndividualRecord, founders: Sequence[IndividualRecord], rng: random.Random
) -> IndividualRecord | None:
    """The second parent of a multi-parent operator: a founder other than ``first``, drawn
    uniformly (None when there is none: the loop then mutates ``first`` instead)."""
    pool = [f for f in founders if f.agent_id != first.agent_id]
    return rng.choice(pool) if pool else None


def operator_params(op: str, parent: IndividualRecord, config: ExperimentConfig, probes: ProbeSet) -> dict[str, Any]:
    """The params the loop sets for ``op`` (the rest are the operator's defaults)."""
    if op == "mutation":
        return {"rate": config.mutation_rate}
    if op == "reflect":
        messages = {p.id: p.message for p in probes.probes}
        return {"feedback": reflection_brief(parent.scores, messages, weakest=WEAKEST_PROBES)}
    return {}
