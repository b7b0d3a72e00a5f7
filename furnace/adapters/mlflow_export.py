"""MLflow's background trace export, made to wait instead of dropping a trace.

Ended spans pass two bounded buffers on their way to the store: OpenTelemetry's batch processor
(2048 spans; a full one drops the span) hands batches of up to 5 spans to MLflow's export queue
(``MLFLOW_ASYNC_TRACE_LOGGING_MAX_QUEUE_SIZE``, 1000 tasks: a span batch or a finished trace each),
which one writer empties into the store. A full export queue drops the task and logs "Trace export
queue is full, trace will be discarded" at most once every 30 s, so a run whose units end spans faster
than the store writes them (populations of 16 and 64 on a SQLite home) lost traces with one warning
line. :func:`install` changes both:

- the export queue MLflow's exporter builds is :class:`WaitingExportQueue`, whose ``put`` waits for
  room instead of dropping (back-pressure on whoever hands it a batch);
- the batch processor's buffer holds :data:`SPAN_BUFFER` spans, so the spans that end while the
  export queue waits are kept, not dropped.

Span batches keep MLflow's size (5 spans, ``MLFLOW_ASYNC_TRACE_LOGGING_MAX_SPAN_BATCH_SIZE``): a
bigger batch is fewer writes and less CPU (the writer's CPU goes mostly to each write's fixed cost;
bench/bench_tracing.py measures it), but a killed run then loses more of its last spans, which
resuming relies on (the spans of the traces it left open).

:data:`stats` counts the tasks queued and the hand-overs that had to wait (the bench and tests read
it). Call :func:`install` before the first trace (the tracker does, at import).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from furnace import offline_env

offline_env.apply()

from mlflow.tracing.export import mlflow_v3  # noqa: E402
from mlflow.tracing.export.async_export_queue import AsyncTraceExportQueue, Task  # noqa: E402
from mlflow.tracing.processor import base_mlflow  # noqa: E402


@dataclass
class ExportStats:
    """What went through the export queues of this process."""

    queued: int = 0  # tasks put on a queue (each is written by the background writer)
    waited: int = 0  # puts that found the queue full and waited for room (MLflow would have dropped them)
    inline: int = 0  # tasks run at once in the caller (the queue flushing or stopped: MLflow's own rule)


SPAN_BUFFER = 100_000  # ended spans the batch processor may hold while the export queue waits
stats = ExportStats()
_stats_lock = threading.Lock()


class WaitingExportQueue(AsyncTraceExportQueue):  # type: ignore[misc]
    """MLflow's export queue whose ``put`` waits while the queue is full (MLflow's drops the task).

    The wait holds the queue's lock, as MLflow's ``put`` does, so a flush cannot stop the consumer
    under a waiting producer: the consumer keeps draining until the task is in, then the flush runs."""

    def put(self, task: Task) -> None:
        with self._lock:
            if not self.is_active() and not self._stop_event.is_set():
                self.activate()
            if self.is_active():
                waited = self._queue.full()
                self._queue.put(task, block=True)
                with _stats_lock:
                    stats.queued += 1
                    stats.waited += int(waited)
                return
        with _stats_lock:
            stats.inline += 1
        task.handle()  # flushing or terminated: written in the caller, as MLflow does


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Make MLflow's trace exporter (built on the first trace, and again when the tracking URI
    changes) use :class:`WaitingExportQueue`, behind a batch processor holding :data:`SPAN_BUFFER`
    spans. Idempotent."""
    global _installed
    with _install_lock:
        if not _installed:
            mlflow_v3.AsyncTraceExportQueue = WaitingExportQueue  # type: ignore[misc]
            base_mlflow._DEFAULT_OTEL_MAX_QUEUE_SIZE = SPAN_BUFFER
            _installed = True
