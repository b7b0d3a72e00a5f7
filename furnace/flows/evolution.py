"""The evolution experiment as a Prefect flow: one task per individual (fuse + probes + score).

``furnace experiment run FILE --prefect [--runner dask]`` runs it; ``furnace serve FILE --cron``
serves it as a deployment on a schedule (against ``prefect server start``). The loop itself is
``furnace.evolution.engine.Evolution``; this module only swaps its unit runner for Prefect tasks.
"""

from __future__ import annotations

import sys  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from prefect import flow, task  # noqa: E402

from furnace.evolution.units import Unit  # noqa: E402
from furnace.flows._common import resolve, results_dir, runtime, unit_version
from furnace.views.experiments import PREFECT_FLOW_RUN_TAG


def _unit_cache_key(_context: Any, parameters: dict[str, Any]) -> str:
    return f"furnace-unit-{parameters['key']}"


def evaluate_individual(key: str, unit: Unit) -> Any:
    """One individual: fuse (through the caches), answer every probe, score. Returns its record.
    Cached on ``key`` (which includes the operator and scorer versions): a changed operator
    re-runs, an unchanged one does not."""
    return unit.run()


def _evaluation_options(version: str, results: str) -> dict[str, Any]:
    """The per-individual task's options: versioned by the operator and scorer versions it runs,
    cached on the unit's content key, its results persisted under this home only."""
    return {
        "name": "evaluate-individual",
        "version": version,
        "cache_key_fn": _unit_cache_key,
        "cache_expiration": timedelta(days=30),
        "persist_result": True,
        "result_storage": Path(results),
        "retries": 0,
    }


@lru_cache(maxsize=32)
def evaluation_task(version: str, results: str) -> Any:
    """The per-individual task (see :func:`_evaluation_options`)."""
    return task(**_evaluation_options(version, results))(evaluate_individual)


class PrefectUnitRunner:
    """Submits each unit as a Prefect task (named and versioned by content and versions)."""

    def __init__(self, version: str, results: str) -> None:
        self.task = evaluation_task(version, results)

    def submit(self, unit: Unit) -> Any:
        return self.options(unit).submit(unit.key, unit)

    def options(self, unit: Unit) -> Any:
        """The task for ``unit``: named by slot and key; a retried unit (a failure in its slot) runs
        again and refreshes the cached result instead of being served the failure."""
        return self.task.with_options(task_run_name=f"slot-{unit.slot}-{unit.key[:8]}", refresh_cache=unit.retry)

    def close(self) -> None:
        """Prefect's task runner ends with the flow."""


def evaluate_remote(file: str, home: str | None, key: str, args: tuple[Any, ...]) -> Any:
    """The same unit in a Dask worker: rebuild the experiment's collaborators there (once per
    worker process) from plain data, then evaluate. Budget and totals are per worker here."""
    return _worker_evolution(file, home).evaluate_unit(*args)


@lru_cache(maxsize=8)
def _worker_evolution(file: str, home: str | None) -> Any:
    from furnace.evolution.config import load_config

    return runtime(home).prepare_experiment(load_config(file), track=False).evolution


class DaskUnitRunner(PrefectUnitRunner):
    """Submits picklable unit inputs (no closures) so Dask can ship them to its workers."""

    def __init__(self, version: str, results: str, file: str, home: str | None) -> None:
        self.task = task(**_evaluation_options(version, results))(evaluate_remote)
        self.file, self.home = file, home

    def submit(self, unit: Unit) -> Any:
        return self.options(unit).submit(self.file, self.home, unit.key, unit.args)


def _task_runner(runner: str, concurrency: int) -> Any:
    if runner == "dask":
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(
            cluster_kwargs={
                "processes": False,
                "n_workers": 1,
                "threads_per_worker": max(2, concurrency),
                "dashboard_address": "127.0.0.1:0",  # loopback only, any free port
            }
        )
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=max(2, concurrency * 2))


def run_evolution(
    file: str,
    *,
    home: str | None = None,
    yes: bool = False,
    track: bool = True,
    runner: str = "threads",
    show: bool = False,
    reseed: bool = False,
    keep_failures: bool = False,
) -> dict[str, Any]:
    """The flow body: prepare the experiment as the CLI does (``show``: the estimate and the
    progress bar on stderr, as in a plain run), run it with Prefect tasks. ``reseed``: a
    scheduled run's seed comes from its scheduled start (:func:`seed_for_slot`).
    ``keep_failures``: a rerun keeps unscored individuals instead of evaluating them again."""
    from furnace.evolution.config import load_config
    from furnace.evolution.progress import ProgressBar
    from furnace.evolution.report import render_report

    config = load_config(file)
    if reseed:
        config = config.model_copy(update={"seed": seed_for_slot(_scheduled_start())})
    probes_dir = Path(file).resolve().parent.parent / "probes"
    prepared = runtime(home).prepare_experiment(
        config, progress=ProgressBar(enabled=show), track=track, probes_dir=probes_dir, keep_failures=keep_failures
    )
    if show:
        print(prepared.estimate_line(), file=sys.stderr)
    prepared.check_budget(yes=yes)
    flow_run_id = _flow_run_id()
    if flow_run_id:  # the app links the experiment's MLflow run to this flow run (FURNACE_PREFECT_UI_URL)
        prepared.evolution.run_tags[PREFECT_FLOW_RUN_TAG] = flow_run_id
    version, results = unit_version(config), results_dir(home)
    prepared.evolution.unit_runner = (
        DaskUnitRunner(version, results, file, home) if runner == "dask" else PrefectUnitRunner(version, results)
    )
    report = prepared.evolution.run()
    return {**report.as_dict(), "text": render_report(report)}


@flow(name="furnace-evolution", log_prints=False)
def evolution(
    file: str,
    home: str | None = None,
    yes: bool = False,
    track: bool = True,
    runner: str = "threads",
    show: bool = False,
    reseed: bool = False,
    keep_failures: bool = False,
) -> dict[str, Any]:
    """Run (or resume) the evolution experiment in ``file``."""
    return run_evolution(
        file, home=home, yes=yes, track=track, runner=runner, show=show, reseed=reseed, keep_failures=keep_failures
    )


def evolution_flow(
    file: str,
    *,
    home: str | None = None,
    yes: bool = False,
    track: bool = True,
    runner: str = "threads",
    show: bool = False,
    keep_failures: bool = False,
) -> dict[str, Any]:
    """Run the flow with the chosen task runner (``threads`` or ``dask``)."""
    from furnace.evolution.config import load_config

    concurrency = load_config(file).concurrency
    configured = evolution.with_options(task_runner=_task_runner(runner, concurrency))
    return configured(
        resolve(file), home=home, yes=yes, track=track, runner=runner, show=show, keep_failures=keep_failures
    )


def seed_for_slot(scheduled: datetime) -> int:
    """The seed of the scheduled run for ``scheduled`` (UTC, to the minute): each slot of a
    schedule is a new experiment (a new seed gives a new experiment id), and a retry of the
    same slot resumes it instead of starting over."""
    minute = scheduled.astimezone(UTC).replace(second=0, microsecond=0, tzinfo=None)
    return int(minute.strftime("%Y%m%d%H%M")) % 2**31


def _flow_run_id() -> str | None:
    """The id of the Prefect flow run this runs in (None outside one)."""
    from prefect.runtime import flow_run

    return str(flow_run.id) if flow_run.id else None


def _scheduled_start() -> datetime:
    from prefect.runtime import flow_run

    start = flow_run.scheduled_start_time
    return start if isinstance(start, datetime) else datetime.now(UTC)


def serve(file: str, *, home: str | None = None, cron: str = "0 3 * * *", name: str | None = None) -> None:
    """Serve the flow for ``file`` as a deployment on ``cron`` (needs a Prefect server): each
    scheduled run evolves a fresh seed (:func:`seed_for_slot`), so an unchanged file yields a new
    experiment per slot instead of finding the finished one and doing nothing."""
    from furnace.evolution.config import load_config

    config = load_config(file)
    evolution.serve(
        name=name or f"furnace-{config.name}",
        cron=cron,
        parameters={"file": resolve(file), "home": home, "yes": True, "track": True, "reseed": True},
    )
