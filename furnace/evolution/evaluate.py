"""Evaluating one agent: answer every probe, score every answer, combine into fitness.

This is the unit of work an experiment runs concurrently (and a Prefect task
wraps). A failed answer or judge call becomes a failure score with its reason;
only :class:`~furnace.domain.errors.BudgetExceeded` propagates (the run must stop).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from furnace.domain.elixir import Elixir
from furnace.domain.errors import LLMError
from furnace.evolution.records import ScoreRow
from furnace.llm.seam import LLM, TaskKind, system_user
from furnace.scoring.base import Score, persona_inputs
from furnace.scoring.brief import brief_fit
from furnace.scoring.diversity import diversity
from furnace.scoring.fitness import SCORERS, weighted_fitness
from furnace.scoring.judge import judge_answer
from furnace.scoring.probes import Probe, ProbeSet
from furnace.scoring.rules import constraint_compliance


@dataclass(frozen=True)
class Evaluation:
    """Scores, objectives (mean per scorer) and weighted fitness of one agent."""

    scores: tuple[ScoreRow, ...]
    objectives: dict[str, float]
    fitness: float
    failure_reasons: tuple[str, ...] = field(default_factory=tuple)


def reply(llm: LLM, elixir: Elixir, system_prompt: str, probe: Probe, *, seed: int) -> str:
    """The agent's answer to one probe (REPLY task); raises LLMError on failure."""
    request = system_user(
        TaskKind.REPLY,
        system_prompt,
        probe.message,
        temperature=0.7,
        seed=seed,
        inputs={"persona": persona_inputs(elixir), "message": probe.message, "instruction": None},
    )
    return llm.complete(request).text


def _score_probe(
    llm: LLM,
    elixir: Elixir,
    system_prompt: str,
    probe: Probe,
    probes: ProbeSet,
    scorers: Mapping[str, float],
    seed: int,
) -> list[ScoreRow]:
    needs_answer = any(SCORERS[s].kind in ("rule", "judge") for s, w in scorers.items() if w > 0)
    answer: str | None = None
    error: str | None = None
    if needs_answer:
        try:
            answer = reply(llm, elixir, system_prompt, probe, seed=seed)
        except LLMError as err:
            error = f"reply failed: {err}"
    rows = []
    target = probes.target_for(probe)  # the judge's yardstick; never shown to the persona
    for name in sorted(scorers):
        if scorers[name] <= 0 or not SCORERS[name].per_probe:
            continue
        kind = SCORERS[name].kind
        if kind == "rule":
            score = constraint_compliance(elixir, answer, error=error, target=target)
        elif kind == "judge":
            score = judge_answer(
                llm,
                elixir,
                probe.message,
                answer,
                name,  # type: ignore[arg-type]
                seed=seed,
                error=error,
                target=target,
            )
        else:
            brief = probes.brief_for(probe)
            score = brief_fit(elixir, brief) if brief else Score(1.0, "probe has no brief")
        rows.append(ScoreRow(probe.id, name, score.value, score.reason, score.failed, score.feedback))
    return rows


def evaluate_agent(
    llm: LLM,
    elixir: Elixir,
    system_prompt: str,
    probes: ProbeSet,
    scorers: Mapping[str, float],
    *,
    seed: int,
    vector: Sequence[float] | None = None,
    population_vectors: Sequence[Sequence[float]] = (),
    parallel: int = 1,
) -> Evaluation:
    """Answer and score every probe (``parallel`` probes at once; the model's own concurrency
    bound still applies), add diversity, and compute the weighted fitness."""
    rows: list[ScoreRow] = []

    def one(probe: Probe) -> list[ScoreRow]:
        return _score_probe(llm, elixir, system_prompt, probe, probes, scorers, seed)

    if parallel > 1 and len(probes.probes) > 1:
        with ThreadPoolExecutor(max_workers=min(parallel, len(probes.probes))) as pool:
            for part in pool.map(one, probes.probes):  # results in probe order
                rows.extend(part)
    else:
        for probe in probes.probes:
            rows.extend(one(probe))
    if scorers.get("diversity", 0) > 0:
        score = diversity(vector, population_vectors) if vector is not None else Score.failure("no embedding")
        rows.append(ScoreRow("*", "diversity", score.value, score.reason, score.failed))
    return combine(rows, scorers)


def combine(rows: Sequence[ScoreRow], scorers: Mapping[str, float]) -> Evaluation:
    """Objectives (mean value per scorer) and weighted fitness from score rows."""
    by_scorer: dict[str, list[float]] = {}
    for row in rows:
        by_scorer.setdefault(row.scorer, []).append(row.value)
    objectives = {k: round(sum(v) / len(v), 6) for k, v in sorted(by_scorer.items())}
    reasons = tuple(f"{r.probe}/{r.scorer}: {r.reason}" for r in rows if r.failed)
    return Evaluation(tuple(rows), objectives, weighted_fitness(objectives, scorers), reasons)


def failed_evaluation(reason: str, scorers: Mapping[str, float]) -> Evaluation:
    """The evaluation of an agent that could not be made (e.g. its fusion failed)."""
    return Evaluation((), {k: 0.0 for k, w in sorted(scorers.items()) if w > 0}, 0.0, (reason,))
