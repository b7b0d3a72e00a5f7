"""The scorer registry, weighted fitness, the Pareto front and bootstrap intervals."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from furnace.scoring.judge import JUDGE_VERSION

Kind = Literal["rule", "judge", "brief", "diversity", "human"]


@dataclass(frozen=True)
class ScorerSpec:
    """What a scorer needs and costs. ``calls_per_probe`` feeds the budget estimate."""

    name: str
    kind: Kind
    version: str
    calls_per_probe: int = 0
    per_probe: bool = True


SCORERS: dict[str, ScorerSpec] = {
    s.name: s
    for s in (
        ScorerSpec("constraints", "rule", "rules-v1"),
        ScorerSpec("fidelity", "judge", JUDGE_VERSION, calls_per_probe=1),
        ScorerSpec("preference", "judge", JUDGE_VERSION, calls_per_probe=1),
        ScorerSpec("tone", "judge", JUDGE_VERSION, calls_per_probe=1),
        ScorerSpec("brief_fit", "brief", "brief-v1"),
        ScorerSpec("diversity", "diversity", "diversity-v1", per_probe=False),
        # people's picks (a Bradley–Terry rating, furnace.evolution.human); never computed by an evaluation
        ScorerSpec("human", "human", "bradley-terry-v1", per_probe=False),
    )
}


def weighted_fitness(objectives: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Weighted mean of the objectives (missing objectives count as 0)."""
    total = sum(w for w in weights.values() if w > 0)
    if total <= 0:
        return 0.0
    return round(sum(w * objectives.get(k, 0.0) for k, w in weights.items() if w > 0) / total, 9)


def dominates(a: Mapping[str, float], b: Mapping[str, float], keys: Sequence[str]) -> bool:
    """``a`` is at least as good as ``b`` everywhere and better somewhere."""
    return all(a.get(k, 0) >= b.get(k, 0) for k in keys) and any(a.get(k, 0) > b.get(k, 0) for k in keys)


def pareto_front(items: Mapping[str, Mapping[str, float]], keys: Sequence[str]) -> list[str]:
    """Ids of the non-dominated items over ``keys``, in input order.

    The items are visited best first (their objectives' tuples in descending order: whatever dominates an
    item comes before it), each checked against the front found so far only: an item dominated by
    anything is dominated by a member of the front (domination is transitive), so the front is the same
    as comparing every pair, at ``n × front`` comparisons instead of ``n²`` (a report over every
    individual of a population of 256)."""
    points = {i: tuple(v.get(k, 0) for k in keys) for i, v in items.items()}
    front: list[tuple[float, ...]] = []
    kept: set[str] = set()
    for i in sorted(points, key=points.__getitem__, reverse=True):
        p = points[i]
        if not any(_above(q, p) for q in front):
            front.append(p)
            kept.add(i)
    return [i for i in items if i in kept]


def _above(a: Sequence[float], b: Sequence[float]) -> bool:
    """``a`` dominates ``b`` (objective tuples in one key order): :func:`dominates`."""
    return all(x >= y for x, y in zip(a, b, strict=True)) and a != b


CONFIDENCE = 0.95
RESAMPLES = 2000


def bootstrap_interval(
    values: Sequence[float], *, seed: int, level: float = CONFIDENCE, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """A seeded percentile bootstrap interval for the mean of ``values`` (at ``level``): the mean of
    ``resamples`` resamples with replacement, cut at the ``(1 - level) / 2`` quantiles. One value (or
    none) gives a zero-width interval at it: there is nothing to resample."""
    if not values:
        return (0.0, 0.0)
    if len(values) == 1:  # rounded as the fitness beside it is, so it never lies a hair off the point
        return (round(float(values[0]), 6), round(float(values[0]), 6))
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    low = means[int(tail * resamples)]
    high = means[min(resamples - 1, int((1.0 - tail) * resamples))]
    return (round(low, 6), round(high, 6))
