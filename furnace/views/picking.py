"""People's picks over an experiment: which pairs to show, their replies, and what the picks say about the judges.

- :func:`next_pairs` (from :mod:`furnace.evolution.pairs`) draws blind pairs from
  the experiment's recent generations (:func:`recent`); :func:`pairs_waiting`
  (from :mod:`furnace.evolution.human`) gives the pairs an experiment that
  weights the ``human`` objective asked for and nobody has picked yet.
- :func:`pair_replies` reproduces the two candidates' replies to the probe with
  the request the experiment made (served from the response cache when it
  still holds them).
- :func:`calibrate` compares every judge with people over the picked pairs
  (:func:`furnace.scoring.agreement.share_of_agreement`), fits people's own
  ranking (Bradley–Terry) and its rank agreement with the judge's fitness.

Used by ``furnace pick``; the app's Judge page reads the same functions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from furnace.domain.elixir import parse_elixir
from furnace.evolution.evaluate import reply
from furnace.evolution.human import Ask, latest_ask, pair_key, weighs_human
from furnace.evolution.judging import judge_rows
from furnace.evolution.pairs import BlindPair, Key, judge_table, next_pairs, recent
from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord
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
from furnace.scoring.judge import judge_answer
from furnace.scoring.panel import split_scorer
from furnace.scoring.picks import Choice, Pick, new_pick_id
from furnace.scoring.probes import Probe, ProbeSet, load_probe_set

__all__ = [
    "Ask",
    "BlindPair",
    "Calibration",
    "Key",
    "calibrate",
    "candidate_reply",
    "experiment_calibration",
    "judge_table",
    "next_pairs",
    "pair_replies",
    "session_pairs",
    "recent",
    "grading_judge",
    "recorded_judge",
    "rejudge",
]


def experiment_probes(exp: ExperimentRecord, probes_dir: Path | None = None) -> ProbeSet:
    """The experiment's probe set, read by name as it is now (from ``probes_dir``, else the shipped sets)."""
    probes = exp.config.get("probes") or {}
    return load_probe_set(str(probes.get("set", "")), search_dir=probes_dir).head(probes.get("limit"))


def pickable(exp: ExperimentRecord, probes: ProbeSet) -> list[str]:
    """The probes people are shown: every one, except the test split when the experiment weights the
    ``human`` objective (picks then steer selection, and the test probes stay unseen by it)."""
    shown = probes.without("test") if weighs_human(exp.config.get("scorers") or {}) else probes
    return [p.id for p in shown.probes]


def waiting(
    exp: ExperimentRecord,
    records: Sequence[IndividualRecord],
    generations: Sequence[GenerationRecord],
    picks: Sequence[Pick],
    probes: ProbeSet,
) -> Ask | None:
    """The pairs the experiment asked of people after its latest generation (it weights ``human``), with
    those still waiting; None otherwise (:func:`furnace.evolution.human.latest_ask`)."""
    asked_on = [p.id for p in probes.subset("validation").probes]  # what the engine asks on: its search probes
    return latest_ask(exp.config, records, generations, picks, asked_on)


def session_pairs(
    exp: ExperimentRecord,
    records: Sequence[IndividualRecord],
    generations: Sequence[GenerationRecord],
    picks: Sequence[Pick],
    probes: ProbeSet,
    *,
    count: int,
    seed: int,
    recent_generations: int = 2,
    skip: Iterable[tuple[str, str, str]] = (),
) -> list[BlindPair]:
    """Up to ``count`` blind pairs for a picking session: the pairs the experiment is waiting for first (in
    the order the engine drew them), then :func:`next_pairs` over its recent generations (``seed``: the
    session's); ``skip``: pairs (:func:`furnace.evolution.human.pair_key`) the person passed over."""
    skipped = set(skip)
    ask = waiting(exp, records, generations, picks, probes)
    out = [p for p in (ask.waiting if ask else ()) if pair_key(p.probe, p.a.agent_id, p.b.agent_id) not in skipped]
    taken = skipped | {pair_key(p.probe, p.a.agent_id, p.b.agent_id) for p in out}
    more = next_pairs(
        recent(records, recent_generations), picks, pickable(exp, probes), count=count + len(taken), seed=seed
    )
    out += [p for p in more if pair_key(p.probe, p.a.agent_id, p.b.agent_id) not in taken]
    return out[:count]


def as_pick(pair: BlindPair, experiment_id: str, choice: Choice, who: str, reason: str = "") -> Pick:
    """A person's verdict on ``pair`` as shown (A is ``pair.a``), ready to store."""
    return Pick(
        pick_id=new_pick_id(),
        experiment_id=experiment_id,
        probe=pair.probe,
        agent_a=pair.a.agent_id,
        generation_a=pair.a.generation,
        agent_b=pair.b.agent_id,
        generation_b=pair.b.generation,
        choice=choice,
        who=who,
        reason=reason.strip()[:500],
        order_seed=pair.order_seed,
    )


def reveal(pair: BlindPair) -> str:
    """Who A and B were (said after the pick, never before)."""
    return (
        f"A was {pair.a.agent_id} (generation {pair.a.generation}), "
        f"B was {pair.b.agent_id} (generation {pair.b.generation})"
        + (f"; the judge's scores differed by {pair.gap:.3f}" if pair.gap is not None else "")
    )


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
        picks = f"{self.picks} {'pick' if self.picks == 1 else 'picks'}"
        out = [f"{picks} by {people}" + (f" ({self.undone} undone, not counted)" if self.undone else "")]
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
    fitness compared is the latest recorded per agent that has a score (a reflected child rejected on its
    minibatch has none: its stored 0 would rank it last)."""
    picks = [p for p in every_pick if not p.undone]
    ranked = (r for r in sorted(records, key=lambda r: r.generation) if r.has_score)
    fitness = {r.agent_id: r.fitness for r in ranked}
    judges = {judge: judge_table(records), **panel_tables(records), **(others or {})}
    return calibrate(picks, judges, fitness, undone=len(every_pick) - len(picks))


def panel_tables(records: Sequence[IndividualRecord]) -> dict[str, dict[Key, float]]:
    """Each panel judge's own :func:`judge_table` (from its ``<scorer>@<judge>`` rows); empty for one judge."""
    names = sorted({j for r in records for row in r.scores if (j := split_scorer(row.scorer)[1]) is not None})
    return {j: judge_table(replace(r, scores=tuple(judge_rows(r.scores, j))) for r in records) for j in names}


def recorded_judge(exp: ExperimentRecord) -> str:
    """The model that judged an experiment (its report's judge, else the agents' own model)."""
    return str(exp.summary.get("judge_model") or exp.model)


def grading_judge(exp: ExperimentRecord) -> str:
    """The judge to hold against the agents' model for the self-judging warning: the agents' own model when
    a panel of judges includes it (it still grades itself), else :func:`recorded_judge`."""
    panel = list(dict((exp.summary or {}).get("judges") or {}).get("judges") or [])
    return str(exp.model) if exp.model in panel else recorded_judge(exp)
