"""Blind pairs of candidates for people to pick between: which pairs, in which order.

- :func:`recent` gives the scored individuals of an experiment's last generations;
- :func:`next_pairs` draws blind pairs from candidates, preferring pairs not picked yet and, among
  those, the pairs the judge scored closest on the probe (:func:`judge_table`); each pair's order
  (who is shown as A) is drawn from the session's seed, which is recorded with the pick.

``furnace pick``, the app's Judge page (through :mod:`furnace.views.picking`) and the engine's
requests for picks (:mod:`furnace.evolution.human`) all draw pairs here.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from furnace.evolution.records import IndividualRecord
from furnace.scoring.fitness import SCORERS
from furnace.scoring.picks import Pick

Key = tuple[str, int, str]  # (agent id, generation, probe)


def recent(records: Iterable[IndividualRecord], generations: int = 2) -> list[IndividualRecord]:
    """The scored individuals of the last ``generations`` generations, each agent once (its latest record); a
    reflected child rejected on its minibatch is none of them (never evaluated on validation, never in the
    population: people's picks would judge an agent the run dropped)."""
    scored = [r for r in records if r.has_score]
    if not scored:
        return []
    last = max(r.generation for r in scored)
    latest: dict[str, IndividualRecord] = {}
    for r in sorted(scored, key=lambda r: (r.generation, r.slot)):
        if r.generation > last - generations:
            latest[r.agent_id] = r
    return sorted(latest.values(), key=lambda r: r.agent_id)


def judge_table(records: Iterable[IndividualRecord]) -> dict[Key, float]:
    """The recorded judge's score of each (agent, generation, probe): the mean of its judge scorers there."""
    values: dict[Key, list[float]] = {}
    for r in records:
        for row in r.scores:
            spec = SCORERS.get(row.scorer)
            if spec is not None and spec.kind == "judge" and not row.failed:
                values.setdefault((r.agent_id, r.generation, row.probe), []).append(row.value)
    return {k: sum(v) / len(v) for k, v in values.items()}


@dataclass(frozen=True)
class BlindPair:
    """Two candidates' replies to one probe, in the order shown: ``a`` as A, ``b`` as B."""

    probe: str
    a: IndividualRecord
    b: IndividualRecord
    order_seed: int
    gap: float | None = None  # the judge's score difference on the probe (None: not judged)


def next_pairs(
    candidates: Sequence[IndividualRecord],
    picked: Iterable[Pick],
    probes: Sequence[str],
    *,
    count: int,
    seed: int,
    scores: Mapping[Key, float] | None = None,
) -> list[BlindPair]:
    """Up to ``count`` blind pairs over ``probes``: the pairs picked least often first, then those the
    judge scored closest (``scores``, default :func:`judge_table` of ``candidates``); ties broken and
    each pair's order drawn by ``random.Random(seed)``."""
    rng = random.Random(seed)
    table = judge_table(candidates) if scores is None else scores
    seen = Counter((p.probe, *sorted((p.agent_a, p.agent_b))) for p in picked)
    options: list[tuple[int, float | None, str, IndividualRecord, IndividualRecord]] = []
    for probe in probes:
        for x, y in combinations(candidates, 2):
            if x.agent_id == y.agent_id:
                continue
            sx, sy = table.get((x.agent_id, x.generation, probe)), table.get((y.agent_id, y.generation, probe))
            gap = round(abs(sx - sy), 6) if sx is not None and sy is not None else None
            options.append((seen[(probe, *sorted((x.agent_id, y.agent_id)))], gap, probe, x, y))
    rng.shuffle(options)
    options.sort(key=lambda o: (o[0], 2.0 if o[1] is None else o[1]))  # unjudged pairs last
    pairs = []
    for _, gap, probe, x, y in options[:count]:
        a, b = (x, y) if rng.random() < 0.5 else (y, x)
        pairs.append(BlindPair(probe, a, b, seed, gap))
    return pairs
