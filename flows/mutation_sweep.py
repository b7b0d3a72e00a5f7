"""Prefect flow: one base elixir × rates × seeds → variants, scored, stored like an experiment.

``furnace sweep BASE --prefect`` runs it. One task per cell (``furnace.evolution.sweep.sweep_cell``),
then one task records the sweep in DuckDB and MLflow (``record_sweep``), exactly as the in-process
``furnace sweep`` does.
"""

from __future__ import annotations

from typing import Any  # noqa: E402

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NONE  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from furnace.evolution.records import IndividualRecord  # noqa: E402
from furnace.evolution.sweep import DEFAULT_SCORERS, SweepPlan  # noqa: E402
from furnace.runtime import Runtime  # noqa: E402

from ._common import furnace_version, operator_versions, retry_options, runtime, scorer_versions, task_retries


def _plan(home: str | None, spec: dict[str, Any]) -> tuple[Runtime, SweepPlan]:
    """The runtime and the sweep of ``spec`` (plain data: base id and the version the flow resolved, rates,
    seeds, probe set and limit), rebuilt in each task."""
    from furnace.scoring.probes import load_probe_set

    ctx = runtime(home)
    base = ctx.store.get_elixir(spec["base_id"], spec["version"])  # the version the flow resolved, in every task
    probes = load_probe_set(spec["probe_set"]).head(spec["limit"])
    return ctx, SweepPlan(base, tuple(spec["rates"]), tuple(spec["seeds"]), probes, ctx.llm.model_name)


# Prefect does not cache these tasks (cache_policy=NONE, stated): furnace's own caches are
# content-addressed (synthesis by the parents' content hashes, responses by the full request),
# so a rerun makes no model call, and a failure in a cell is never served from a task cache.
@task(
    name="mutate-and-score",
    version=f"{operator_versions(['mutation'])} {scorer_versions(DEFAULT_SCORERS)}",
    cache_policy=NONE,
    **retry_options(task_retries()),  # transient, non-model failures only (docs/prefect.md#retries)
)
def mutate_and_score(home: str | None, spec: dict[str, Any], index: int) -> IndividualRecord:
    """One cell of the grid (``furnace.evolution.sweep.sweep_cell``)."""
    from furnace.evolution.sweep import sweep_cell

    ctx, plan = _plan(home, spec)
    return sweep_cell(plan, index, breeder=ctx.fusion_breeder(), llm=ctx.llm)


@task(name="record-sweep", version=f"furnace:{furnace_version()}", cache_policy=NONE, **retry_options(task_retries()))
def record(
    home: str | None, spec: dict[str, Any], records: list[IndividualRecord], track: bool
) -> list[dict[str, Any]]:
    """Store the sweep in DuckDB and log it to MLflow (``furnace.evolution.sweep.record_sweep``)."""
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
    version = runtime(home).store.get_elixir(base_id).version
    spec = {
        "base_id": base_id,
        "version": version,
        "rates": rates,
        "seeds": seeds,
        "probe_set": probe_set,
        "limit": limit,
    }
    futures = [mutate_and_score.submit(home, spec, i) for i in range(1 + len(rates) * len(seeds))]
    return record(home, spec, [f.result() for f in futures], track)
