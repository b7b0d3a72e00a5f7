"""A background writer: records are saved in batches while the next units run.

Group commit: a statement costs about the same CPU for one row as for fifty, and the writer's CPU
competes with the units' (one GIL, a few cores), so the writer gathers what the units finish over
``window_s`` (or until a generation is complete, or ``flush()``) and saves it as one unit of work:
one transaction, one statement per table. Measured on SQLite against one transaction per individual
written on the main thread (docs/benchmarks.md, 2026-12-06 14:21): the batches save 0.4-0.8 ms of
CPU per model call and 9-10 statements per individual, and keep the main thread from waiting.
A unit's slot never waits for its record (the loop takes a finished child in at once); its record
is committed at the end of its batch. A process killed before that loses at most ``window_s`` of finished units, which
the next run makes again (their model calls served by the response cache).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from furnace.domain.threads import background

if TYPE_CHECKING:
    from furnace.domain.agent import Agent
    from furnace.storage.protocols import ElixirStore, ExperimentResults


@dataclass(frozen=True)
class Replacement:
    """An individual that replaces what is recorded at its slot (a rerun's new evaluation)."""

    record: Any


@dataclass(frozen=True)
class Deferred:
    """Other writes that belong with the records after them (what a unit run in another process
    made: its cache entries), done in the same unit of work, in order among themselves and before
    the records put after them. They do not split the batch's individuals: consecutive units'
    records are still saved in one statement."""

    write: Callable[[], None]


@dataclass(frozen=True)
class NewAgent:
    """An agent bred in this run (``furnace.evolution.runstore``), saved to ``store`` before the
    records put after it. The agents of one batch are saved first, together (``save_agents``):
    they depend on nothing the batch writes."""

    store: ElixirStore
    agent: Agent


# How long a batch gathers finished units (a finished generation or flush() ends it early). On the
# evolution bench a batch costs ~16 ms of CPU whatever its size and a unit's rows ~1.6 ms: a longer
# window saves batches but leaves more to write when the run ends (its last batch is on its wall).
WINDOW_S = 0.25
_FLUSH = object()  # ends the batch being gathered
_STOP = object()  # ends the thread (put by close() once everything is written)


class RecordWriter:
    """Saves records (individuals and generations, in the order put) on one background thread.
    A batch is what is put within ``window_s`` of its first item, up to a generation record (see
    the module docstring): one unit of work (one transaction), its new agents saved together and
    consecutive individuals in one ``save_individuals`` call.
    ``flush()`` waits until everything put so far is written and re-raises a write error."""

    def __init__(self, results: ExperimentResults, *, window_s: float = WINDOW_S) -> None:
        self.results = results
        self.window_s = window_s
        self._queue: queue.Queue[Any] = queue.Queue()
        self._error: BaseException | None = None
        self._join: Callable[[], None] | None = None  # joins the writer thread, while there is one

    def put(self, record: Any) -> None:
        if self._join is None:
            self._join = background(self._loop, name="furnace-writer").join
        self._queue.put(record)

    def _loop(self) -> None:
        from furnace.evolution.records import GenerationRecord

        while True:
            taken = [self._queue.get()]
            if taken[0] is _STOP:
                self._queue.task_done()
                return
            deadline = time.monotonic() + self.window_s
            closed = taken[0] is _FLUSH or isinstance(taken[0], GenerationRecord)
            while not closed and (wait := deadline - time.monotonic()) > 0:
                try:
                    taken.append(self._queue.get(timeout=wait))
                except queue.Empty:
                    break
                closed = taken[-1] is _FLUSH or isinstance(taken[-1], GenerationRecord)
            while True:  # and whatever else is already queued
                try:
                    taken.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            batch = [item for item in taken if item is not _FLUSH]
            try:
                if batch and self._error is None:
                    self._save(batch)
            except BaseException as err:  # surfaced by flush()
                self._error = err
            finally:
                for _ in taken:
                    self._queue.task_done()

    def _save(self, batch: list[Any]) -> None:
        """One unit of work per batch: consecutive individuals go in one call, a generation record
        after them; a finished generation asks for a fresh analysis snapshot."""
        from furnace.storage.store import snapshot_soon, unit_of_work

        agents = [item for item in batch if isinstance(item, NewAgent)]
        stores = list({id(a.store): a.store for a in agents}.values())
        with unit_of_work(self.results, *stores):
            for store in stores:
                store.save_agents([a.agent for a in agents if a.store is store])
            self._save_in_unit([item for item in batch if not isinstance(item, NewAgent)])
        if any(type(item).__name__ == "GenerationRecord" for item in batch):
            snapshot_soon(self.results)

    def _save_in_unit(self, batch: list[Any]) -> None:
        from furnace.evolution.records import GenerationRecord

        run: list[Any] = []
        for item in [*batch, None]:
            if isinstance(item, Deferred):  # done now: before the records after it, in this unit of work
                item.write()
            elif item is None or isinstance(item, (GenerationRecord, Replacement)):
                if run:
                    self.results.save_individuals(run)
                    run = []
                if isinstance(item, Replacement):
                    self.results.replace_individual(item.record)
                elif item is not None:
                    self.results.save_generation(item)
            else:
                run.append(item)

    def close(self) -> None:
        """Flush, then end the thread (a long-lived process running many experiments keeps none behind;
        a later ``put`` starts a new one)."""
        self.flush()
        if self._join is not None:
            self._queue.put(_STOP)
            self._join()
            self._join = None

    def flush(self) -> None:
        """Save what is queued now (without waiting for the window) and block until it is saved."""
        if self._join is not None:
            self._queue.put(_FLUSH)
        self._queue.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
