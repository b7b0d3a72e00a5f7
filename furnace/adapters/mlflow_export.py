"""MLflow's background trace export, made to wait instead of dropping a trace.

Ended spans pass two bounded buffers on their way to the store: OpenTelemetry's batch processor
(2048 spans; a full one drops the span) hands batches of spans (MLflow: up to 5) to MLflow's export queue
(``MLFLOW_ASYNC_TRACE_LOGGING_MAX_QUEUE_SIZE``, 1000 tasks: a span batch or a finished trace each),
which one writer empties into the store. A full export queue drops the task and logs "Trace export
queue is full, trace will be discarded" at most once every 30 s, so a run whose units end spans faster
than the store writes them (populations of 16 and 64 on a SQLite home) lost traces with one warning
line. :func:`install` changes both:

- the export queue MLflow's exporter builds is :class:`WaitingExportQueue`, whose ``put`` waits for
  room instead of dropping (back-pressure on whoever hands it a batch);
- the batch processor's buffer holds :data:`SPAN_BUFFER` spans, so the spans that end while the
  export queue waits are kept, not dropped.

And its flush returns as soon as the queue is drained: MLflow's stops its consumer thread by setting an
event the thread reads between waits of up to 1 s for a task, so every flush of an idle queue (a tracked
run flushes several times) waited that second out; :class:`WaitingExportQueue` wakes the thread with an
empty task when the event is set.

Span batches are bigger than MLflow's 5 spans: the batch processor hands on :data:`SPAN_BATCH` spans
as one batch, one write (or, as MLflow does, what ended in the last 5 s if fewer did). The writer's CPU
goes mostly to each write's fixed cost (~12 ms on a SQLite home; a span adds ~1 ms: ``log_spans`` reads
and locks the batch's traces, queues rollups, recomputes token usage and cost, commits), so MLflow's
batches of 5 made span writes most of a tracked run's CPU (the demo experiment: ~260 writes, now ~53;
docs/benchmarks.md has the figures). Never more writes than MLflow's: at any rate of spans a batch is
at least as big as MLflow's would be. A killed run loses at most the last batch's spans (besides those
still in the export queue): 24, or the last 5 s's, where MLflow's lost 4 or the last 5 s's. A resume
ends the traces a killed run left open from the spans that reached the store; spans still flow while
traces are open (25 spans are a fraction of a second of a busy run), so an open trace's first spans are
in the store long before it ends. MLflow's environment variable sets another size
(``MLFLOW_ASYNC_TRACE_LOGGING_MAX_SPAN_BATCH_SIZE``), and furnace keeps it.

:data:`stats` counts the tasks queued and the hand-overs that had to wait (the bench and tests read
it). Call :func:`install` before the first trace (the tracker does, at import).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from furnace import offline_env
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import Once

offline_env.apply()

from mlflow.tracing.export import mlflow_v3  # noqa: E402
from mlflow.tracing.export.async_export_queue import AsyncTraceExportQueue, Task  # noqa: E402
from mlflow.tracing.processor import base_mlflow  # noqa: E402


@dataclass
class ExportStats(Guarded):
    """What went through the export queues of this process."""

    queued: int = 0  # tasks put on a queue (each is written by the background writer)
    waited: int = 0  # puts that found the queue full and waited for room (MLflow would have dropped them)
    inline: int = 0  # tasks run at once in the caller (the queue flushing or stopped: MLflow's own rule)

    @serialized
    def count(self, *, queued: int = 0, waited: int = 0, inline: int = 0) -> None:
        """Add to the counts (the export queues of every thread share them)."""
        self.queued += queued
        self.waited += waited
        self.inline += inline


SPAN_BUFFER = 100_000  # ended spans the batch processor may hold while the export queue waits
SPAN_BATCH = 25  # spans a batch (one write) carries at most
stats = ExportStats()


def _nothing() -> None:
    """The empty task that wakes the consumer thread."""


class _WakingEvent(threading.Event):
    """MLflow's stop event for its export queue, calling ``wake`` once it is set (a subclass, not a
    look-alike: whatever MLflow does with its event keeps working)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        super().__init__()
        self._wake = wake

    def set(self) -> None:
        super().set()
        self._wake()


class WaitingExportQueue(AsyncTraceExportQueue):  # type: ignore[misc]
    """MLflow's export queue whose ``put`` waits while the queue is full (MLflow's drops the task).

    The wait holds the queue's lock, as MLflow's ``put`` does, so a flush cannot stop the consumer
    under a waiting producer: the consumer keeps draining until the task is in, then the flush runs.
    Stopping the consumer (a flush) wakes it with an empty task instead of leaving it to its next
    1 s timeout."""

    def __init__(self) -> None:
        super().__init__()
        self._stop_event = _WakingEvent(self._wake_consumer)

    def _wake_consumer(self) -> None:
        with contextlib.suppress(queue.Full):  # a full queue: the consumer is not waiting for a task
            self._queue.put_nowait(Task(handler=_nothing, args=()))

    def put(self, task: Task) -> None:
        with self._lock:
            if not self.is_active() and not self._stop_event.is_set():
                self.activate()
            if self.is_active():
                waited = self._queue.full()
                self._queue.put(task, block=True)
                stats.count(queued=1, waited=int(waited))
                return
        stats.count(inline=1)
        task.handle()  # flushing or terminated: written in the caller, as MLflow does


def _install() -> None:
    os.environ.setdefault("MLFLOW_ASYNC_TRACE_LOGGING_MAX_SPAN_BATCH_SIZE", str(SPAN_BATCH))
    mlflow_v3.AsyncTraceExportQueue = WaitingExportQueue  # type: ignore[misc]
    base_mlflow._DEFAULT_OTEL_MAX_QUEUE_SIZE = SPAN_BUFFER


_installed = Once(_install)


def install() -> None:
    """Make MLflow's trace exporter (built on the first trace, and again when the tracking URI
    changes) use :class:`WaitingExportQueue`, behind a batch processor holding :data:`SPAN_BUFFER`
    spans and handing on batches of :data:`SPAN_BATCH` spans unless the environment sets MLflow's
    own size. Idempotent."""
    _installed.get()
