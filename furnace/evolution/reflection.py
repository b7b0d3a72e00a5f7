"""What the loop hands each operator: its parents (tournament or per-probe Pareto) and its params.

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


def operator_params(op: str, parent: IndividualRecord, config: ExperimentConfig, probes: ProbeSet) -> dict[str, Any]:
    """The params the loop sets for ``op`` (the rest are the operator's defaults)."""
    if op == "mutation":
        return {"rate": config.mutation_rate}
    if op == "reflect":
        messages = {p.id: p.message for p in probes.probes}
        return {"feedback": reflection_brief(parent.scores, messages, weakest=WEAKEST_PROBES)}
    return {}
