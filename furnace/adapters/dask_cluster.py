"""The Dask cluster behind ``--runner dask``: worker processes here, or an existing scheduler.

- **No address**: a ``LocalCluster`` of worker *processes* (``workers``, default 2) with the
  scheduler, the workers and the dashboard bound to 127.0.0.1 only; the dashboard URL is
  announced. It is furnace's: closed when the run ends and on SIGINT (the block unwinds). When
  furnace dies otherwise (SIGTERM, SIGKILL), the scheduler goes with it (it runs in furnace's
  process) and each worker process goes too: on Linux the kernel kills it (``PR_SET_PDEATHSIG``
  with SIGKILL, which no handler in the worker and no task holding the interpreter can delay);
  elsewhere a watcher thread polls the parent's pid, besides Dask's own parent-alive pipe.
- **An address** (``--dask-address tcp://host:8786`` or ``FURNACE_DASK_ADDRESS``): furnace
  connects as a client and leaves the cluster running when it is done.

Units run there through :mod:`furnace.evolution.isolated`: workers never open the store. This module
imports it only when a unit is shipped: a worker process imports this module (for its plugin) at start, and
the evolution stack only when it receives its first unit.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import WorkerPlugin

from furnace.adapters.processes import die_with_parent, watch_parent
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import Future

if TYPE_CHECKING:
    from furnace.evolution.isolated import IsolatedUnitRunner, Job, Sink, World

log = logging.getLogger(__name__)
CLOSE_S = 15.0  # how long stopping the local cluster may take (its workers die with furnace anyway)


class _DieWithParent(WorkerPlugin):
    """A worker plugin (run in each worker process at start) binding the worker to furnace."""

    name = "furnace-die-with-parent"

    def __init__(self, parent: int) -> None:
        self.parent = parent

    def setup(self, worker: Any) -> None:
        if os.getppid() != self.parent:
            return  # a worker of a cluster furnace did not start
        # the signal binds the process only from its main thread (the worker's event loop runs there)
        on_main = threading.current_thread() is threading.main_thread()
        if not (on_main and die_with_parent(self.parent, signal.SIGKILL)):
            watch_parent(self.parent)


@contextlib.contextmanager
def dask_client(
    address: str | None = None,
    *,
    workers: int = 2,
    threads: int = 2,
    on_status: Callable[[str], None] = lambda _: None,
) -> Iterator[Any]:
    """A ``distributed.Client`` on the scheduler at ``address``, else on a local cluster of ``workers``
    processes (``threads`` each) on 127.0.0.1, closed when the block ends."""
    from distributed import Client, LocalCluster

    if address:
        client = Client(address, timeout="30s")
        try:
            on_status(f"dask: connected to {address} ({len(client.scheduler_info()['workers'])} workers)")
            yield client
        finally:
            client.close()
        return
    scratch = tempfile.mkdtemp(prefix="furnace-dask-")  # this cluster's own spill folder, removed after
    cluster = LocalCluster(
        n_workers=max(1, workers),
        threads_per_worker=max(1, threads),
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # loopback only, any free port
        worker_dashboard_address="127.0.0.1:0",
        silence_logs=logging.ERROR,
        local_directory=scratch,
    )
    try:
        client = Client(cluster)
        try:
            client.register_plugin(_DieWithParent(os.getpid()), name=_DieWithParent.name)
            pids = sorted(client.run(os.getpid).values())
            on_status(
                f"dask: {len(pids)} worker processes (pids {', '.join(map(str, pids))}) on 127.0.0.1, "
                f"dashboard {cluster.dashboard_link} — stopped with this run"
            )
            yield client
        finally:
            _bounded(client.close, "client")
    finally:
        _bounded(cluster.close, "cluster")
        shutil.rmtree(scratch, ignore_errors=True)


def _bounded(close: Callable[..., Any], what: str) -> None:
    """``close(timeout=CLOSE_S)``: a stop (Ctrl-C included) never waits longer on the local cluster; what did
    not close in time is logged (its worker processes end with furnace: parent-death signal)."""
    try:
        close(timeout=CLOSE_S)
    except Exception as err:  # noqa: BLE001 - stopping goes on; say what was left
        log.warning("the local dask %s did not close within %.0f s: %s", what, CLOSE_S, err)


def worker_count(client: Any) -> int:
    """How many workers the client's cluster has now."""
    return max(1, len(client.scheduler_info().get("workers", {})))


def slots_per_worker(concurrency: int, workers: int) -> int:
    """Model calls in flight per worker so the whole cluster keeps about ``concurrency``."""
    return max(1, math.ceil(concurrency / max(1, workers)))


class Placement(Guarded):
    """Where a unit runs: on the worker with the fewest units in flight, so every worker's model slots
    have calls waiting; but a unit with the same affinity as a unit in flight (``Job.affinity``: they
    can ask the same questions) goes to that unit's worker, where its caches and single-flight serve the
    repeat (a unit sent later receives the sub-results with its job). Workers by name (a worker its
    nanny restarted keeps its name); strict on the cluster furnace owns, a preference on a cluster
    given by address (a worker there may leave for good). ``place`` picks, ``done`` says it finished."""

    def __init__(self, client: Any) -> None:
        found = client.scheduler_info().get("workers", {})
        self.workers = sorted((w.get("name", a) for a, w in found.items()), key=str)
        self.strict = getattr(client, "cluster", None) is not None
        self._load = dict.fromkeys(self.workers, 0)  # units in flight per worker
        self._held: dict[str, tuple[Any, int]] = {}  # affinity -> (worker, its units in flight)

    @serialized
    def place(self, job: Job) -> dict[str, Any]:
        """``workers`` and ``allow_other_workers`` for ``job`` (``client.submit`` / ``dask.annotate``),
        counted in flight until :meth:`done`."""
        if not self.workers:
            return {}
        held = self._held.get(job.affinity)
        worker = held[0] if held else min(self.workers, key=self._load.__getitem__)
        self._held[job.affinity] = (worker, (held[1] if held else 0) + 1)
        self._load[worker] += 1
        return {"workers": [worker], "allow_other_workers": not self.strict}

    @serialized
    def done(self, job: Job, worker: Any) -> None:
        """``job``, placed on ``worker``, is no longer in flight."""
        self._load[worker] -= 1
        _, count = self._held[job.affinity]
        if count > 1:
            self._held[job.affinity] = (worker, count - 1)
        else:
            del self._held[job.affinity]


class _Submitter(Guarded):
    """Ships jobs to the cluster: the world once to every worker, then one task per unit (older
    units first, placed by :class:`Placement`). A unit's outcome is fetched as soon as it is done,
    by Dask's callback thread, so the driver's loop finds it here when it gets to it (not a round
    trip to the worker then); ``close`` cancels what has not run."""

    def __init__(self, client: Any, world: World) -> None:
        self.client = client
        self.world = client.scatter(world, broadcast=True, hash=False)
        self.placement = Placement(client)
        # outcomes straight from the worker on furnace's own cluster (not relayed by the scheduler); a
        # cluster given by address may have workers this process cannot reach
        self.direct = getattr(client, "cluster", None) is not None
        self.running: set[Any] = set()

    def __call__(self, job: Job, order: int) -> Future[Any]:
        from furnace.evolution.isolated import run_job

        key = f"furnace-unit-{job.key[:16]}-{uuid.uuid4().hex[:8]}"
        where = self.placement.place(job)
        remote = self.client.submit(run_job, self.world, job, pure=False, priority=-order, key=key, **where)
        fetched: Future[Any] = Future()
        self._track(remote)

        def fetch(done: Any) -> None:
            self._untrack(done)
            if where:
                self.placement.done(job, where["workers"][0])
            try:
                fetched.set_result(self.client.gather(done, direct=self.direct))
            except BaseException as err:  # noqa: BLE001 - the loop raises it when it takes the unit
                fetched.set_exception(err)

        remote.add_done_callback(fetch)
        return fetched

    @serialized
    def _track(self, remote: Any) -> None:
        self.running.add(remote)

    @serialized
    def _untrack(self, remote: Any) -> None:
        self.running.discard(remote)

    @serialized
    def _take_running(self) -> list[Any]:
        pending, self.running = list(self.running), set()
        return pending

    def close(self) -> None:
        pending = self._take_running()
        if pending:
            self.client.cancel(pending)


def dask_runner(client: Any, world: World, sink: Sink) -> IsolatedUnitRunner:
    """A unit runner that runs each unit on ``client``'s cluster (see :mod:`furnace.evolution.isolated`)."""
    from furnace.evolution.isolated import IsolatedUnitRunner

    submitter = _Submitter(client, world)
    return IsolatedUnitRunner(submitter, sink, close=submitter.close)
