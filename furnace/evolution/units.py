"""Running the units of an experiment (one unit = one individual: fuse, answer probes, score).

A runner starts one unit at a time (``submit``) and returns a future; the evolution loop
submits a unit as soon as its plan is known, so units of consecutive generations overlap
(see ``furnace/evolution/engine.py``). The default runner is a thread pool inside the
process. The Prefect flows pass a runner that submits each unit as a task (see
``flows/evolution.py``), so the same loop runs on Prefect's task runners (threads or Dask).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from furnace.domain.threads import Executor, Future, pool


@dataclass(frozen=True)
class Unit:
    """One unit of work: ``key`` is its content key (experiment, generation, slot, what to make,
    operator/scorer versions); ``run()`` returns the individual's record in this process, and
    ``args`` are the picklable inputs of ``Evolution.evaluate_unit`` for runners in other workers.
    ``order`` is its place in the run (seeds first, then children in plan order). ``retry``: a
    previous run left a failure in its slot, so a runner with a result cache must run it again."""

    key: str
    slot: int
    run: Callable[[], Any]
    args: tuple[Any, ...] = ()  # plain data (generation, plan, population, known) for remote runners
    order: int = 0
    retry: bool = False  # its slot holds a failed (unscored) or stale record: never serve it from a task cache


class UnitFuture(Protocol):
    """What ``submit`` returns (``concurrent.futures.Future`` and Prefect's futures fit)."""

    def result(self) -> Any: ...

    def add_done_callback(self, fn: Callable[[Any], None]) -> None: ...


class UnitRunner(Protocol):
    """Starts one unit and returns its future; ``close()`` ends the runner (not-started units dropped).

    A runner with a result cache of its own may set ``replays_finished = True``: a resumed run then
    submits the units a previous run finished too (their ``run`` returns the stored record without a
    model call), so that cache serves them and the run reads as cached there (the Prefect flow)."""

    def submit(self, unit: Unit) -> UnitFuture: ...

    def close(self) -> None: ...


class ThreadUnitRunner:
    """A bounded thread pool (the model concurrency itself is bounded by the metered LLM)."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._pool: Executor | None = None
        self._pending: set[Future[Any]] = set()  # submitted and not done (each removes itself when done)

    def submit(self, unit: Unit) -> UnitFuture:
        if self._pool is None:
            self._pool = pool(self.workers, name="furnace-unit")
        future = self._pool.submit(unit.run)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)  # O(1) per unit, whatever the population
        return future

    def close(self) -> None:
        """Drop the units not started and wait for the running ones; when every unit has finished
        (a run that ended normally) the idle threads exit on their own, without a join on the caller's wall."""
        if self._pool is not None:
            self._pool.shutdown(wait=bool(self._pending), cancel_futures=True)
            self._pool, self._pending = None, set()


@dataclass(frozen=True)
class Settled:
    """A unit under way will ask at most ``calls`` model calls in all (fewer than it reserved), of which
    at most ``more`` from now on."""

    order: int
    calls: int
    more: int


class Finished:
    """Collects units as they finish, from whatever thread finishes them, and what units under way tell
    of their calls (:meth:`settled`); ``get()`` blocks for the next of either."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Unit, UnitFuture] | Settled] = queue.SimpleQueue()
        self.pending = 0

    def watch(self, unit: Unit, future: UnitFuture) -> None:
        self.pending += 1
        future.add_done_callback(lambda fut: self._queue.put((unit, fut)))

    def settled(self, order: int, calls: int, more: int) -> None:
        """(From a unit's thread.) Unit ``order`` will ask at most ``calls`` model calls in all, ``more`` of
        them from now on."""
        self._queue.put(Settled(order, calls, more))

    def get(self) -> tuple[Unit, UnitFuture] | Settled:
        item = self._queue.get()
        if not isinstance(item, Settled):
            self.pending -= 1
        return item
