"""Mutation sweep: one base elixir × a grid of rates × seeds, each variant scored and recorded.

A sweep is stored like an experiment (``ExperimentResults``: the live store in the CLI and the flow),
under the id ``sweep-<base>-<key>``, where the key covers everything that shapes its scores (the
base's content, the grid, the probes, the scorers and their versions, the mutation operator's
version, the model). So ``furnace experiment show``, the app's Compare page and ``furnace ask``
read its scores, judge feedback and failures like an experiment's: the base is generation 0,
the variants generation 1, one individual per cell. Each cell's model calls are attributed to
the run ``<sweep id>/<cell>`` in the call ledger; the sweep's figures are their sums (every run
of it). A rerun is served from the response cache and keeps the stored records (insert-if-absent).

Splits (docs/methods.md): a cell's ``fitness`` — what the sweep ranks by — is over the probes outside the
**test** split; the test probes are scored beside it for the report only, and every cell shows its test
fitness with a 95% interval and the gap (in its row, in ``held_out`` of the summary, so ``experiment show``
and the app show them as an experiment's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir
from furnace.domain.errors import BudgetExceeded, FurnaceError
from furnace.domain.render import render_prompt
from furnace.domain.threads import parallel_map
from furnace.evolution.engine import Breeder
from furnace.evolution.evaluate import Evaluation, combine, evaluate_agent, failed_evaluation, split_held_out
from furnace.evolution.records import ExperimentRecord, ExperimentResults, GenerationRecord, IndividualRecord
from furnace.evolution.report import HELD_OUT_FIELDS, held_out_columns
from furnace.evolution.tracker import NullTracker, Tracker, log_held_out
from furnace.llm.cache import CallTotals
from furnace.llm.seam import LLM
from furnace.scoring.base import persona_inputs
from furnace.scoring.probes import ProbeSet
from furnace.storage.store import snapshot_soon

DEFAULT_SCORERS = {"constraints": 0.3, "fidelity": 0.3, "tone": 0.2, "brief_fit": 0.2}


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep evaluates: the base, the grid, the probes and scorers, the model."""

    base: Elixir
    rates: tuple[float, ...]
    seeds: tuple[int, ...]
    probes: ProbeSet
    model: str
    scorers: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SCORERS))

    def cells(self) -> list[tuple[float, int]]:
        """(rate, seed) per cell: the base itself first (rate 0, seed 0), then the grid in order."""
        return [(0.0, 0)] + [(float(r), int(s)) for r in self.rates for s in self.seeds]

    def config(self) -> dict[str, Any]:
        """The sweep as stored (the experiment record's config)."""
        return {
            "kind": "mutation-sweep",
            "base": self.base.id,
            "base_version": self.base.version,
            "rates": list(self.rates),
            "seeds": list(self.seeds),
            "probes": {"set": self.probes.name, "limit": len(self.probes.probes)},
            "scorers": dict(sorted(self.scorers.items())),
        }

    @property
    def sweep_id(self) -> str:
        from furnace.fusion.operators import OPERATORS
        from furnace.scoring.fitness import SCORERS

        key = content_key(
            {
                "base": self.base.content_hash,
                "cells": self.cells(),
                "probes": self.probes.model_dump(mode="json"),
                "scorers": {k: [w, SCORERS[k].version] for k, w in sorted(self.scorers.items()) if k in SCORERS},
                "op_version": OPERATORS["mutation"].op_version,
                "model": self.model,
                # what a cell's fitness is over: a sweep stored before splits ranked on every probe
                "fitness_over": "outside the test split",
            }
        )
        return f"sweep-{self.base.id}-{key[:10]}"


def sweep_cell(plan: SweepPlan, index: int, *, breeder: Breeder, llm: LLM) -> IndividualRecord:
    """Cell ``index`` of ``plan``: the base (cell 0) or a mutation of it at the cell's rate and seed,
    scored on the probes. A failed fusion or judgement is recorded as a failure, never as a score."""
    rate, seed = plan.cells()[index]
    for_run = getattr(llm, "for_run", None)
    cell_llm: LLM = for_run(f"{plan.sweep_id}/{index}") if callable(for_run) else llm
    base = plan.base
    elixir, prompt, agent_id, lineage_hash, parents = base, render_prompt(base), base.id, None, tuple[str, ...]()
    ev: Evaluation | None = None
    if index > 0:
        parents = (base.id,)
        try:
            bred = breeder([base.ref], "mutation", seed, {"rate": rate}, cell_llm)
        except BudgetExceeded:
            raise
        except FurnaceError as err:
            ev = failed_evaluation(f"fusion failed: {err}", plan.scorers)
            agent_id = f"failed-{plan.sweep_id}-{index}"
        else:
            elixir, prompt, agent_id, lineage_hash = bred.elixir, bred.system_prompt, bred.agent_id, bred.lineage_hash
    if ev is None:
        ev = evaluate_agent(cell_llm, elixir, prompt, plan.probes, plan.scorers, seed=seed)
    everything = ev.scores  # every probe's rows are kept: the test ones give the held-out figures
    ev, _ = split_held_out(ev, plan.probes, plan.scorers, seed=seed, agent_id=agent_id)  # ranked without test
    run_totals = getattr(cell_llm, "run_totals", None)
    spent: CallTotals = run_totals() if callable(run_totals) else CallTotals()
    return IndividualRecord(
        experiment_id=plan.sweep_id,
        generation=0 if index == 0 else 1,
        agent_id=agent_id,
        slot=index,
        operator="seed" if index == 0 else "mutation",
        parents=parents,
        lineage_hash=lineage_hash,
        elixir=persona_inputs(elixir),
        system_prompt=prompt,
        fitness=ev.fitness,
        objectives=ev.objectives,
        scores=everything,
        failures=len(ev.failure_reasons),
        failure_reasons=ev.failure_reasons,
        calls=spent.calls,
        tokens=spent.total_tokens,
        cost_usd=round(spent.cost_usd, 9),
    )


def cell_totals(plan: SweepPlan, llm: LLM) -> list[CallTotals]:
    """Each cell's calls from the call ledger (every run of the sweep; empty totals without a ledger)."""
    for_run = getattr(llm, "for_run", None)
    if not callable(for_run):
        return [CallTotals() for _ in plan.cells()]
    return [for_run(f"{plan.sweep_id}/{index}").run_totals() for index in range(len(plan.cells()))]


def held_out_row(plan: SweepPlan, record: IndividualRecord) -> dict[str, Any]:
    """One cell's held-out figures (as an experiment's ``held_out.agents`` row): ``validation`` and
    ``train``, its fitness outside the test split, and its test fitness with its interval and the gap."""
    _, seed = plan.cells()[record.slot]
    everything = combine(record.scores, plan.scorers)
    _, row = split_held_out(everything, plan.probes, plan.scorers, seed=seed, agent_id=record.agent_id)
    return {"validation": round(record.fitness, 6), **row}


def _fittest_first(row: dict[str, Any]) -> tuple[bool, float, str]:
    """The sweep's order: scored cells fittest first (ties by agent id, as its best and every leaderboard
    break them), then the unscored ones."""
    return (row["fitness"] is None, -(row["fitness"] or 0.0), row["agent_id"])


def cell_row(plan: SweepPlan, record: IndividualRecord) -> dict[str, Any]:
    """One line of the sweep's table: its fitness (outside the test split) and held-out figures; None for a
    cell a failure left unscored (its partial figures are no score)."""
    rate, seed = plan.cells()[record.slot]
    held = held_out_columns(held_out_row(plan, record)) if record.scored else {}
    return {
        "sweep_id": plan.sweep_id,
        "rate": rate,
        "seed": seed,
        "agent_id": record.agent_id,
        "lineage_hash": record.lineage_hash,
        "fitness": record.fitness if record.scored else None,
        **{k: held.get(k) for k in HELD_OUT_FIELDS},
        "objectives": record.objectives,
        "failures": record.failures,
        "reasons": list(record.failure_reasons[:3]),
    }


def record_sweep(
    plan: SweepPlan,
    records: Sequence[IndividualRecord],
    results: ExperimentResults,
    *,
    llm: LLM,
    tracker: Tracker | None = None,
) -> list[dict[str, Any]]:
    """Store a finished sweep like an experiment (its cells as individuals, the base as generation 0,
    the variants as generation 1) and log it to ``tracker``; its rows, fittest first. Calls, tokens
    and cost (per generation and in total) are the call ledger's for the sweep's cells."""
    tracker = tracker or NullTracker()
    spent = cell_totals(plan, llm)
    totals = CallTotals()
    for cell in spent:
        totals = totals.plus(cell)
    sweep_id = plan.sweep_id
    results.start_experiment(ExperimentRecord(sweep_id, f"sweep {plan.base.id}", plan.config(), 0, plan.model))
    tracker.start_experiment(
        sweep_id,
        {"base": plan.base.id, "rates": ",".join(map(str, plan.rates)), "seeds": ",".join(map(str, plan.seeds))},
        {
            "furnace.experiment_id": sweep_id,
            "furnace.experiment_name": f"sweep {plan.base.id}",  # the MLflow run's name
            "furnace.kind": "mutation-sweep",
            "furnace.model": plan.model,
        },
    )
    for record in records:
        results.save_individual(record)
    scored = [r for r in records if r.scored]
    tested = {r.agent_id: held_out_row(plan, r) for r in scored}
    bests: dict[int, str] = {}
    for generation in (0, 1):
        members = sorted((r for r in scored if r.generation == generation), key=lambda r: (-r.fitness, r.agent_id))
        fits = [r.fitness for r in members]
        best, mean = max(fits, default=0.0), round(sum(fits) / len(fits), 9) if fits else 0.0
        used = CallTotals()
        for index, cell in enumerate(spent):
            if (index > 0) == (generation == 1):
                used = used.plus(cell)
        results.save_generation(
            GenerationRecord(
                sweep_id,
                generation,
                tuple(r.agent_id for r in members),
                best,
                mean,
                {},
                used.model_calls,
                used.cached_calls,
                used.total_tokens,
                round(used.cost_usd, 9),
            )
        )
        tracker.log_generation(generation, {"best_fitness": best, "mean_fitness": mean}, {})
        if members:
            bests[generation] = members[0].agent_id
    steps = {
        g: {f"best_{k}": float(v) for k, v in held_out_columns(tested[a]).items() if k in HELD_OUT_FIELDS}
        for g, a in bests.items()
    }
    log_held_out(tracker, {g: m for g, m in steps.items() if m}, {})
    rows = sorted((cell_row(plan, r) for r in records), key=_fittest_first)
    fittest = next((r for r in sorted(scored, key=lambda r: (-r.fitness, r.agent_id))), None)
    best_agent = fittest.agent_id if fittest else None
    summary = {
        "best_agent": best_agent,
        "best_fitness": fittest.fitness if fittest else None,
        "generations": 2,
        "failures": sum(r.failures for r in records),
        "unscored": sum(1 for r in records if not r.scored),
        "judge_model": plan.model,
        **({k: v for k, v in held_out_columns(tested[best_agent]).items() if v is not None} if best_agent else {}),
        "held_out": {
            "splits": {name: [p.id for p in probes] for name, probes in plan.probes.splits().items()},
            "samples_per_probe": 1,
            "confidence": 0.95,
            "agents": tested,
            "champion": best_agent,
            "generations": [{"generation": g, "agent_id": a} for g, a in sorted(bests.items())],
        },
        **totals.as_dict(),
    }
    results.finish_experiment(sweep_id, "finished", summary)
    snapshot_soon(results)  # the summary reaches the snapshots analysis and ask read
    tracker.finish(
        "finished",
        {"furnace.status": "finished", "furnace.best_agent": best_agent or ""},
        {"sweep.json": rows},
        totals.as_dict(),
    )
    return rows


def run_sweep(
    plan: SweepPlan,
    *,
    breeder: Breeder,
    llm: LLM,
    results: ExperimentResults,
    tracker: Tracker | None = None,
    concurrency: int = 4,
    cell_runner: Callable[[list[int]], list[IndividualRecord]] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every cell (``concurrency`` at once, or through ``cell_runner``), record the sweep
    (:func:`record_sweep`) and return its rows, fittest first."""
    indexes = list(range(len(plan.cells())))
    if cell_runner is not None:
        records = cell_runner(indexes)
    else:
        records = parallel_map(
            lambda i: sweep_cell(plan, i, breeder=breeder, llm=llm), indexes, workers=concurrency, name="furnace-sweep"
        )
    return record_sweep(plan, records, results, llm=llm, tracker=tracker)
