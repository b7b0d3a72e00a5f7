"""The evolution experiment as a Prefect flow: one task per individual (fuse + probes + score).

``furnace experiment run FILE --prefect [--runner dask]`` runs it; ``furnace serve FILE --cron``
serves it as a deployment on a schedule (against ``prefect server start``); ``flows/prefect.yaml``
deploys it to a work pool. The loop itself is ``furnace.evolution.engine.Evolution``; this module
swaps its unit runner for Prefect tasks and publishes artifacts (:mod:`.artifacts`).

What Prefect shows (docs/prefect.md): each unit is a task run named ``g<generation>/s<slot> <operator>``
and tagged ``generation-<n>``, drawn after the task runs that made its parents (the lineage, not the
whole population); its cache key is the unit's content key, so a rerun is served from Prefect's cache
(``Cached`` states) and runs nothing; transient failures retry under Prefect's retry settings.
"""

from __future__ import annotations

import logging  # noqa: E402
import sys  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from functools import lru_cache, partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from prefect import flow, task  # noqa: E402

from furnace.evolution.engine import unit_label
from furnace.evolution.isolated import IsolatedUnitRunner, Job, Outcome, Sink, World, run_job
from furnace.evolution.units import Unit  # noqa: E402
from furnace.runtime import dask_cluster
from furnace.views.experiments import PREFECT_FLOW_RUN_TAG

from . import artifacts
from ._common import cache_options, resolve, results_dir, retry_options, runtime, task_retries, unit_version


def _unit_cache_key(_context: Any, parameters: dict[str, Any]) -> str:
    return f"furnace-unit-{parameters['key']}"


class Opaque:
    """A task input Prefect does not look into. Prefect draws an edge from every earlier task run whose
    result appears in a task's inputs; a unit carries its whole population (earlier results), which drew
    an all-to-all tangle. The edges are given explicitly instead (``wait_for``: the parents' task runs)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def evaluate_individual(key: str, unit: Opaque) -> Any:
    """One individual: fuse (through the caches), answer every probe, score. Returns its record.
    Cached on ``key``, the unit's content key (:meth:`furnace.evolution.engine.Evolution.unit_key`): the
    experiment id (a hash of the config, the model, the judge, the seed elixirs' content and the probe
    set), the generation and slot the record belongs to, the operator and its version, its params and
    seed, the parents (id and lineage hash) or the seed elixir's content hash, and the scorers with their
    versions. A changed operator, model, judge or input makes a new key; an unchanged unit is served."""
    return unit.value.run()


def _evaluation_options(version: str, results: str, retries: int) -> dict[str, Any]:
    """The per-individual task's options: versioned by the operator and scorer versions it runs,
    cached on the unit's content key, its results persisted under this home only, retried after a
    transient failure (:func:`furnace_flows._common.transient_failure`)."""
    return {
        "name": "evaluate-individual",
        "version": version,
        **cache_options(results, _unit_cache_key),
        **retry_options(retries),
    }


@lru_cache(maxsize=32)
def evaluation_task(version: str, results: str, retries: int) -> Any:
    """The per-individual task (see :func:`_evaluation_options`)."""
    return task(**_evaluation_options(version, results, retries))(evaluate_individual)


def unit_run_name(generation: int, slot: int, operator: str) -> str:
    """The task run's name: the unit as the call ledger names it, and how it was made (``g2/s3 crossover``)."""
    return f"{unit_label(generation, slot)} {operator}"


def _unit_plan(unit: Unit) -> tuple[int, Any]:
    """(generation, plan) of a unit (``Evolution.unit`` puts them first in ``args``)."""
    generation, plan = unit.args[0], unit.args[1]
    return int(generation), plan


class PrefectUnitRunner:
    """Submits each unit as a Prefect task: named by generation, slot and operator, tagged with its
    generation, drawn after its parents' task runs, cached on the unit's content key. A resumed run
    submits the finished units too (``replays_finished``): Prefect serves them from its cache."""

    replays_finished = True

    def __init__(self, version: str, results: str, retries: int = 0) -> None:
        self.task = evaluation_task(version, results, retries)
        self._made: dict[str, Any] = {}  # agent id -> the future of the task run that made it

    def submit(self, unit: Unit) -> Any:
        generation, plan = _unit_plan(unit)
        parents = [self._made[p.agent_id] for p in plan.parents if p.agent_id in self._made]
        future = self.options(unit).submit(unit.key, Opaque(unit), wait_for=parents)
        future.add_done_callback(self._note)
        return future

    def _note(self, future: Any) -> None:
        """Remember which task run made which agent (its children's edges point to it)."""
        try:
            record = future.result(raise_on_failure=False)
        except Exception:  # noqa: BLE001 - a failed unit makes no parent; the engine reports its error
            return
        agent_id = getattr(record, "agent_id", None)
        if agent_id:
            self._made.setdefault(agent_id, future)

    def options(self, unit: Unit) -> Any:
        """The task for ``unit``: named and tagged by generation; a retried unit (a failure in its slot)
        runs again and refreshes the cached result instead of being served the failure."""
        generation, plan = _unit_plan(unit)
        return self.task.with_options(
            task_run_name=unit_run_name(generation, unit.slot, plan.operator),
            tags=[f"generation-{generation}"],
            refresh_cache=unit.retry,
        )

    def close(self) -> None:
        """Prefect's task runner ends with the flow."""


def evaluate_isolated(key: str, world: World, job: Job) -> Outcome:
    """The same unit on a Dask worker (``--runner dask``): run with memory-only collaborators, its
    record, call-ledger rows and cache entries returned for the flow to write (the worker never
    opens the store; :mod:`furnace.evolution.isolated`). Cached on ``key`` like the local task."""
    return run_job(world, job)


@lru_cache(maxsize=32)
def isolated_task(version: str, results: str, retries: int) -> Any:
    """The per-individual task for Dask workers (see :func:`_evaluation_options`)."""
    return task(**_evaluation_options(version, results, retries))(evaluate_isolated)


class _PrefectSubmit:
    """Submits a unit's job as a Prefect task (on the flow's Dask task runner)."""

    def __init__(self, version: str, results: str, world: World, retries: int = 0) -> None:
        from distributed import default_client

        self.task, self.world = isolated_task(version, results, retries), world
        self.placement = dask_cluster().Placement(default_client())  # the cluster evolution_flow connected to

    def __call__(self, job: Job, order: int) -> Any:
        import dask

        generation, plan = int(job.args[0]), job.args[1]
        # a retried unit (a failure in its slot) runs again and refreshes the cached result
        task = self.task.with_options(
            task_run_name=unit_run_name(generation, plan.slot, plan.operator),
            tags=[f"generation-{generation}"],
            refresh_cache=job.retry,
        )
        where = self.placement.place(job)
        with dask.annotate(priority=-order, **where):
            future = task.submit(job.key, self.world, job)
        if where:
            future.add_done_callback(lambda _: self.placement.done(job, where["workers"][0]))
        return future


def _dask_units(version: str, results: str, retries: int, world: World, sink: Sink) -> IsolatedUnitRunner:
    return IsolatedUnitRunner(_PrefectSubmit(version, results, world, retries), sink)


def _task_runner(runner: str, concurrency: int, address: str | None = None) -> Any:
    if runner == "dask":
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=address)  # the cluster evolution_flow started (or was given)
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=max(2, concurrency * 2))


def _log_warning(message: str) -> None:
    """A warning in the flow run's log (the Prefect UI shows it), or furnace's log outside a flow run."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        get_run_logger().warning(message)
    except MissingContextError:
        logging.getLogger("furnace_flows").warning(message)


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
    dask_workers: int = 1,
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
    bar = ProgressBar(enabled=show)

    def progress(event: Any) -> None:
        if event.message:  # a notice (pairs waiting for people's picks): in the flow run's log too
            _log_warning(event.message)
        bar(event)

    rt = runtime(home)  # one runtime for the run: the stores, the sink and the writer share its connections
    prepared = rt.prepare_experiment(
        config, progress=progress, track=track, probes_dir=probes_dir, keep_failures=keep_failures
    )
    fork = prepared.check_fork()
    if prepared.judge_warning:
        _log_warning(prepared.judge_warning)
    if show:
        if fork:
            print(fork, file=sys.stderr)
        if prepared.judge_warning:
            print(prepared.judge_warning, file=sys.stderr)
        print(prepared.estimate_line(), file=sys.stderr)
    prepared.check_budget(yes=yes)
    flow_run_id = _flow_run_id()
    if flow_run_id:  # the app links the experiment's MLflow run to this flow run (FURNACE_PREFECT_UI_URL)
        prepared.evolution.run_tags[PREFECT_FLOW_RUN_TAG] = flow_run_id
    version, results, retries = unit_version(config), results_dir(home), task_retries()
    if runner == "dask":
        slots = dask_cluster().slots_per_worker(config.concurrency, dask_workers)
        make = partial(_dask_units, version, results, retries)
        prepared.evolution.unit_runner = rt.isolated_runner(prepared, make, slots=slots)
    else:
        prepared.evolution.unit_runner = PrefectUnitRunner(version, results, retries)
    prepared.evolution.on_generation = partial(artifacts.publish_generation, generations=config.generations)
    report = prepared.evolution.run()
    data = report.as_dict()
    artifacts.publish_report(data, mlflow_link=_mlflow_link(home, report.experiment_id) if track else None)
    return {**data, "text": render_report(report), "prefect_flow_run_id": flow_run_id}


def _mlflow_link(home: str | None, experiment_id: str) -> str | None:
    """The experiment's MLflow run in ``mlflow ui`` (FURNACE_MLFLOW_UI_URL, else its default address)."""
    from furnace.adapters.mlflow_tracker import run_summary
    from furnace.views.experiments import run_links

    settings = runtime(home).settings
    summary = run_summary(settings.tracking_uri, experiment_id)
    ui = settings.mlflow_ui_url or artifacts.DEFAULT_MLFLOW_UI
    return run_links(summary, mlflow_ui=ui, prefect_ui=None).get("MLflow run")


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
    dask_workers: int = 1,
) -> dict[str, Any]:
    """Run (or resume) the evolution experiment in ``file`` (``dask_workers``: the workers of the
    Dask cluster the flow's task runner is on, for ``runner="dask"``)."""
    return run_evolution(
        file,
        home=home,
        yes=yes,
        track=track,
        runner=runner,
        show=show,
        reseed=reseed,
        keep_failures=keep_failures,
        dask_workers=dask_workers,
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
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Run the flow with the chosen task runner: ``threads``, or ``dask`` (Prefect's Dask task runner on
    a local cluster of worker processes bound to 127.0.0.1 and stopped with the flow, or on the
    scheduler at ``dask_address`` / ``FURNACE_DASK_ADDRESS``)."""
    from furnace.evolution.config import load_config

    concurrency = load_config(file).concurrency
    options: dict[str, Any] = {
        "home": home,
        "yes": yes,
        "track": track,
        "runner": runner,
        "show": show,
        "keep_failures": keep_failures,
    }
    if runner != "dask":
        configured = evolution.with_options(task_runner=_task_runner(runner, concurrency))
        return configured(resolve(file), **options)
    cluster = dask_cluster()  # the dask extra (a clear error without it)
    settings = runtime(home).settings
    workers = settings.dask_workers
    threads = 2 * cluster.slots_per_worker(concurrency, workers)
    on_status = (lambda line: print(line, file=sys.stderr)) if show else (lambda _line: None)
    with cluster.dask_client(
        dask_address or settings.dask_address, workers=workers, threads=threads, on_status=on_status
    ) as client:
        configured = evolution.with_options(task_runner=_task_runner(runner, concurrency, client.scheduler.address))
        return configured(resolve(file), **options, dask_workers=cluster.worker_count(client))


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
