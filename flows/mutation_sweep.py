"""Prefect flow: one base elixir × rates × seeds → variants, scored, stored like an experiment.

``furnace sweep BASE --prefect`` runs it. One task per cell (``furnace.evolution.sweep.sweep_cell``),
then one task records the sweep in the live store and MLflow (``record_sweep``), exactly as the in-process
``furnace sweep`` does.

Every task is cached by Prefect (docs/prefect.md#caching). The flow resolves the base to its latest
version first; a cell is keyed on the sweep id (the base's content hash, the grid, the probes, the
scorers' and the mutation operator's versions, the model) with the answer versions and the cell's index,
the record on the records it stores and where. A rerun shows ``Cached`` task runs and makes no model
call; a new base version or another model makes new keys. A cell with a failure is never cached.
"""

from __future__ import annotations

from typing import Any  # noqa: E402

from prefect import flow, task  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from furnace.evolution.records import IndividualRecord  # noqa: E402
from furnace.evolution.sweep import DEFAULT_SCORERS, SweepPlan  # noqa: E402
from furnace.runtime import Runtime  # noqa: E402

from ._common import (
    Unscored,
    cache_options,
    furnace_version,
    operator_versions,
    outcome,
    results_dir,
    retry_options,
    runtime,
    scorer_versions,
    task_key,
    task_retries,
)


def _plan(home: str | None, spec: dict[str, Any]) -> tuple[Runtime, SweepPlan]:
    """The runtime and the sweep of ``spec`` (plain data: base id and the version the flow resolved, rates,
    seeds, probe set and limit), rebuilt in each task."""
    from furnace.scoring.probes import load_probe_set

    ctx = runtime(home)
    base = ctx.store.get_elixir(spec["base_id"], spec["version"])  # the version the flow resolved, in every task
    probes = load_probe_set(spec["probe_set"]).head(spec["limit"])
    return ctx, SweepPlan(base, tuple(spec["rates"]), tuple(spec["seeds"]), probes, ctx.llm.model_name)


@task(
    name="mutate-and-score",
    version=f"{operator_versions(['mutation'])} {scorer_versions(DEFAULT_SCORERS)}",
    **retry_options(task_retries()),  # transient, non-model failures only (docs/prefect.md#retries)
)
def mutate_and_score(key: str, home: str | None, spec: dict[str, Any], index: int) -> IndividualRecord:
    """One cell of the grid (``furnace.evolution.sweep.sweep_cell``); a cell with a failure is raised
    as :class:`Unscored` (recorded by the flow, never cached)."""
    from furnace.evolution.sweep import sweep_cell

    ctx, plan = _plan(home, spec)
    record = sweep_cell(plan, index, breeder=ctx.fusion_breeder(), llm=ctx.llm)
    if record.failures:
        raise Unscored(record, record.failure_reasons)
    return record


@task(name="record-sweep", version=f"furnace:{furnace_version()}", **retry_options(task_retries()))
def record(
    key: str, home: str | None, spec: dict[str, Any], records: list[IndividualRecord], track: bool
) -> list[dict[str, Any]]:
    """Store the sweep in the live store and log it to MLflow (``furnace.evolution.sweep.record_sweep``)."""
    from furnace.evolution.sweep import record_sweep

    ctx, plan = _plan(home, spec)
    tracker = ctx.new_tracker(track=track)  # logged with the experiments (tag furnace.kind)
    return record_sweep(plan, records, ctx.results, llm=ctx.llm, tracker=tracker)


@flow(name="furnace-mutation-sweep", task_runner=ThreadPoolTaskRunner(max_workers=4))  # type: ignore[arg-type]
def mutation_sweep(
    base_id: str,
    rates: list[float],
    seeds: list[int],
    probe_set: str = "writing-en",
    limit: int = 3,
    home: str | None = None,
    track: bool = True,
) -> list[dict[str, Any]]:
    """Every (rate, seed) variant of ``base_id`` (its latest version) and the base itself, scored and
    stored; rows fittest first."""
    from dataclasses import asdict

    from furnace.fusion.operators.prompts import answer_versions

    spec = {
        "base_id": base_id,
        "version": runtime(home).store.get_elixir(base_id).version,  # resolved once: every task reads it
        "rates": rates,
        "seeds": seeds,
        "probe_set": probe_set,
        "limit": limit,
    }
    ctx, plan = _plan(home, spec)
    cached = cache_options(results_dir(home))
    cell = mutate_and_score.with_options(**cached)
    sweep = task_key("sweep", id=plan.sweep_id, answers=answer_versions(ctx.llm))
    futures = [cell.submit(f"{sweep}-{i}", home, spec, i) for i in range(len(plan.cells()))]
    for future in futures:
        future.wait()
    records: list[IndividualRecord] = [outcome(f.state) for f in futures]
    where = ctx.settings.tracking_uri if track else None
    key = task_key("sweep-record", records=[asdict(r) for r in records], tracking_uri=where)
    return record.with_options(**cached)(key, home, spec, records, track)
