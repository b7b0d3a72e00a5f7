"""People's picks over an experiment: which pairs to show, their replies, and what the picks say about the judges.

- :func:`next_pairs` draws blind pairs from the experiment's recent generations
  (scored individuals only), preferring pairs not picked yet and, among those,
  the pairs the judge scored closest on the probe; each pair's order (who is
  shown as A) is drawn from the session's seed, which is recorded with the pick.
- :func:`pair_replies` reproduces the two candidates' replies to the probe with
  the request the experiment made (served from the response cache when it
  still holds them).
- :func:`calibrate` compares every judge with people over the picked pairs
  (:func:`furnace.scoring.agreement.share_of_agreement`), fits people's own
  ranking (Bradley–Terry) and its rank agreement with the judge's fitness.

Used by ``furnace pick``; the app's Judge page reads the same functions.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from furnace.domain.elixir import parse_elixir
from furnace.evolution.evaluate import reply
from furnace.evolution.judging import judge_rows
from furnace.evolution.records import ExperimentRecord, IndividualRecord
from furnace.llm.seam import LLM
from furnace.scoring.agreement import (
    Agreement,
    bradley_terry,
    krippendorff_alpha,
    read_alpha,
    read_spearman,
    share_of_agreement,
    spearman,
)
from furnace.scoring.fitness import SCORERS
from furnace.scoring.judge import judge_answer
from furnace.scoring.panel import split_scorer
from furnace.scoring.picks import Pick
from furnace.scoring.probes import Probe, ProbeSet

Key = tuple[str, int, str]  # (agent id, generation, probe)


def recent(records: Iterable[IndividualRecord], generations: int = 2) -> list[IndividualRecord]:
    """The scored individuals of the last ``generations`` generations, each agent once (its latest record)."""
    scored = [r for r in records if r.scored]
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


def candidate_reply(llm: LLM, record: IndividualRecord, probe: Probe, *, seed: int) -> str:
    """A candidate's reply to ``probe`` with the request the experiment made (``seed``: the experiment's),
    so the response cache serves it when it still holds it."""
    return reply(llm, parse_elixir(record.elixir), record.system_prompt, probe, seed=seed)


def pair_replies(llm: LLM, pair: BlindPair, probe: Probe, *, seed: int) -> tuple[str, str]:
    """The replies of A and B to ``probe`` (:func:`candidate_reply`)."""
    return candidate_reply(llm, pair.a, probe, seed=seed), candidate_reply(llm, pair.b, probe, seed=seed)


def rejudge(
    judge: LLM,
    answers: Callable[[IndividualRecord, Probe], str],
    records: Mapping[tuple[str, int], IndividualRecord],
    picks: Iterable[Pick],
    probes: ProbeSet,
    rubrics: Sequence[str],
    *,
    seed: int,
) -> dict[Key, float]:
    """Another judge's scores of the picked candidates: the mean over ``rubrics`` of its verdicts on each
    candidate's reply (``answers``), against the probe's target; a failed verdict leaves it out."""
    by_id = {p.id: p for p in probes.probes}
    table: dict[Key, float] = {}
    for pick in picks:
        for agent, generation in ((pick.agent_a, pick.generation_a), (pick.agent_b, pick.generation_b)):
            key = (agent, generation, pick.probe)
            record, probe = records.get((agent, generation)), by_id.get(pick.probe)
            if key in table or record is None or probe is None:
                continue
            answer = answers(record, probe)
            elixir = parse_elixir(record.elixir)
            target = probes.target_for(probe)
            verdicts = [
                judge_answer(judge, elixir, probe.message, answer, rubric, seed=seed, target=target)  # type: ignore[arg-type]
                for rubric in rubrics
            ]
            if verdicts and not any(v.failed for v in verdicts):
                table[key] = sum(v.value for v in verdicts) / len(verdicts)
    return table


@dataclass(frozen=True)
class Calibration:
    """What people's picks say: each judge's agreement with them, people's own ranking and how it
    compares with the judge's fitness."""

    judges: tuple[Agreement, ...]
    people: dict[str, float]  # Bradley–Terry: the chance each picked agent beats an average picked one
    rank_agreement: float | None  # Spearman of people's ranking and the recorded fitness, over picked agents
    picks: int
    undone: int = 0
    by_person: dict[str, int] = field(default_factory=dict)
    judge_alpha: float | None = None  # Krippendorff's alpha of the judges over the picked candidates' scores

    def lines(self) -> list[str]:
        people = f"{len(self.by_person)} {'person' if len(self.by_person) == 1 else 'people'}"
        out = [f"{self.picks} picks by {people}" + (f" ({self.undone} undone, not counted)" if self.undone else "")]
        out += ["  " + agreement.reading() for agreement in self.judges]
        if len(self.judges) > 1:
            out.append("  between the judges, on the picked candidates: " + read_alpha(self.judge_alpha))
        if self.people:
            out.append("people's ranking (Bradley–Terry: chance to beat an average picked agent)")
            out += [f"  {a:<28} {v:.2f}" for a, v in sorted(self.people.items(), key=lambda kv: -kv[1])]
            out.append("  " + read_spearman(self.rank_agreement, who="people and the judge's fitness"))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "picks": self.picks,
            "undone": self.undone,
            "by_person": self.by_person,
            "judges": [
                {
                    "judge": a.judge,
                    "agreement": a.share,
                    "interval": list(a.interval) if a.interval else None,
                    "picks": a.picks,
                    "ties": a.ties,
                    "unjudged": a.unjudged,
                    "meaningful": a.meaningful,
                    "reading": a.reading(),
                }
                for a in self.judges
            ],
            "people": self.people,
            "rank_agreement": self.rank_agreement,
            "judge_alpha": self.judge_alpha,
        }


def calibrate(
    picks: Sequence[Pick],
    judges: Mapping[str, Mapping[Key, float]],
    fitness: Mapping[str, float],
    *,
    undone: int = 0,
) -> Calibration:
    """Each judge (name -> its scores by (agent, generation, probe)) against the ``picks``; people's
    Bradley–Terry ranking and its Spearman with ``fitness`` (agent -> the judge's fitness)."""
    agreements = tuple(
        share_of_agreement(
            name,
            (
                (
                    p.choice,
                    table.get((p.agent_a, p.generation_a, p.probe)),
                    table.get((p.agent_b, p.generation_b, p.probe)),
                )
                for p in picks
            ),
        )
        for name, table in judges.items()
    )
    people = {k: round(v, 4) for k, v in bradley_terry(p.outcome() for p in picks).items()}
    picked = {(p.agent_a, p.generation_a, p.probe) for p in picks} | {
        (p.agent_b, p.generation_b, p.probe) for p in picks
    }
    units = {key: {name: table.get(key) for name, table in judges.items()} for key in sorted(picked)}
    return Calibration(
        agreements,
        people,
        spearman(people, fitness),
        len(picks),
        undone,
        dict(sorted(Counter(p.who for p in picks).items())),
        krippendorff_alpha(units) if len(judges) > 1 else None,
    )


def experiment_calibration(
    records: Sequence[IndividualRecord],
    every_pick: Sequence[Pick],
    judge: str,
    others: Mapping[str, Mapping[Key, float]] | None = None,
) -> Calibration:
    """:func:`calibrate` for an experiment: its recorded ``judge`` (scores from ``records``), each judge of
    its panel (``judges: [a, b]``: their own rows) and any ``others`` against the picks not undone; the
    fitness compared is the latest recorded per agent."""
    picks = [p for p in every_pick if not p.undone]
    fitness = {r.agent_id: r.fitness for r in sorted(records, key=lambda r: r.generation) if r.scored}
    judges = {judge: judge_table(records), **panel_tables(records), **(others or {})}
    return calibrate(picks, judges, fitness, undone=len(every_pick) - len(picks))


def panel_tables(records: Sequence[IndividualRecord]) -> dict[str, dict[Key, float]]:
    """Each panel judge's own :func:`judge_table` (from its ``<scorer>@<judge>`` rows); empty for one judge."""
    names = sorted({j for r in records for row in r.scores if (j := split_scorer(row.scorer)[1]) is not None})
    return {j: judge_table(replace(r, scores=tuple(judge_rows(r.scores, j))) for r in records) for j in names}


def recorded_judge(exp: ExperimentRecord) -> str:
    """The model that judged an experiment (its report's judge, else the agents' own model)."""
    return str(exp.summary.get("judge_model") or exp.model)
