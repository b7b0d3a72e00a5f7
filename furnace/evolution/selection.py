"""Parent selection (tournament or per-probe Pareto), adaptive operator weights and survivor
selection (seeded, pure)."""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Protocol, TypeVar


class Ranked(Protocol):
    """Anything with an id and a fitness (population members)."""

    @property
    def agent_id(self) -> str: ...

    @property
    def fitness(self) -> float: ...


R = TypeVar("R", bound=Ranked)


def rank_key(ind: Ranked) -> tuple[float, str]:
    """Sort key: fitter first, then by id (deterministic ties)."""
    return (-ind.fitness, ind.agent_id)


def tournament(population: Sequence[R], size: int, rng: random.Random) -> R:
    """The fittest of ``size`` members drawn without replacement."""
    entrants = rng.sample(list(population), min(size, len(population)))
    return min(entrants, key=rank_key)


def choose_operator(weights: Mapping[str, float], rng: random.Random) -> str:
    """An operator drawn by weight (names sorted so the draw is order-independent)."""
    names = sorted(n for n, w in weights.items() if w > 0)
    return rng.choices(names, weights=[weights[n] for n in names], k=1)[0]


@dataclass
class OperatorStats:
    """Children made and successes (child fitter than its best parent) of one operator."""

    children: int = 0
    successes: int = 0
    failures: int = 0
    fitness_sum: float = 0.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.children if self.children else 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "children": self.children,
            "successes": self.successes,
            "failures": self.failures,
            "success_rate": round(self.success_rate, 4),
            "mean_fitness": round(self.fitness_sum / self.children, 4) if self.children else 0.0,
        }


@dataclass
class OperatorBoard:
    """Tracks each operator's success and adapts the draw weights to it."""

    base: dict[str, float]
    adapt: bool = True
    stats: dict[str, OperatorStats] = field(default_factory=dict)

    def record(self, operator: str, child_fitness: float, parent_fitness: float, *, failed: bool) -> None:
        s = self.stats.setdefault(operator, OperatorStats())
        s.children += 1
        s.fitness_sum += child_fitness
        s.failures += int(failed)
        s.successes += int(not failed and child_fitness > parent_fitness)

    def weights(self) -> dict[str, float]:
        """Base weight × (0.5 + smoothed success rate), normalised to sum 1."""
        raw = {}
        for name, w in self.base.items():
            s = self.stats.get(name, OperatorStats())
            factor = 0.5 + (s.successes + 1) / (s.children + 2) if self.adapt else 1.0
            raw[name] = w * factor
        total = sum(raw.values()) or 1.0
        return {n: round(v / total, 6) for n, v in raw.items()}


def survivors(old: Sequence[R], children: Sequence[R], size: int, elitism: int) -> list[R]:
    """Elites of ``old``, then children (best first), then the rest of ``old`` to fill ``size``: the first
    ``size`` distinct ids in that order, each as it first appears, ranked. Deduplicated with dict steps
    (no Python loop over the population per child taken in)."""
    ranked_old = ranked(old)
    order = [*ranked_old[:elitism], *ranked(children), *ranked_old]
    ids = list(map(_ID, order))
    first = dict(zip(reversed(ids), reversed(order), strict=True))  # each id's first appearance
    return ranked([first[i] for i in list(dict.fromkeys(ids))[: max(size, 0)]])


_ID, _FITNESS = attrgetter("agent_id"), attrgetter("fitness")


def ranked(items: Iterable[R]) -> list[R]:
    """``items`` sorted by :func:`rank_key` (fitter first, then by id), as two stable sorts with C-level
    keys: by id, then by fitness, descending (a stable sort keeps equal fitnesses in id order). The
    same order as ``sorted(items, key=rank_key)``, without a Python call per item (a steady-state run
    re-ranks its population for every child taken in)."""
    return sorted(sorted(items, key=_ID), key=_FITNESS, reverse=True)


class Scored(Ranked, Protocol):
    """A population member with per-probe score rows (``IndividualRecord``)."""

    @property
    def scores(self) -> Sequence[object]: ...


S = TypeVar("S", bound=Scored)


def probe_scores(ind: Scored, weights: Mapping[str, float]) -> dict[str, float]:
    """Per probe, the weighted mean of the per-probe scorers' values (probe ``*`` rows skipped)."""
    sums: dict[str, float] = {}
    totals: dict[str, float] = {}
    for row in ind.scores:
        probe, scorer, value = row.probe, row.scorer, row.value  # type: ignore[attr-defined]
        w = weights.get(scorer, 0.0)
        if probe == "*" or w <= 0:
            continue
        sums[probe] = sums.get(probe, 0.0) + w * value
        totals[probe] = totals.get(probe, 0.0) + w
    return {p: round(sums[p] / totals[p], 9) for p in sorted(sums)}


def probe_frontier(
    population: Sequence[S], weights: Mapping[str, float], probes: Collection[str] | None = None
) -> dict[str, int]:
    """GEPA's per-instance frontier: each member that is best (ties included) on at least one
    probe (of ``probes``, when given), with the number of probes it is best on. Empty when nobody
    has per-probe scores."""
    table = {ind.agent_id: probe_scores(ind, weights) for ind in population}
    if probes is not None:  # the pool's instances (an experiment's validation probes)
        table = {a: {p: v for p, v in scores.items() if p in probes} for a, scores in table.items()}
    counts: dict[str, int] = {}
    for probe in sorted({p for scores in table.values() for p in scores}):
        best = max(scores.get(probe, 0.0) for scores in table.values())
        for agent_id, scores in table.items():
            if probe in scores and scores[probe] == best:
                counts[agent_id] = counts.get(agent_id, 0) + 1
    return dict(sorted(counts.items()))


def pareto_parent(
    population: Sequence[S],
    weights: Mapping[str, float],
    rng: random.Random,
    size: int,
    probes: Collection[str] | None = None,
) -> S:
    """A parent from the per-probe frontier over ``probes`` (all when None; an experiment passes its
    validation probes), drawn in proportion to the probes it leads (falls back to a tournament of
    ``size`` when no member has per-probe scores there)."""
    counts = probe_frontier(population, weights, probes)
    if not counts:
        return tournament(population, size, rng)
    by_id = {ind.agent_id: ind for ind in population}
    names = list(counts)
    return by_id[rng.choices(names, weights=[counts[n] for n in names], k=1)[0]]
