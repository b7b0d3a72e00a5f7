"""Experiments over generations: fitness, cost, operator success and judge feedback, as table rows.

Reads :class:`furnace.evolution.records.ExperimentResults` (the live store in the app; a page passes
:class:`furnace.views.reads.ReadsOnce` over it, so each read is made once per render);
MLflow figures are merged in by the page when a run exists.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from furnace.domain.errors import SealError
from furnace.evolution.records import ExperimentRecord, IndividualRecord
from furnace.evolution.report import HELD_OUT_FIELDS, held_out_columns
from furnace.llm.cache import CallTotals
from furnace.scoring.fitness import SCORERS, pareto_front
from furnace.views.reads import ResultReads


def held_out(results: ResultReads, experiment_id: str) -> dict[str, Any]:
    """The experiment's held-out figures as its summary keeps them (empty before it finished)."""
    exp = results.get_experiment(experiment_id)
    return dict((exp.summary or {}).get("held_out") or {}) if exp is not None else {}


def held_out_fields(figures: dict[str, Any], agent_id: str) -> dict[str, Any]:
    """One agent's train fitness, test fitness with its 95% interval, and the train-test gap (rounded);
    None where the agent was not scored on test."""
    row = held_out_columns(figures.get("agents", {}).get(agent_id))
    return {k: (round(row[k], 6) if row.get(k) is not None else None) for k in HELD_OUT_FIELDS}


def generation_rows(results: ResultReads, experiment_id: str) -> list[dict[str, Any]]:
    """One row per finished generation: best (validation) and mean fitness, the best's train and test
    fitness (with its interval), calls, cached calls, tokens, cost."""
    figures = held_out(results, experiment_id)
    return [
        {
            "generation": g.generation,
            "best_fitness": round(g.best_fitness, 6),
            "mean_fitness": round(g.mean_fitness, 6),
            **{f"best_{k}": v for k, v in held_out_fields(figures, g.survivors[0] if g.survivors else "").items()},
            "calls": g.calls,
            "cached_calls": g.cached_calls,
            "tokens": g.tokens,
            "cost_usd": round(g.cost_usd, 6),
            **{f"weight:{k}": round(v, 3) for k, v in sorted(g.operator_weights.items())},
        }
        for g in results.generations(experiment_id)
    ]


def operator_rows(results: ResultReads, experiment_id: str) -> list[dict[str, Any]]:
    """Per operator and generation: children made and how many beat their fittest parent (by scores only: a
    child a failure left unscored, or a reflected child rejected on its minibatch, beats no one, and a parent
    without a score is no bar)."""
    everyone = results.individuals(experiment_id)
    fitness: dict[str, float] = {}
    for r in sorted(everyone, key=lambda r: r.generation):
        if r.has_score:
            fitness.setdefault(r.agent_id, r.fitness)
    stats: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    seen: set[str] = set()
    for r in sorted(everyone, key=lambda r: (r.generation, r.slot)):
        if not r.parents or r.agent_id in seen:
            continue
        seen.add(r.agent_id)
        best_parent = max((fitness.get(p, 0.0) for p in r.parents), default=0.0)
        cell = stats[(r.generation, r.operator)]
        cell[0] += 1
        cell[1] += int(r.has_score and r.fitness > best_parent)
    return [
        {
            "generation": gen,
            "operator": op,
            "children": made,
            "fitter_than_parents": won,
            "success_rate": round(won / made, 3) if made else 0.0,
        }
        for (gen, op), (made, won) in sorted(stats.items())
    ]


def _best_scored(results: ResultReads, experiment_id: str) -> tuple[dict[str, IndividualRecord], list[Any]]:
    """Each agent's fittest scored record, and the records of agents that were never scored."""
    best: dict[str, IndividualRecord] = {}
    failed: dict[str, IndividualRecord] = {}
    for r in results.individuals(experiment_id):
        if r.rejected:  # a reflected child that lost on its minibatch: never in the population
            continue
        if not r.scored:
            failed.setdefault(r.agent_id, r)
        elif r.agent_id not in best or r.fitness > best[r.agent_id].fitness:
            best[r.agent_id] = r
    return best, [r for a, r in sorted(failed.items()) if a not in best]


def ranked(results: ResultReads, experiment_id: str, limit: int = 10) -> list[IndividualRecord]:
    """The fittest distinct agents of an experiment (each one's best record), scored ones only:
    an agent a failure left unscored is never ranked (see :func:`unscored_rows`)."""
    best, _ = _best_scored(results, experiment_id)
    return sorted(best.values(), key=lambda r: (-r.fitness, r.agent_id))[:limit]


def leaderboard_rows(results: ResultReads, experiment_id: str, limit: int = 10) -> list[dict[str, Any]]:
    """:func:`ranked` as table rows: fitness (validation), train fitness, test fitness with its 95%
    interval and the train-test gap, one column per objective and the judge's feedback."""
    figures = held_out(results, experiment_id)
    return [
        {
            "agent_id": r.agent_id,
            "generation": r.generation,
            "operator": r.operator,
            "fitness": round(r.fitness, 6),
            **held_out_fields(figures, r.agent_id),
            **{k: round(v, 3) for k, v in sorted(r.objectives.items())},
            "judge_feedback": judge_feedback(r),
        }
        for r in ranked(results, experiment_id, limit)
    ]


def unscored_rows(results: ResultReads, experiment_id: str, limit: int = 50) -> list[dict[str, Any]]:
    """Agents a failure left unscored (a failed fusion, answer or judgement): the objectives that are
    unknown and why. Never ranked, kept out of selection; a rerun evaluates them again."""
    _, failed = _best_scored(results, experiment_id)
    return [
        {
            "agent_id": r.agent_id,
            "generation": r.generation,
            "operator": r.operator,
            "unscored": "everything" if r.unscored == ("*",) else ", ".join(r.unscored),
            "reason": (r.failure_reasons or ("?",))[0],
        }
        for r in failed[:limit]
    ]


def feedback_rows(record: IndividualRecord) -> list[dict[str, Any]]:
    """The judge's feedback stored for one individual: one row per probe and scorer that has some,
    weakest first (what was missing or wrong; the score's evidence is its ``reason``)."""
    rows = [s for s in record.scores if s.feedback]
    return [
        {"probe": s.probe, "scorer": s.scorer, "value": round(s.value, 6), "feedback": s.feedback}
        for s in sorted(rows, key=lambda s: (s.value, s.probe, s.scorer))
    ]


def agent_feedback(results: ResultReads, experiment_id: str, agent_id: str) -> list[dict[str, Any]]:
    """:func:`feedback_rows` of ``agent_id``'s first scoring in the experiment (a survivor is not judged again)."""
    mine = sorted((r for r in results.individuals(experiment_id) if r.agent_id == agent_id), key=lambda r: r.generation)
    return feedback_rows(mine[0]) if mine else []


MAX_OVERLAY = 5  # experiments overlaid at once


def overlay_rows(results: ResultReads, experiment_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Long-format rows for overlaying experiments: per experiment and generation, best (validation) and
    mean fitness, and once the run has finished, the best's ``train`` and ``test`` fitness (a test row
    carries its 95% interval, ``test_low``/``test_high``, and the ``train_test_gap``), against the
    generation and against the model calls spent so far (cumulative, from the ledger figures)."""
    rows: list[dict[str, Any]] = []
    for exp_id in list(dict.fromkeys(experiment_ids))[:MAX_OVERLAY]:
        figures = held_out(results, exp_id)
        spent = cost = 0.0
        for g in sorted(results.generations(exp_id), key=lambda g: g.generation):
            spent += g.calls
            cost += g.cost_usd
            best = held_out_fields(figures, g.survivors[0] if g.survivors else "")
            measures = [
                ("best", round(g.best_fitness, 6)),
                ("mean", round(g.mean_fitness, 6)),
                ("train", best["train_fitness"]),
                ("test", best["test_fitness"]),
            ]
            for measure, value in measures:
                if value is None:  # not scored on held-out probes (yet)
                    continue
                test = measure == "test"
                rows.append(
                    {
                        "experiment": exp_id,
                        "generation": g.generation,
                        "calls_spent": int(spent),
                        "cost_spent_usd": round(cost, 6),
                        "measure": measure,
                        "fitness": value,
                        **{k: best[k] if test else None for k in ("test_low", "test_high", "train_test_gap")},
                    }
                )
    return rows


LEDGER_TOTALS = ("model_calls", "cached_calls", "failed_calls", "attempts", "tokens", "cost_usd")


def check_ledger(exp: ExperimentRecord, ledger: CallTotals) -> None:
    """Raise SealError unless the call ledger's rows (``ledger``: their sums for the experiment and its
    sub-runs) still add up to the totals sealed into its summary when it finished. A run going again
    may have added calls since (more, never fewer); a finished one holds exactly those. So a deleted,
    added or edited ledger row is said, not shown as if nothing happened (docs/reliability.md)."""
    sealed = {k: exp.summary[k] for k in ("calls", *LEDGER_TOTALS) if k in exp.summary}
    if not sealed:
        return  # never finished: no sealed totals to hold the ledger to
    now = ledger.as_dict()
    running = exp.status == "running"
    if all(now[k] >= v if running else now[k] == v for k, v in sealed.items()):
        return
    raise SealError(
        f"experiment {exp.experiment_id}: its call ledger holds {now['calls']} calls (${now['cost_usd']:.6f}),"
        f" its sealed summary recorded {sealed.get('calls', '?')} (${float(sealed.get('cost_usd', 0)):.6f}):"
        " ledger rows were deleted or altered outside furnace"
    )


def totals_rows(
    results: ResultReads, experiment_ids: Sequence[str], ledger: Callable[[str], CallTotals]
) -> list[dict[str, Any]]:
    """One row per experiment: generations, best fitness and the run's totals. A finished run's totals
    are the call ledger's (every process that worked on it, failed attempts included), as in its report:
    recomputed from its rows (``ledger``: the sums for an experiment and its sub-runs) and held to the
    totals sealed into its summary (:func:`check_ledger`, a SealError when rows were deleted or altered);
    a run still going shows the sums of its finished generations so far (``source`` says which)."""
    rows = []
    for exp_id in list(dict.fromkeys(experiment_ids))[:MAX_OVERLAY]:
        gens = results.generations(exp_id)
        exp = results.get_experiment(exp_id)
        summary = exp.summary if exp is not None else {}
        row: dict[str, Any] = {
            "experiment": exp_id,
            "generations": len(gens),
            "best_fitness": round(max(g.best_fitness for g in gens), 6) if gens else None,  # None: not known yet
        }
        if exp is not None and all(k in summary for k in LEDGER_TOTALS):
            now = ledger(exp_id)
            check_ledger(exp, now)
            held = now.as_dict()
            row |= {k: held[k] for k in LEDGER_TOTALS} | {"source": "call ledger"}
        else:
            row |= {
                "model_calls": sum(g.calls for g in gens),
                "cached_calls": sum(g.cached_calls for g in gens),
                "failed_calls": None,
                "attempts": None,
                "tokens": sum(g.tokens for g in gens),
                "cost_usd": round(sum(g.cost_usd for g in gens), 6),
                "source": "finished generations (run in progress)",
            }
        rows.append(row)
    return rows


def operator_totals(results: ResultReads, experiment_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per experiment and operator over all generations: children made and the share fitter than their parents."""
    rows = []
    for exp_id in list(dict.fromkeys(experiment_ids))[:MAX_OVERLAY]:
        made: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for r in operator_rows(results, exp_id):
            made[r["operator"]][0] += r["children"]
            made[r["operator"]][1] += r["fitter_than_parents"]
        rows += [
            {
                "experiment": exp_id,
                "operator": op,
                "children": n,
                "fitter_than_parents": won,
                "success_rate": round(won / n, 3) if n else 0.0,
            }
            for op, (n, won) in sorted(made.items())
        ]
    return rows


def axis_domain(values: Sequence[float], *, pad: float = 0.1, min_span: float = 0.02) -> tuple[float, float]:
    """An axis range scaled to the data (not from 0): min..max widened by ``pad`` of the span on each side."""
    if not values:
        return (0.0, 1.0)
    lo, hi = min(values), max(values)
    span = max(hi - lo, min_span)
    mid = (lo + hi) / 2
    lo, hi = min(lo, mid - span / 2), max(hi, mid + span / 2)
    return (round(lo - pad * span, 6), round(hi + pad * span, 6))


def objective_names(results: ResultReads, experiment_ids: Sequence[str]) -> list[str]:
    """The objectives scored in these experiments, sorted."""
    return sorted({k for exp_id in experiment_ids for r in results.individuals(exp_id) for k in r.objectives})


def pareto_points(results: ResultReads, experiment_ids: Sequence[str], x: str, y: str) -> list[dict[str, Any]]:
    """Each distinct scored agent of the experiments (its best record) on objectives ``x`` and ``y``, with
    its fitness and, when it was scored on test, its train and test fitness (interval, gap); ``front``
    marks the agents no other agent beats on both (the Pareto front of these two)."""
    best: dict[str, IndividualRecord] = {}
    where: dict[str, str] = {}
    for exp_id in list(dict.fromkeys(experiment_ids))[:MAX_OVERLAY]:
        for r in results.individuals(exp_id):
            if not r.scores or x not in r.objectives or y not in r.objectives:
                continue  # failed or unscored: not a point
            if r.agent_id not in best or r.fitness > best[r.agent_id].fitness:
                best[r.agent_id], where[r.agent_id] = r, exp_id
    keys = [x] if x == y else [x, y]
    front = set(pareto_front({a: r.objectives for a, r in best.items()}, keys))
    figures = {exp_id: held_out(results, exp_id) for exp_id in set(where.values())}
    return [
        {
            "agent_id": a,
            "experiment": where[a],
            "generation": r.generation,
            "operator": r.operator,
            "fitness": round(r.fitness, 6),
            **held_out_fields(figures[where[a]], a),
            "x": round(r.objectives[x], 6),
            "y": round(r.objectives[y], 6),
            "front": a in front,
        }
        for a, r in sorted(best.items(), key=lambda item: (-item[1].fitness, item[0]))
    ]


def judge_feedback(record: IndividualRecord, *, limit: int = 2) -> str:
    """The judge's reasons for one record (judge scorers only, failed verdicts left out), first ``limit`` per scorer."""
    by_scorer: dict[str, list[str]] = defaultdict(list)
    for s in record.scores:
        spec = SCORERS.get(s.scorer)
        text = s.feedback or s.reason  # what was missing or wrong, else the verdict's reason
        text = text.removeprefix(f"{s.scorer}: ")  # a note that names its scorer is shown under that name once
        if spec and spec.kind == "judge" and not s.failed and text and len(by_scorer[s.scorer]) < limit:
            by_scorer[s.scorer].append(text)
    return " · ".join(f"{scorer}: {' / '.join(reasons)}" for scorer, reasons in sorted(by_scorer.items()))


PREFECT_FLOW_RUN_TAG = "furnace.prefect_flow_run_id"  # set on the MLflow run by a run made under Prefect


def run_links(summary: dict[str, Any] | None, *, mlflow_ui: str | None, prefect_ui: str | None) -> dict[str, str]:
    """Links out to the experiment's MLflow run and Prefect flow run, only for the UIs configured
    (FURNACE_MLFLOW_UI_URL, FURNACE_PREFECT_UI_URL) and the runs known; empty otherwise."""
    links: dict[str, str] = {}
    if not summary:
        return links
    if mlflow_ui and summary.get("mlflow_experiment_id"):
        base = mlflow_ui.rstrip("/")
        links["MLflow run"] = f"{base}/#/experiments/{summary['mlflow_experiment_id']}/runs/{summary['run_id']}"
    flow_run = (summary.get("tags") or {}).get(PREFECT_FLOW_RUN_TAG)
    if prefect_ui and flow_run:
        links["Prefect flow run"] = f"{prefect_ui.rstrip('/')}/runs/flow-run/{flow_run}"
    return links
