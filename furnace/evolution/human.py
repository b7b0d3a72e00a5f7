"""The ``human`` objective: people's picks as a fitness objective (interactive evolution).

- **Rating.** :func:`human_ratings` fits Bradley–Terry to an experiment's picks that are not undone
  (:func:`furnace.scoring.agreement.bradley_terry`): an agent's ``human`` objective is the chance it
  beats an average picked agent, a number in (0, 1) with 0.5 for an average one. Only agents that
  appear in a pick have a rating.
- **Unpicked is unscored.** :func:`with_human` adds the rating to a record's objectives and
  recomputes its fitness over the objectives it has; an agent nobody picked keeps its judges'
  fitness, the weighted mean of the other objectives (their weights renormalised) — never a 0.
- **Asking.** After each generation but the last, an experiment that weights ``human`` asks people
  for ``human_pairs`` blind pairs of its population (:func:`asked_pairs`, drawn by
  :func:`furnace.evolution.pairs.next_pairs` with a seed derived from the experiment's seed and the
  generation, so the engine and the app draw the same pairs). :func:`pairs_waiting`: the asked pairs
  nobody has picked yet; :func:`wait_for_picks` polls the picks until none is waiting or
  ``human_wait_s`` has passed, on an injected clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from furnace.domain.canonical import content_key
from furnace.evolution.pairs import BlindPair, next_pairs
from furnace.evolution.records import GenerationRecord, IndividualRecord
from furnace.scoring.agreement import bradley_terry
from furnace.scoring.fitness import weighted_fitness
from furnace.scoring.picks import Pick

HUMAN = "human"
POLL_S = 2.0  # how often a waiting run reads the picks again


def weighs_human(scorers: Mapping[str, float]) -> bool:
    """Whether an experiment's scorers weight the ``human`` objective."""
    return scorers.get(HUMAN, 0.0) > 0


def human_ratings(picks: Iterable[Pick]) -> dict[str, float]:
    """Each picked agent's ``human`` objective: its Bradley–Terry chance to beat an average picked agent
    (undone picks left out). Agents never picked are absent."""
    return {a: round(v, 6) for a, v in bradley_terry(p.outcome() for p in picks if not p.undone).items()}


def with_human(
    record: IndividualRecord, ratings: Mapping[str, float], scorers: Mapping[str, float]
) -> IndividualRecord:
    """``record`` with its ``human`` objective (``ratings``: the current ones) and the fitness over the
    objectives it has (the weights of the missing ones left out, the rest renormalised); unchanged when
    it has no rating or ``human`` is not weighted. An unscored record stays as it is (it takes no part in
    selection)."""
    rating = ratings.get(record.agent_id)
    if not weighs_human(scorers) or not record.scored or (rating is None and HUMAN not in record.objectives):
        return record
    objectives = {k: v for k, v in record.objectives.items() if k != HUMAN}  # a rating withdrawn (undone) goes
    if rating is not None:
        objectives[HUMAN] = rating
    weights = {k: w for k, w in scorers.items() if k in objectives}
    return replace(record, objectives=objectives, fitness=weighted_fitness(objectives, weights))


def ask_seed(seed: int, generation: int) -> int:
    """The blind order's seed of the pairs asked after ``generation``."""
    return int(content_key(["furnace-human-ask", seed, generation])[:8], 16)


def population_records(
    records: Iterable[IndividualRecord], survivors: Sequence[str], generation: int
) -> list[IndividualRecord]:
    """The records of a generation's population (``survivors``' ids): for each, its first scored record made
    in that generation or before."""
    first: dict[str, IndividualRecord] = {}
    for r in sorted(records, key=lambda r: (r.generation, r.slot)):
        if r.generation <= generation and r.scored:
            first.setdefault(r.agent_id, r)
    return [first[a] for a in survivors if a in first]


def asked_pairs(
    population: Sequence[IndividualRecord], probes: Sequence[str], *, count: int, seed: int, generation: int
) -> list[BlindPair]:
    """The ``count`` blind pairs asked of people after ``generation`` (the judge's closest pairs first)."""
    members = sorted({r.agent_id: r for r in population}.values(), key=lambda r: r.agent_id)
    return next_pairs(members, (), sorted(probes), count=count, seed=ask_seed(seed, generation))


def pair_key(probe: str, x: str, y: str) -> tuple[str, str, str]:
    """A pair of agents on a probe, whichever was shown as A."""
    a, b = sorted((x, y))
    return probe, a, b


def pairs_waiting(asked: Iterable[BlindPair], picks: Iterable[Pick]) -> list[BlindPair]:
    """The asked pairs no pick (not undone) has answered: same probe, same two agents, either order."""
    answered = {pair_key(p.probe, p.agent_a, p.agent_b) for p in picks if not p.undone}
    return [pair for pair in asked if pair_key(pair.probe, pair.a.agent_id, pair.b.agent_id) not in answered]


def wait_for_picks(
    read: Callable[[], list[Pick]],
    asked: Sequence[BlindPair],
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = POLL_S,
) -> list[Pick]:
    """Read the picks (``read``) until none of ``asked`` is waiting or ``timeout_s`` has passed on
    ``clock``, sleeping ``poll_s`` between reads; returns the last picks read. ``timeout_s`` 0: one read."""
    deadline = clock() + timeout_s
    while True:
        picks = read()
        left = deadline - clock()
        if not pairs_waiting(asked, picks) or left <= 0:
            return picks
        sleep(min(poll_s, left))


@dataclass(frozen=True)
class Ask:
    """The pairs an experiment asked of people after one generation, and those still waiting."""

    generation: int
    asked: tuple[BlindPair, ...]
    waiting: tuple[BlindPair, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"generation": self.generation, "asked": len(self.asked), "waiting": len(self.waiting)}


def latest_ask(
    config: Mapping[str, Any],
    records: Sequence[IndividualRecord],
    generations: Sequence[GenerationRecord],
    picks: Sequence[Pick],
    probes: Sequence[str],
) -> Ask | None:
    """The pairs an experiment (``config``: its stored config) asked of people after its latest generation
    that asks (every one but the last), as the engine drew them, with those nobody has picked yet; None
    when it does not weight ``human`` or has no such generation recorded. ``probes``: its search probes
    (its validation probes: what every individual is scored on)."""
    scorers = config.get("scorers") or {}
    if not weighs_human(scorers):
        return None
    last = int(config.get("generations", 0))
    asking = [g for g in generations if g.generation < last]
    if not asking:
        return None
    g = max(asking, key=lambda g: g.generation)
    population = population_records(records, g.survivors, g.generation)
    count = int(config.get("human_pairs", 4))
    asked = asked_pairs(population, probes, count=count, seed=int(config.get("seed", 0)), generation=g.generation)
    return Ask(g.generation, tuple(asked), tuple(pairs_waiting(asked, picks)))
