"""Evaluating one agent: answer every probe, score every answer, combine into fitness.

This is the unit of work an experiment runs concurrently (and a Prefect task
wraps). A failed answer or judge call is recorded as a *failed* score row with
its reason, never as a 0: the objective it belongs to is **unscored** for that
agent (left out of its objectives and fitness, listed in ``unscored``), so
provider noise never counts against an agent; a rerun retries it. Only
:class:`~furnace.domain.errors.BudgetExceeded` propagates (the run must stop).

Each probe is answered ``samples`` times, each reply (and its judgement) with its own seed
(:func:`sample_seed`: sample 0 keeps the experiment's seed), so the response cache keeps every
sample apart and a rerun is served from it; a probe's score per scorer is the mean over its samples.

Judge scorers ask ``judge`` (the experiment's ``judge_model``) when given, else
the agent's own model; with a ``panel`` (``judges: [a, b]``) each judge scorer is asked of every
judge of the panel (:mod:`furnace.scoring.panel`: one row per judge, and the panel's row that
objectives and fitness read). A probe's judge calls (every judge scorer, every judge of a panel)
are made at once when its reply is in, through the same model slots as every call. When traced
(``span``), each scorer that is not a model call is a ``tool`` step under it (its value and reason;
a failure as its error); model calls are traced by the model wrapper.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from furnace.domain import threads
from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir
from furnace.domain.errors import LLMError
from furnace.domain.threads import Executor, Future, wait
from furnace.evolution.records import ScoreRow
from furnace.evolution.tracker import Span
from furnace.llm.seam import LLM, TaskKind, system_user
from furnace.scoring.base import Score, persona_inputs
from furnace.scoring.brief import Brief, brief_fit
from furnace.scoring.diversity import diversity
from furnace.scoring.fitness import SCORERS, bootstrap_interval, weighted_fitness
from furnace.scoring.judge import judge_answer
from furnace.scoring.panel import Panel, RoutedJudge, judge_scorer, split_scorer
from furnace.scoring.probes import Probe, ProbeSet
from furnace.scoring.rules import constraint_compliance

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Evaluation:
    """Scores, objectives (mean per fully scored scorer), weighted fitness over them, and the
    objectives left unscored by a failure (with the reasons)."""

    scores: tuple[ScoreRow, ...]
    objectives: dict[str, float]
    fitness: float
    failure_reasons: tuple[str, ...] = field(default_factory=tuple)
    unscored: tuple[str, ...] = field(default_factory=tuple)


def sample_seed(seed: int, sample: int) -> int:
    """The seed of one sample of a (persona, probe) answer: ``seed`` for sample 0, else a seed derived
    from (seed, sample), distinct per sample, so each sample is its own cached request."""
    if sample == 0:
        return seed
    return int(hashlib.sha256(f"furnace-sample/{seed}/{sample}".encode()).hexdigest()[:7], 16)


def reply(llm: LLM, elixir: Elixir, system_prompt: str, probe: Probe, *, seed: int, sample: int = 0) -> str:
    """The agent's answer to one probe (REPLY task; ``sample``: which of its samples, ``seed`` that
    sample's seed); raises LLMError on failure. The sample index is part of the cache key."""
    request = system_user(
        TaskKind.REPLY,
        system_prompt,
        probe.message,
        temperature=0.7,
        seed=seed,
        inputs={"persona": persona_inputs(elixir), "message": probe.message, "instruction": None},
    )
    if sample:
        request = request.model_copy(update={"sample_index": sample})
    return llm.complete(request).text


def judge_calls(scorers: Mapping[str, float], panel: Panel | None = None) -> int:
    """The judge calls one answer costs: one per weighted judge scorer, of every judge of a ``panel``."""
    asked = sum(1 for s, w in scorers.items() if w > 0 and SCORERS[s].per_probe and SCORERS[s].kind == "judge")
    return asked * (len(panel.judges) if panel is not None else 1)


def _score_probe(
    llm: LLM,
    elixir: Elixir,
    system_prompt: str,
    probe: Probe,
    probes: ProbeSet,
    scorers: Mapping[str, float],
    seed: int,
    judge: LLM,
    span: Span | None = None,
    sample: int = 0,
    panel: Panel | None = None,
    pool: Executor | None = None,
    answers: dict[str, str] | None = None,
) -> list[ScoreRow]:
    """One sample's rows on ``probe``: the reply, then its judge calls all at once (on ``pool`` beside
    the calling thread: :func:`_fan_out`; one after another without one), then the rows in scorer order
    (each judge of a ``panel`` in panel order), whatever order the judges answered in. Sample 0's reply
    goes into ``answers`` (by probe id) when given."""
    seed = sample_seed(seed, sample)
    needs_answer = any(SCORERS[s].kind in ("rule", "judge") for s, w in scorers.items() if w > 0)
    answer: str | None = None
    error: str | None = None
    if needs_answer:
        try:
            answer = reply(llm, elixir, system_prompt, probe, seed=seed, sample=sample)
        except LLMError as err:
            error = f"reply failed: {err}"
    if answers is not None and answer is not None and sample == 0:
        answers[probe.id] = answer  # one key per probe: the probes' threads never write the same one
    target = probes.target_for(probe)  # the judge's yardstick; never shown to the persona
    names = [n for n in sorted(scorers) if scorers[n] > 0 and SCORERS[n].per_probe]
    judges: tuple[str | None, ...] = panel.judges if panel is not None else (None,)
    asks = [(name, j) for name in names if SCORERS[name].kind == "judge" for j in judges]

    def ask(item: tuple[str, str | None]) -> Score:
        name, j = item
        model = judge if j is None else RoutedJudge(judge, j)  # a panel's judge: its calls routed to it
        return judge_answer(
            model,
            elixir,
            probe.message,
            answer,
            name,  # type: ignore[arg-type]
            seed=seed,
            error=error,
            target=target,
        )

    verdicts = dict(zip(asks, _fan_out(pool, ask, asks), strict=True))
    rows: list[ScoreRow] = []
    for name in names:
        kind = SCORERS[name].kind
        if kind == "rule":
            score = _tool(
                span, name, probe.id, lambda: constraint_compliance(elixir, answer, error=error, target=target)
            )
        elif kind == "judge" and panel is None:
            score = verdicts[(name, None)]
        elif (
            kind == "judge" and panel is not None
        ):  # each judge's verdict is a row of its own; the panel's is the objective's
            each = {j: verdicts[(name, j)] for j in panel.judges}
            rows.extend(
                ScoreRow(probe.id, judge_scorer(name, j), v.value, v.reason, v.failed, v.feedback)
                for j, v in each.items()
            )
            score = panel.combine(each)
        else:
            score = _tool(span, name, probe.id, partial(_brief_score, elixir, probes.brief_for(probe)))
        rows.append(ScoreRow(probe.id, name, score.value, score.reason, score.failed, score.feedback))
    return rows


def _fan_out(pool: Executor | None, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` over ``items``, results in order: the first on the calling thread, the others submitted to
    ``pool`` (one after another without one). An item the pool has not started when its result is
    wanted is taken back and run on the calling thread, so a pool whose threads all wait on items they
    submitted never deadlocks (it only loses the overlap). When one raises (the budget stop), the items
    not started are dropped and the ones under way waited for before the error goes on: the caller ends
    after its last model call."""
    if pool is None or len(items) < 2:
        return [fn(item) for item in items]
    rest = [(item, pool.submit(fn, item)) for item in items[1:]]
    try:
        out = [fn(items[0])]
        out.extend(fn(item) if future.cancel() else future.result() for item, future in rest)
    except BaseException:
        # a cancelled future counts as done for wait() only once a thread has dequeued it: wait on the
        # ones under way alone (cancel() is False for them), never on the dropped ones
        wait([future for _, future in rest if not future.cancel()])
        raise
    return out


def _bounded_map(
    pool: Executor, fn: Callable[[T], R], items: Sequence[T], width: int, meanwhile: Callable[[], None] | None = None
) -> list[R]:
    """``fn`` over ``items`` on ``pool``, at most ``width`` at once; results in order. ``meanwhile``
    runs on the calling thread once the first ``width`` are submitted. When one raises (the budget
    stop), nothing more is submitted and the ones under way are waited for before the error goes
    on: the unit ends after its last model call, so its trace holds every call it paid for."""
    pending: deque[Future[R]] = deque(pool.submit(fn, item) for item in items[:width])
    if meanwhile is not None:
        meanwhile()
    rest = iter(items[width:])
    out: list[R] = []
    try:
        while pending:
            out.append(pending.popleft().result())
            item = next(rest, _END)
            if item is not _END:
                pending.append(pool.submit(fn, item))  # type: ignore[arg-type]
    except BaseException:
        wait(pending)
        raise
    return out


_END = object()


def _brief_score(elixir: Elixir, brief: Brief | None) -> Score:
    return brief_fit(elixir, brief) if brief else Score(1.0, "probe has no brief")


def _tool(span: Span | None, scorer: str, probe: str, score: Callable[[], Score]) -> Score:
    """Run one in-process scorer, traced as a ``tool`` step under ``span`` when traced."""
    step = span.child(f"score {scorer}", {"probe": probe}, "tool") if span is not None else None
    result = score()
    if step is not None:
        error = result.reason[:300] if result.failed else None
        step.end({"value": result.value, "reason": result.reason[:300]}, error=error)
    return result


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
    diversity_of: Callable[[], Callable[[], Score]] | None = None,
    parallel: int = 1,
    judge: LLM | None = None,
    span: Span | None = None,
    pool: Executor | None = None,
    samples: int = 1,
    first_sample: int = 0,
    over: Sequence[str] | None = None,
    panel: Panel | None = None,
    answers: dict[str, str] | None = None,
) -> Evaluation:
    """Answer and score every probe (``parallel`` probes at once; the model's own concurrency
    bound still applies), add diversity, and compute the weighted fitness. Judge scorers ask
    ``judge`` (default: ``llm``); ``span``: the step the in-process scorers are traced under;
    ``pool``: threads shared by the units of a run for their probes and, beside each probe's thread, its
    judge calls (all of a probe's at once: the judges answer the same reply); without it a pool of this
    call's own when ``parallel``, else one call after another. Rows come in probe and scorer order
    whatever order the calls end in, so the result never depends on the threads.
    ``diversity_of`` (instead of ``vector`` and ``population_vectors``): embeds the agent and its peers
    while the probes' model calls are under way (with ``pool``), so the calls never wait for the
    embedder, and returns what scores the agent's diversity once they are done.
    ``samples`` replies per probe, numbered from ``first_sample`` (fresh samples: a later number);
    ``over``: the probe ids the objectives and fitness are computed over (default: all of them);
    ``panel``: the judges each judge scorer is asked of (their calls routed through ``llm``);
    ``answers``: filled with each probe's sample-0 reply (what a reflection brief shows beside its feedback)."""
    rows: list[ScoreRow] = []
    judge_llm = judge if judge is not None else llm
    wants_diversity = scorers.get("diversity", 0) > 0
    embedded: list[Callable[[], Score]] = []
    failed: list[BaseException] = []

    def embed() -> None:
        if wants_diversity and diversity_of is not None and not embedded and not failed:
            try:
                embedded.append(diversity_of())
            except Exception as err:  # raised once the probes are done: no call is left running
                failed.append(err)

    fan = pool  # where a probe's judge calls run beside it (the probes' threads)

    def one(item: tuple[Probe, int]) -> list[ScoreRow]:
        probe, sample = item
        return _score_probe(
            llm, elixir, system_prompt, probe, probes, scorers, seed, judge_llm, span, sample, panel, fan, answers
        )

    work = [(p, first_sample + i) for p in probes.probes for i in range(max(1, samples))]
    parts: list[list[ScoreRow]] = []
    if parallel > 1 and len(work) > 1 and pool is not None:
        parts = _bounded_map(pool, one, work, parallel, meanwhile=embed)
    elif parallel > 1 and len(work) > 1:
        with threads.pool(min(parallel, len(work)), name="furnace-eval") as own:
            fan = own
            parts = list(own.map(one, work))  # results in work order
    else:
        parts = [one(item) for item in work]
    rows.extend(mean_of_samples(parts))
    embed()
    if failed:
        raise failed[0]
    if wants_diversity:
        score = _tool(
            span,
            "diversity",
            "*",
            embedded[0]
            if embedded
            else lambda: diversity(vector, population_vectors) if vector is not None else Score.failure("no embedding"),
        )
        rows.append(ScoreRow("*", "diversity", score.value, score.reason, score.failed))
    return combine(rows, scorers, over=over)


def mean_of_samples(parts: Sequence[Sequence[ScoreRow]]) -> list[ScoreRow]:
    """One row per (probe, scorer) from the rows of every sample, in first-seen order: the mean value;
    failed when any sample failed (with that sample's reason); else the first sample's reason and
    feedback (what reflection reads beside that sample's answer)."""
    grouped: dict[tuple[str, str], list[ScoreRow]] = {}
    for part in parts:
        for row in part:
            grouped.setdefault((row.probe, row.scorer), []).append(row)
    out = []
    for (probe, scorer), rows in grouped.items():
        if len(rows) == 1:
            out.append(rows[0])
            continue
        failed = next((r for r in rows if r.failed), None)
        first = failed or rows[0]
        value = round(sum(r.value for r in rows) / len(rows), 6)
        reason = first.reason if failed else f"{first.reason} (mean of {len(rows)} samples)"
        out.append(ScoreRow(probe, scorer, value, reason, failed is not None, first.feedback))
    return out


def probe_fitness(rows: Sequence[ScoreRow], scorers: Mapping[str, float]) -> dict[str, float]:
    """Each probe's own fitness: the weighted mean of its scorers' values and the per-agent rows
    (``*``, diversity). With every scorer on every probe, their mean is the weighted fitness over
    those probes, so they are what a bootstrap over probes resamples."""
    shared = {r.scorer: r.value for r in rows if r.probe == "*" and not r.failed and r.scorer in scorers}
    by_probe: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.probe != "*" and not r.failed and r.scorer in scorers:
            by_probe.setdefault(r.probe, {})[r.scorer] = r.value
    out = {}
    for probe, values in by_probe.items():
        objectives = {**shared, **values}
        out[probe] = weighted_fitness(objectives, {k: w for k, w in scorers.items() if k in objectives})
    return out


def combine(rows: Sequence[ScoreRow], scorers: Mapping[str, float], *, over: Sequence[str] | None = None) -> Evaluation:
    """Objectives (mean value per scorer) and weighted fitness from score rows (``over``: only the rows
    of these probes and the per-agent ``*`` rows count; every row is kept).

    A scorer with a failed row is *unscored*: it has no objective (a mean over fewer probes
    would not compare with other agents'), and the fitness is the weighted mean of the
    objectives that were scored. The engine keeps unscored agents out of selection.
    """
    judged = {r.scorer for r in rows if split_scorer(r.scorer)[1] is not None}
    unscored = sorted({r.scorer for r in rows if r.failed and r.scorer not in judged})
    by_scorer: dict[str, list[float]] = {}
    counted = None if over is None else {*over, "*"}
    for row in rows:
        if row.scorer not in scorers or (counted is not None and row.probe not in counted):
            continue
        if row.scorer not in unscored:
            by_scorer.setdefault(row.scorer, []).append(row.value)
    objectives = {k: round(sum(v) / len(v), 6) for k, v in sorted(by_scorer.items())}
    # one judge's failure is in its panel row's reason (a judge's own rows are not counted twice)
    reasons = tuple(f"{r.probe}/{r.scorer}: {r.reason}" for r in rows if r.failed and r.scorer not in judged)
    weights = {k: w for k, w in scorers.items() if k in objectives}
    return Evaluation(tuple(rows), objectives, weighted_fitness(objectives, weights), reasons, tuple(unscored))


def test_figures(
    test: Evaluation | None, train: float, scorers: Mapping[str, float], *, seed: int, agent_id: str
) -> dict[str, Any]:
    """One agent's held-out figures from its evaluation on the **test** probes: ``test`` fitness, its seeded
    95% bootstrap interval over the test probes (``test_low``, ``test_high``; the generator is seeded by
    ``seed`` and ``agent_id``) and the ``gap`` to ``train``; a failed test evaluation gives
    ``test_unscored`` (its reasons), never a 0; no test evaluation gives nothing."""
    if test is None:
        return {}
    if test.failure_reasons:
        return {"test_unscored": list(test.failure_reasons[:2])}
    values = list(probe_fitness(test.scores, scorers).values())
    low, high = bootstrap_interval(values, seed=int(content_key([seed, agent_id])[:8], 16))
    fitness = round(test.fitness, 6)
    return {"test": fitness, "test_low": low, "test_high": high, "gap": round(train - fitness, 6)}


def split_held_out(
    ev: Evaluation, probes: ProbeSet, scorers: Mapping[str, float], *, seed: int, agent_id: str
) -> tuple[Evaluation, dict[str, Any]]:
    """An evaluation over every probe of ``probes``, split for a flow that ranks without a search loop (a
    mutation sweep, one fusion): the evaluation over the probes outside the **test** split (what it ranks
    by and reports as fitness; its failures are the only ones that leave it unscored) and the held-out
    row (``train``: that fitness, and :func:`test_figures` over the test probes)."""
    held = {p.id for p in probes.splits()["test"]}
    search = combine([r for r in ev.scores if r.probe not in held], scorers)
    if not ev.scores:  # nothing was scored (a failed fusion): its reasons stand
        search = ev
    test = combine([r for r in ev.scores if r.probe in held or r.probe == "*"], scorers) if held and ev.scores else None
    row = {
        "train": round(search.fitness, 6),
        **test_figures(test, search.fitness, scorers, seed=seed, agent_id=agent_id),
    }
    return search, row


def failed_evaluation(reason: str, scorers: Mapping[str, float]) -> Evaluation:
    """The evaluation of an agent that could not be made (e.g. its fusion failed): nothing scored."""
    return Evaluation((), {}, 0.0, (reason,), tuple(k for k, w in sorted(scorers.items()) if w > 0))
