"""MLflow tracking for experiments (implements :class:`furnace.evolution.tracker.Tracker`).

One MLflow run per furnace experiment (params = the flattened config; tags =
experiment id, model, best agent and its lineage hashes), metrics per
generation with ``step = generation``, one child run per generation (its
parent passed explicitly — the active run is thread-local), and artifacts at
the end: the best prompt, lineage JSON, the leaderboard table. Re-running an
experiment reuses its run and skips generations already logged.

Everything goes through :class:`mlflow.MlflowClient` with explicit run ids, so
nothing depends on MLflow's thread-local "active run".

Traces follow MLflow's GenAI conventions: each individual is an ``AGENT`` trace, fusion and
evaluation ``CHAIN`` spans, in-process scorers ``TOOL`` spans, each model call an ``LLM`` span
with ``mlflow.chat.tokenUsage``,
``mlflow.llm.cost`` and ``mlflow.llm.model`` (the ledger's accounting: a cache hit spent nothing),
and the individual's objectives and fitness are feedback assessments on its trace (an unscored
objective is an assessment with an error, never a 0). A trace left in progress by a killed run is
ended as an error when the experiment resumes. Artifact locations are proxied
(:mod:`furnace.adapters.mlflow_home`), so a moved home still opens.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from furnace import offline_env

offline_env.apply()
# One writer for the trace export queue: with several, a trace's last span batch and its final
# info are written by concurrent SQLite transactions, and the later one can overwrite the trace's
# token usage with a sum that misses spans. Read when the first trace is exported.
os.environ.setdefault("MLFLOW_ASYNC_TRACE_LOGGING_MAX_WORKERS", "1")

import mlflow  # noqa: E402
from mlflow import MlflowClient  # noqa: E402
from mlflow.entities import (  # noqa: E402
    AssessmentError,
    AssessmentSource,
    AssessmentSourceType,
    Feedback,
    Metric,
    Param,
    RunTag,
    SpanType,
    TraceState,
)
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.tracing.client import TracingClient  # noqa: E402
from mlflow.tracing.constant import SpanAttributeKey, TraceMetadataKey, TraceTagKey  # noqa: E402
from mlflow.tracing.trace_manager import InMemoryTraceManager  # noqa: E402
from mlflow.tracing.utils.prompt import update_linked_prompts_tag  # noqa: E402

from furnace.adapters import mlflow_export, mlflow_home, mlflow_store  # noqa: E402
from furnace.domain.liveness import pid_alive  # noqa: E402
from furnace.evolution.report import HELD_OUT_FIELDS  # noqa: E402
from furnace.evolution.tracker import Assessment, SpanKind  # noqa: E402
from furnace.llm.cache import CallTotals  # noqa: E402

mlflow_home.install()
mlflow_export.install()  # a full trace export queue waits, never drops a trace

log = logging.getLogger("furnace.mlflow")

MLFLOW_EXPERIMENT = "furnace-experiments"
_TAG_ID = "furnace.experiment_id"
_TAG_GEN = "furnace.generation"
TAG_NAME = "furnace.experiment_name"  # a run's name when the params carry no config ``name``
_TAG_OWNER = "furnace.owner"  # host:pid of the process running the experiment (stale traces are its)
_ATTR_RUN = "furnace.mlflow_run_id"  # on every span: whose trace a killed run's spans belong to
_ATTR_TRACE = "furnace.trace_name"
SPAN_TYPES: dict[str, str] = {
    "agent": SpanType.AGENT,
    "chain": SpanType.CHAIN,
    "llm": SpanType.LLM,
    "tool": SpanType.TOOL,
    "embedding": SpanType.EMBEDDING,
}


def artifact_root_for(tracking_uri: str, experiment_name: str = MLFLOW_EXPERIMENT) -> str | None:
    """A new experiment's artifact location: proxied for a sqlite home (moves with it), MLflow's
    default for a server (see :mod:`furnace.adapters.mlflow_home`)."""
    return mlflow_home.artifact_location(tracking_uri, experiment_name)


def usage_attributes(usage: CallTotals, model: str | None) -> dict[str, Any]:
    """MLflow's LLM span attributes for what one call spent (tokens, cost in USD, model)."""
    attrs: dict[str, Any] = {
        SpanAttributeKey.CHAT_USAGE: {
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },
        # furnace knows a call's total cost only (no input/output split)
        SpanAttributeKey.LLM_COST: {"total_cost": round(usage.cost_usd, 9)},
        "furnace.cached": bool(usage.cached_calls),
    }
    if model:
        attrs[SpanAttributeKey.MODEL] = model
    return attrs


def run_name_of(experiment_id: str, params: dict[str, Any], tags: dict[str, str]) -> str:
    """The MLflow run's name: the experiment's name (tag ``furnace.experiment_name``, else the config's
    ``name`` param), the id only when neither is given."""
    return str(tags.get(TAG_NAME) or params.get("name") or experiment_id)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running_elsewhere(owner: str, me: str) -> bool:
    """True when ``owner`` (host:pid) is another live process on this machine: its run is not a
    killed one, so its open traces are left alone. An owner on another machine cannot be checked
    and counts as running (its traces are left alone too)."""
    host, _, pid = owner.rpartition(":")
    if not owner or owner == me or not pid.isdigit():
        return False
    return host != socket.gethostname() or pid_alive(int(pid))


def feedback(assessment: Assessment) -> Feedback:
    """One furnace assessment as MLflow feedback (an unscored one carries an error, no value)."""
    source = (
        AssessmentSource(AssessmentSourceType.LLM_JUDGE, assessment.judge)
        if assessment.judge
        else AssessmentSource(AssessmentSourceType.CODE, assessment.source or "furnace")
    )
    error = AssessmentError("UNSCORED", assessment.error) if assessment.error or assessment.value is None else None
    return Feedback(
        name=assessment.name,
        value=None if error else assessment.value,
        error=error,
        source=source,
        rationale=assessment.rationale or None,
        metadata={k: str(v) for k, v in assessment.metadata.items()} or None,
    )


class _Span:
    """An MLflow span addressed by explicit ids (safe from worker threads)."""

    def __init__(
        self,
        tracker: MLflowTracker,
        trace_id: str,
        span_id: str,
        *,
        root: bool = False,
        marks: dict[str, str] | None = None,
    ) -> None:
        self.tracker, self.client = tracker, tracker.client
        self.trace_id, self.span_id, self.root, self.marks = trace_id, span_id, root, marks or {}

    def child(
        self, name: str, inputs: dict[str, Any], kind: SpanKind = "chain", *, start_ns: int | None = None
    ) -> _Span:
        span = self.client.start_span(
            name,
            trace_id=self.trace_id,
            parent_id=self.span_id,
            span_type=SPAN_TYPES[kind],
            inputs=inputs,
            attributes=self.marks,
            start_time_ns=start_ns,  # a step written after it happened (an answer's calls): when it began
        )
        return _Span(self.tracker, self.trace_id, span.span_id, marks=self.marks)

    def end(
        self,
        outputs: dict[str, Any] | None = None,
        error: str | None = None,
        *,
        usage: CallTotals | None = None,
        model: str | None = None,
        end_ns: int | None = None,
    ) -> None:
        status = "ERROR" if error else "OK"
        outputs = {"error": error} if error else outputs
        attributes = usage_attributes(usage, model) if usage is not None else None
        if self.root:
            self._set_trace_cost()
            self.client.end_trace(
                self.trace_id, outputs=outputs, attributes=attributes, status=status, end_time_ns=end_ns
            )
        else:
            self.client.end_span(
                self.trace_id, self.span_id, outputs=outputs, attributes=attributes, status=status, end_time_ns=end_ns
            )

    def _set_trace_cost(self) -> None:
        """The trace's cost, summed over its spans here and written with the trace: MLflow only
        sums costs client-side for Databricks; a local store sums the span batches it is sent, and
        its total can miss spans that arrive in another batch. Only the total is known."""
        with InMemoryTraceManager.get_instance().get_trace(self.trace_id) as live:
            if live is None:
                return
            costs = [s.get_attribute(SpanAttributeKey.LLM_COST) for s in live.span_dict.values()]
            known = [c["total_cost"] for c in costs if isinstance(c, dict) and "total_cost" in c]
            if known:
                live.info.trace_metadata[TraceMetadataKey.COST] = json.dumps({"total_cost": round(sum(known), 9)})

    def assess(self, assessments: Sequence[Assessment]) -> None:
        """Feedback on this trace: while it is open, in the trace itself (written with it, in one
        go); once it has been exported, straight to the tracking store."""
        items = [feedback(a) for a in assessments]
        with InMemoryTraceManager.get_instance().get_trace(self.trace_id) as live:
            if live is not None:
                for item in items:
                    item.trace_id = self.trace_id
                live.info.assessments.extend(items)
                return
        for item in items:
            self.tracker.traces.log_assessment(self.trace_id, item)


class MLflowTracker:
    """Logs one furnace experiment to MLflow at ``tracking_uri`` (absolute sqlite URI by default).

    With ``tracing`` on, every individual is one MLflow trace tied to the experiment's run: an
    ``AGENT`` root span, a ``fuse <operator>`` and an ``evaluate`` ``CHAIN`` step, each model call
    an ``LLM`` span (task, input/output summaries, token usage, cost, model, latency, cached) — so a
    user can see which step failed — and the individual's scores as assessments.
    """

    def __init__(self, tracking_uri: str, *, mlflow_experiment: str = MLFLOW_EXPERIMENT, tracing: bool = True) -> None:
        self.tracking_uri = tracking_uri
        self.tracing = tracing
        mlflow_store.prepare(tracking_uri)  # a new home's database made once, whoever opens it first
        self.client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        self.traces = TracingClient(tracking_uri)
        self.mlflow_experiment_id = self._experiment(mlflow_experiment)
        self.run_id: str | None = None
        self.run_name = ""  # the experiment's name (its generations' child runs add the generation)
        self.experiment_id = ""  # furnace's experiment id (the runs' tag furnace.experiment_id)
        self._logged: set[int] = set()
        # metric key -> the steps the experiment's run holds: read from the store once per key when the
        # run was reused (a killed process wrote some), empty for a run this tracker made, and kept
        # up to date with what this tracker writes (no re-read before each write)
        self._steps: dict[str, set[int]] = {}
        self._reused = False
        self._unfinished: dict[int, str] = {}  # generation -> child run a killed run left open
        self.ended_stale: list[str] = []  # traces of a killed run this tracker ended as errors
        self._traced: list[str] = []  # the traces this tracker started (appends are atomic across threads)
        self.traces_missing = 0  # of those, how many the store lacked at the end of the run
        self.trace_totals: dict[str, int] = {}  # started / exported / missing, counted when the run finishes

    def _experiment(self, name: str) -> str:
        """The id of MLflow experiment ``name``, created if missing (another process creating it at the
        same moment wins, and its experiment is used)."""
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return str(found.experiment_id)
        try:
            location = artifact_root_for(self.tracking_uri, name)
            return str(self.client.create_experiment(name, artifact_location=location))
        except MlflowException:
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return str(found.experiment_id)

    def start_experiment(self, experiment_id: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        """Open the experiment's run, or reuse the one a previous (interrupted) run opened: its
        tags are updated, and the traces a killed run left in progress are ended as errors."""
        owner = f"{socket.gethostname()}:{os.getpid()}"
        self.run_name = run_name_of(experiment_id, params, tags)
        self.experiment_id = experiment_id
        self._steps = {}
        if self.tracing:
            # MLflow exports traces to the global tracking URI and rebuilds its exporter when that
            # changes: set it here, in one thread, before any unit traces (worker threads racing
            # on the change sent some traces to the previous destination)
            mlflow.set_tracking_uri(self.tracking_uri)
        runs = self.client.search_runs(
            [self.mlflow_experiment_id], filter_string=f"tags.`{_TAG_ID}` = '{experiment_id}'"
        )
        parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        if parents:
            parent = parents[0]
            self.run_id = parent.info.run_id
            self._reused = True
            children = [r for r in runs if _TAG_GEN in r.data.tags]
            self._logged = {int(r.data.tags[_TAG_GEN]) for r in children if r.info.status == "FINISHED"}
            self._unfinished = {
                int(r.data.tags[_TAG_GEN]): r.info.run_id for r in children if r.info.status != "FINISHED"
            }
            previous = parent.data.tags.get(_TAG_OWNER, "")
            if parent.info.status != "RUNNING" or not _running_elsewhere(previous, owner):
                self.ended_stale = self.end_stale_traces(f"run killed; resumed by {owner} at {_now()}")
            self.client.log_batch(
                self.run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in sorted({**tags, _TAG_OWNER: owner}.items())]
            )
            self.client.update_run(self.run_id, status="RUNNING", name=self.run_name)  # an id-named run renamed
            return
        run = self.client.create_run(
            self.mlflow_experiment_id, run_name=self.run_name, tags={**tags, _TAG_ID: experiment_id, _TAG_OWNER: owner}
        )
        self.run_id = run.info.run_id
        self._reused = False
        self.client.log_batch(self.run_id, params=[Param(k, str(v)[:6000]) for k, v in sorted(params.items())])

    def end_stale_traces(self, note: str) -> list[str]:
        """End this run's traces that a killed process left in progress, with status ERROR and
        ``note`` (tag ``furnace.note``); returns their ids. A killed trace was never written
        whole: only the spans that had ended reached the store, each marked with this run's id."""
        if self.run_id is None:
            return []
        ended = []
        for trace in self._in_progress():
            spans = trace.data.spans
            if not any(s.attributes.get(_ATTR_RUN) == self.run_id for s in spans):
                continue  # another run's (possibly live) trace
            info = trace.info
            last = max((s.end_time_ns or s.start_time_ns for s in spans), default=0) // 1_000_000
            info.state = TraceState.ERROR
            info.execution_duration = max(0, last - info.request_time) if last else None
            info.trace_metadata[TraceMetadataKey.SOURCE_RUN] = self.run_id
            names = [s.attributes.get(_ATTR_TRACE) for s in spans if s.attributes.get(_ATTR_TRACE)]
            if names:
                info.tags[TraceTagKey.TRACE_NAME] = str(names[0])
            info.tags["furnace.note"] = note
            info.response_preview = note
            self.traces.start_trace(info)  # an upsert of the trace's info: state, note, run link
            ended.append(info.trace_id)
        return ended

    def _in_progress(self) -> list[Any]:
        found: list[Any] = []
        token = None
        while True:
            page = self.traces.search_traces(
                locations=[self.mlflow_experiment_id],
                filter_string="trace.status = 'IN_PROGRESS'",
                max_results=500,
                page_token=token,
            )
            found.extend(page)
            token = page.token
            if not token:
                return found

    def trace(
        self,
        name: str,
        inputs: dict[str, Any],
        kind: SpanKind = "agent",
        *,
        start_ns: int | None = None,
        tags: dict[str, str] | None = None,
        runless: bool = False,
    ) -> _Span | None:
        """A root span (one trace) for one unit of work, linked to the experiment's run (``runless``: in
        the MLflow experiment alone, as an agent's answers are). ``start_ns``: when the work began, for a
        trace written after it happened."""
        if not self.tracing or (self.run_id is None and not runless):
            return None
        if mlflow.get_tracking_uri() != self.tracking_uri:  # changed by someone else since the start
            mlflow.set_tracking_uri(self.tracking_uri)
        root = self.client.start_trace(
            name,
            span_type=SPAN_TYPES[kind],
            inputs=inputs,
            attributes=self._span_marks(name),
            tags=tags,
            experiment_id=self.mlflow_experiment_id,
            run_id=self.run_id,
            start_time_ns=start_ns,
        )
        if not runless:
            self._traced.append(root.trace_id)
        return _Span(self, root.trace_id, root.span_id, root=True, marks=self._span_marks(name))

    def trace_counts(self) -> tuple[int, int]:
        """(traces this tracker started, how many of them the store holds), once the export queue has
        written everything: a trace the exporter lost is one the second figure misses."""
        started = set(self._traced)
        stored: set[str] = set()
        while started - stored:
            before = len(stored)
            # MLflow's flush waits up to 30 s for the span batches, then drains the export queue: a writer
            # further behind than that is waited for by flushing again while it keeps writing
            mlflow.flush_trace_async_logging()
            stored = {t.info.trace_id for t in self._run_traces() if t.info.trace_id in started}
            if len(stored) == before:
                break
        return len(started), len(stored)

    def _run_traces(self) -> Iterator[Any]:
        """This run's traces in the store (their info, no spans), page by page."""
        token = None
        while True:
            page = self.traces.search_traces(
                locations=[self.mlflow_experiment_id],
                run_id=self.run_id,
                include_spans=False,
                max_results=500,
                page_token=token,
            )
            yield from page
            token = page.token
            if not token:
                return

    def traced_tokens(self) -> dict[str, int]:
        """The tokens this run's traces show, by trace name (MLflow's token usage: the sum over each
        trace's LLM spans; a killed run's traces hold the spans that reached the store). Waits for the
        traces still being written first."""
        if not self.tracing or self.run_id is None:
            return {}
        mlflow.flush_trace_async_logging()
        out: dict[str, int] = {}
        for trace in self._run_traces():
            name = trace.info.tags.get(TraceTagKey.TRACE_NAME, "")
            usage = trace.info.token_usage or {}
            out[name] = out.get(name, 0) + int(usage.get("total_tokens") or 0)
        return out

    def _span_marks(self, trace_name: str) -> dict[str, str]:
        """Attributes on every span of a trace: its run and name survive a kill (spans are stored as
        they end, the trace's info and root span only when it ends)."""
        return {_ATTR_RUN: self.run_id or "", _ATTR_TRACE: trace_name}

    def log_generation(self, generation: int, metrics: dict[str, float], tags: dict[str, str]) -> None:
        """Metrics at ``step = generation`` on the experiment run, plus one child run. Idempotent
        per step: a kill anywhere in here never leaves two values at a step after a resume."""
        if self.run_id is None or generation in self._logged:
            return
        now = int(time.time() * 1000)
        # a kill after the parent's metrics but before the child run leaves the step logged; a
        # resumed run then only adds the child, never a second value at that step
        if generation not in self._logged_steps("best_fitness"):
            self._log_metrics([Metric(k, float(v), now, generation) for k, v in sorted(metrics.items())])
        child_id = self._unfinished.pop(generation, None)  # a killed run's child of this generation
        fresh = child_id is None
        if child_id is None:
            child_id = self.client.create_run(
                self.mlflow_experiment_id,
                run_name=f"{self.run_name} · generation {generation}",
                tags={
                    "mlflow.parentRunId": self.run_id,
                    _TAG_GEN: str(generation),
                    _TAG_ID: self.experiment_id,
                    **tags,
                },
            ).info.run_id
        if fresh or not self.client.get_metric_history(child_id, "best_fitness"):  # a new child holds none
            self.client.log_batch(child_id, metrics=[Metric(k, float(v), now, 0) for k, v in sorted(metrics.items())])
        self.client.set_terminated(child_id)
        self._logged.add(generation)

    def _logged_steps(self, key: str) -> set[int]:
        """The steps at which the experiment's run holds metric ``key`` (see ``_steps``)."""
        if key not in self._steps:
            history = self.client.get_metric_history(self.run_id, key) if self._reused else []
            self._steps[key] = {m.step for m in history}
        return self._steps[key]

    def _log_metrics(self, metrics: list[Metric]) -> None:
        """``metrics`` on the experiment's run (batches of 1000, MLflow's most), remembered as logged."""
        for start in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])
        for m in metrics:
            if m.key in self._steps or not self._reused:  # a reused run's other keys are read when asked for
                self._steps.setdefault(m.key, set()).add(m.step)

    def log_held_out(self, steps: dict[int, dict[str, float]], assessments: dict[str, list[Assessment]]) -> None:
        """What was scored after the search: each generation's best's train and test fitness, its interval
        and the gap as metrics at ``step = generation`` on the experiment run (``best_test_fitness``, ...),
        and each tested individual's held-out assessments on its trace (by trace name), beside its
        fitness. Idempotent: a rerun adds no second value at a step and no second test assessment."""
        if self.run_id is None:
            return
        names = sorted({k for metrics in steps.values() for k in metrics})
        logged = {k: set(self._logged_steps(k)) for k in names}
        now = int(time.time() * 1000)
        self._log_metrics(
            [
                Metric(k, float(v), now, generation)
                for generation, metrics in sorted(steps.items())
                for k, v in sorted(metrics.items())
                if generation not in logged[k]
            ]
        )
        if not (self.tracing and assessments):
            return
        mlflow.flush_trace_async_logging()  # the individuals' traces are in the store
        latest: dict[str, Any] = {}
        for info in (t.info for t in self._run_traces()):
            name = info.tags.get(TraceTagKey.TRACE_NAME, "")
            if name in assessments and (name not in latest or info.request_time > latest[name].request_time):
                latest[name] = info
        for name, info in sorted(latest.items()):
            if any(a.name == "test_fitness" for a in info.assessments or []):
                continue  # assessed by an earlier run of the same experiment
            for item in assessments[name]:
                self.traces.log_assessment(info.trace_id, feedback(item))

    def finish(
        self, status: str, tags: dict[str, str], artifacts: dict[str, Any], totals: dict[str, float] | None = None
    ) -> None:
        """Tags, artifacts (text, JSON, the leaderboard as a table), whole-run totals and the final status.

        ``totals`` (from the call ledger) are logged on the parent run at a new step per finish, so a
        resumed run's totals become the latest value and no step ever holds two values."""
        if self.run_id is None:
            return
        if totals:
            step = len(self._logged_steps("calls"))  # one value per step: the steps so far
            now = int(time.time() * 1000)
            self._log_metrics([Metric(k, float(v), now, step) for k, v in sorted(totals.items())])
        if self.tracing and self._traced:
            started, stored = self.trace_counts()
            self.traces_missing = started - stored
            self.trace_totals = {"started": started, "exported": stored, "missing": started - stored}
            tags = {**tags, "furnace.traces": f"{stored} of {started} stored"}
            if self.traces_missing:
                log.warning(
                    "MLflow: %d of the %d traces of this run were not stored (run %s)",
                    self.traces_missing,
                    started,
                    self.run_id,
                )
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in sorted(tags.items())])
        for name, value in artifacts.items():
            if isinstance(value, str):
                self.client.log_text(self.run_id, value, name)
            else:
                self.client.log_dict(self.run_id, value, name)
        board = artifacts.get("leaderboard.json")
        if isinstance(board, list) and board:
            columns = ("agent_id", "generation", "operator", "fitness", *HELD_OUT_FIELDS)  # test beside train
            table = {k: [row.get(k) for row in board] for k in columns}
            for key in sorted({k for row in board for k in row.get("objectives", {})}):
                table[key] = [row.get("objectives", {}).get(key) for row in board]
            self.client.log_table(self.run_id, table, "leaderboard_table.json")
        self.client.set_terminated(self.run_id, status="FINISHED" if status == "finished" else "KILLED")
        if self.tracing:
            mlflow.flush_trace_async_logging()

    def register_prompt(
        self, name: str, prompt: str, tags: dict[str, str], message: str = "", *, skip_if_same: bool = False
    ) -> int:
        """Register a promoted agent's prompt in MLflow's Prompt Registry; returns its version.
        With ``skip_if_same``, an identical latest version is reused instead of adding one."""
        mlflow.set_tracking_uri(self.tracking_uri)
        mlflow.set_registry_uri(self.tracking_uri)
        if skip_if_same:
            try:
                latest = mlflow.genai.load_prompt(f"prompts:/{name}@latest")
            except Exception:
                latest = None
            if latest is not None and latest.tags.get("furnace.lineage_hash") == tags.get("furnace.lineage_hash"):
                return int(latest.version)
        version = mlflow.genai.register_prompt(
            name=name,
            template=prompt.replace("{{", "{ {"),
            commit_message=message or None,
            tags={k: str(v)[:5000] for k, v in tags.items()},
        )
        return int(version.version)


def link_prompt_to_runs(client: MlflowClient, name: str, version: int, agent_id: str) -> list[str]:
    """Link prompt version ``name``/``version`` to the runs of the furnace experiments that bred
    ``agent_id`` as their best agent (tag ``furnace.best_agent``), so each run's page lists it under
    "Registered prompts"; returns those run ids (none when no experiment run names the agent).

    This is what ``MlflowClient.link_prompt_version_to_run`` stores (the run tag ``mlflow.linkedPrompts``,
    one entry per version, merged by MLflow's own helper), written through ``client``: MLflow's call looks
    the run up in the process-wide tracking store, which need not be ``client``'s."""
    exp = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`furnace.best_agent` = '{agent_id}'")
    prompt = client.get_prompt_version(name, version)
    linked = []
    for run in runs:
        if "mlflow.parentRunId" in run.data.tags:
            continue
        current = run.data.tags.get(TraceTagKey.LINKED_PROMPTS)
        updated = update_linked_prompts_tag(current, [prompt])
        if updated != current:
            client.set_tag(run.info.run_id, TraceTagKey.LINKED_PROMPTS, updated)
        linked.append(run.info.run_id)
    return sorted(linked)


def run_summary(tracking_uri: str, experiment_id: str) -> dict[str, Any] | None:
    """The MLflow run of a furnace experiment as plain data (for ``experiment show`` and tests); None when
    there is none, without creating a home's MLflow database that does not exist yet (making its tables
    costs seconds, and an experiment run ``--no-mlflow`` never made one)."""
    if not mlflow_store.holds_runs(tracking_uri):
        return None
    mlflow_store.prepare(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{_TAG_ID}` = '{experiment_id}'")
    parent = next((r for r in runs if "mlflow.parentRunId" not in r.data.tags), None)
    if parent is None:
        return None
    history = client.get_metric_history(parent.info.run_id, "best_fitness")
    held = {k: client.get_metric_history(parent.info.run_id, f"best_{k}") for k in HELD_OUT_FIELDS}
    return {
        "run_id": parent.info.run_id,
        "mlflow_experiment_id": exp.experiment_id,
        "status": parent.info.status,
        "tags": dict(parent.data.tags),
        "params": dict(parent.data.params),
        "best_fitness_steps": [(m.step, m.value) for m in history],
        # each generation's best's held-out figures, logged after the search (``log_held_out``)
        "held_out_steps": {f"best_{k}": sorted((m.step, m.value) for m in steps) for k, steps in held.items()},
        "children": len(runs) - 1,
        "artifacts": sorted(a.path for a in client.list_artifacts(parent.info.run_id)),
    }
