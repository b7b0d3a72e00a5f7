"""Agents' answers traced to MLflow: every ``furnace agent answer`` and every ``furnace agent serve`` call.

Both faces answer through :func:`traced_answer` (:func:`furnace.fusion.answers.answer_as` with a
recorder in front of the model): each model call behind the answer is recorded as it happens (task,
message and answer summaries, tokens and cost by the ledger's accounting, model, latency, cached) and,
once the answer is ready, one trace is written in the MLflow experiment ``furnace-agents`` (no run): an
``AGENT`` root span ``answer <speaker>`` with one ``LLM`` span per call, at the times they happened.
The writing happens on one background thread, so a served response never waits for MLflow (nor for
MLflow's import, or the first setup of a new home's store). :meth:`AnswerTraces.close` waits for what
was handed over (the CLI before it exits, the server when it stops); a failed write is logged, never
raised to the caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from furnace.domain.errors import FurnaceError
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import Future, pool
from furnace.evolution.metering import completion_totals, error_totals
from furnace.fusion.answers import AgentAnswer, Speaker, answer_as, speaker_name
from furnace.llm.cache import CallTotals
from furnace.llm.seam import LLM, Completion, LLMRequest, Message

log = logging.getLogger("furnace.mlflow")

ANSWERS_EXPERIMENT = "furnace-agents"
_TEXT = 500  # characters of a message or an answer kept in a trace (inputs, outputs)


@dataclass(frozen=True)
class RecordedCall:
    """One model call behind an answer, as its LLM span shows it."""

    task: str
    message: str
    start_ns: int
    end_ns: int
    usage: CallTotals
    model: str
    text: str = ""
    cached: bool = False
    latency_s: float = 0.0
    error: str | None = None


@dataclass
class CallRecorder(Guarded):
    """The model seam with a note of each call that passes through it (for the answer's trace)."""

    inner: LLM  # wrappers are walked through ``inner`` (answer traits)
    calls: list[RecordedCall] = field(default_factory=list)
    started_ns: int = field(default_factory=time.time_ns)

    def __post_init__(self) -> None:
        self.model_name = self.inner.model_name

    def complete(self, request: LLMRequest) -> Completion:
        last = request.messages[-1].content if request.messages else ""
        task, start = request.task.value, time.time_ns()
        try:
            c = self.inner.complete(request)
        except Exception as err:
            failed = f"{err.__class__.__name__}: {err}"[:300]
            self._note(
                RecordedCall(task, last[:200], start, time.time_ns(), error_totals(err), self.model_name, error=failed)
            )
            raise
        done = RecordedCall(task, last[:200], start, time.time_ns(), completion_totals(c), c.model, c.text[:200])
        self._note(replace(done, cached=c.cached, latency_s=round(c.latency_s, 4)))
        return c

    @serialized
    def _note(self, call: RecordedCall) -> None:
        self.calls.append(call)

    @serialized
    def noted(self) -> list[RecordedCall]:
        """The calls recorded so far (a copy: calls still under way may add to the recorder's own)."""
        return list(self.calls)


class AnswerTraces:
    """Writes answer traces to MLflow at ``tracking_uri`` on one background thread."""

    def __init__(self, tracking_uri: str, *, experiment: str = ANSWERS_EXPERIMENT) -> None:
        self.tracking_uri, self.experiment = tracking_uri, experiment
        self._pool = pool(1, name="furnace-answer-traces")
        self._tracker: Any = None  # the MLflow tracker, made by the writer thread on the first trace
        self.written = 0  # traces handed to MLflow's exporter
        self.failed = 0  # traces that could not be written (logged)

    def submit(
        self,
        name: str,
        inputs: dict[str, Any],
        recorder: CallRecorder,
        outputs: dict[str, Any] | None = None,
        *,
        error: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> Future[str | None]:
        """Hand one answer's trace to the writer; returns at once (the future gives the trace id)."""
        calls, begun, ended = recorder.noted(), recorder.started_ns, time.time_ns()
        return self._pool.submit(self._write, name, inputs, calls, outputs, error, tags or {}, begun, ended)

    def _write(
        self,
        name: str,
        inputs: dict[str, Any],
        calls: Sequence[RecordedCall],
        outputs: dict[str, Any] | None,
        error: str | None,
        tags: dict[str, str],
        start_ns: int,
        end_ns: int,
    ) -> str | None:
        try:
            if self._tracker is None:
                from furnace.adapters.mlflow_tracker import MLflowTracker

                self._tracker = MLflowTracker(self.tracking_uri, mlflow_experiment=self.experiment)
            root = self._tracker.trace(name, inputs, "agent", start_ns=start_ns, tags=tags, runless=True)
            for call in calls:
                span = root.child(f"model {call.task}", {"message": call.message}, "llm", start_ns=call.start_ns)
                outs = None if call.error else {"text": call.text, "cached": call.cached, "latency_s": call.latency_s}
                span.end(outs, call.error, usage=call.usage, model=call.model, end_ns=call.end_ns)
            root.end(outputs, error, end_ns=end_ns)
            self.written += 1
            return str(root.trace_id)
        except Exception as err:  # tracing is an observer: the answer stands without its trace
            self.failed += 1
            log.warning("answer trace not written: %s: %s", err.__class__.__name__, str(err)[:200])
            return None

    def flush(self) -> None:
        """Wait until every trace handed over so far is written and exported to the store."""
        self._pool.submit(lambda: None).result()
        if self._tracker is not None:
            import mlflow

            mlflow.flush_trace_async_logging()

    def close(self) -> None:
        """Write what was handed over, then stop the writer."""
        self.flush()
        self._pool.shutdown(wait=True)


def traced_answer(
    traces: AnswerTraces | None,
    speaker: Speaker,
    message: str,
    llm: LLM,
    *,
    model_id: str | None = None,
    history: Sequence[Message] = (),
    tags: dict[str, str] | None = None,
    **options: Any,
) -> AgentAnswer:
    """:func:`~furnace.fusion.answers.answer_as` (``options`` passed on), its calls traced through
    ``traces`` (None: not traced). ``model_id``: the id the caller asked for (a registry alias, say),
    ``tags``: the trace's tags (the server's response id). A failed answer is traced as an error, then
    raised."""
    if traces is None:
        return answer_as(speaker, message, llm, history=history, **options)
    recorder = CallRecorder(llm)
    name = speaker_name(speaker)
    inputs = {"model": model_id or name, "message": message[:_TEXT], "earlier_turns": len(history)}
    trace_tags = {"furnace.speaker": name, **(tags or {})}
    try:
        out = answer_as(speaker, message, recorder, history=history, **options)
    except FurnaceError as err:
        failed = f"{err.__class__.__name__}: {err}"[:300]
        traces.submit(f"answer {name}", inputs, recorder, error=failed, tags=trace_tags)
        raise
    outputs = {"text": out.text[:_TEXT], "model": out.model, "calls": out.calls} | {
        k: v for k, v in out.transcript().items() if k != "text" and v is not None
    }
    traces.submit(f"answer {name}", inputs, recorder, outputs, tags=trace_tags)
    return out
