"""MLflow tracking of an experiment: one run, metrics per generation, child runs, artifacts, prompts;
traces with GenAI span types, token usage, cost and assessments; a moved home; killed runs' traces."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments.test_evolution import make
from furnace.evolution.records import MemoryResults


def test_experiment_is_logged_once_and_resumes_its_run(settings, mlflow_ready):
    from furnace.adapters.mlflow_tracker import MLflowTracker, run_summary

    uri = settings.tracking_uri
    assert uri.startswith("sqlite:////")
    evo = make(MemoryResults(), generations=2)
    evo.tracker = MLflowTracker(uri, tracing=False)  # tracing: next test (one trace destination per process)
    report = evo.run()
    summary = run_summary(uri, report.experiment_id)
    assert summary is not None
    assert summary["status"] == "FINISHED"
    assert [s for s, _ in summary["best_fitness_steps"]] == [0, 1, 2]
    assert summary["children"] == 3
    assert summary["params"]["population"] == "6"
    assert summary["tags"]["furnace.best_agent"] == report.leaderboard[0]["agent_id"]
    assert {"best_prompt.md", "lineage.json", "leaderboard.json", "leaderboard_table.json"} <= set(summary["artifacts"])
    assert (settings.home / "mlartifacts").exists()

    again = make(evo.results, generations=2, breeder=evo.breeder)
    again.tracker = MLflowTracker(uri, tracing=False)
    again.run()
    summary2 = run_summary(uri, report.experiment_id)
    assert summary2["run_id"] == summary["run_id"]
    assert summary2["children"] == 3
    assert len(summary2["best_fitness_steps"]) == 3

    version = again.tracker.register_prompt("furnace-best", report.best_prompt, {"lineage_hash": "abc"})
    assert version == 1
    import mlflow

    loaded = mlflow.genai.load_prompt("prompts:/furnace-best/1")
    assert loaded.tags["lineage_hash"] == "abc"


def test_a_flush_wakes_the_idle_trace_writer_instead_of_leaving_it_to_its_poll_timeout():
    """The export queue's consumer waits for a task with a timeout (MLflow's: 1 s) and reads its stop event
    in between; a flush stops it, so an idle consumer must be woken, not left to time out. Here its wait is
    30 s: a wait that ran out shows as a timeout in ``waits``."""
    from queue import Empty

    from furnace.adapters.mlflow_export import Task, WaitingExportQueue

    export = WaitingExportQueue()
    real_get = export._queue.get
    waits: list[str] = []

    def get(block: bool = True, timeout: float | None = None):
        try:
            task = real_get(timeout=30)
        except Empty:
            waits.append("timeout")
            raise
        waits.append("task")
        return task

    export._queue.get = get
    written: list[str] = []
    export.put(Task(handler=written.append, args=("trace",)))
    export.flush()  # the consumer restarts after it (a tracked run flushes several times)
    export.flush(terminate=True)
    assert written == ["trace"]
    assert waits and set(waits) == {"task"}, waits


def test_the_export_queue_counts_the_tasks_it_queued_and_those_written_in_the_caller(monkeypatch):
    """``stats`` counts a task handed to the writer as queued, and one written at once because the queue
    was stopped as inline (threads of every queue share the counts)."""
    from furnace.adapters import mlflow_export
    from furnace.adapters.mlflow_export import ExportStats, Task, WaitingExportQueue

    monkeypatch.setattr(mlflow_export, "stats", ExportStats())
    export = WaitingExportQueue()
    written: list[str] = []
    export.put(Task(handler=written.append, args=("queued",)))
    export.flush(terminate=True)
    export.put(Task(handler=written.append, args=("inline",)))  # stopped: written in the caller
    assert written == ["queued", "inline"]
    counted = mlflow_export.stats
    assert (counted.queued, counted.waited, counted.inline) == (1, 0, 1)


def test_spans_reach_the_store_in_batches_of_up_to_25_and_all_of_them_arrive(settings, mlflow_ready, monkeypatch):
    """The writer is handed span batches of up to ``SPAN_BATCH`` spans (MLflow's own are 5, and each write
    costs about the same whatever its size), and a trace's spans all reach the store."""
    import mlflow
    from mlflow.tracing.export import mlflow_v3

    from furnace.adapters.mlflow_export import SPAN_BATCH
    from furnace.adapters.mlflow_tracker import MLflowTracker

    sizes: list[int] = []
    write = mlflow_v3.MlflowV3SpanExporter._log_spans

    def counted(self, experiment_id, spans, workspace=None):
        sizes.append(len(spans))
        return write(self, experiment_id, spans, workspace)

    monkeypatch.setattr(mlflow_v3.MlflowV3SpanExporter, "_log_spans", counted)
    tracker = MLflowTracker(settings.tracking_uri)
    tracker.start_experiment("exp-batches", {}, {})
    root = tracker.trace("batched", {"n": 60})
    assert root is not None
    for i in range(60):
        root.child(f"step {i}", {"i": i}, "tool").end({"ok": i})
    root.end({"done": True})
    mlflow.flush_trace_async_logging()
    assert sum(sizes) == 61 and max(sizes) <= SPAN_BATCH
    assert len(sizes) < 61 / 5  # fewer writes than MLflow's 5-span batches would take
    stored = tracker.client.get_trace(root.trace_id)
    assert len(stored.data.spans) == 61


class Priced:
    """Answers like ``inner`` with token usage and a cost per call; every JUDGE call about an answer of
    the persona named ``fail_judge_for`` fails (a judge outage for one individual)."""

    def __init__(self, inner, fail_judge_for: str) -> None:
        self.inner, self.model_name, self.fail_judge_for = inner, inner.model_name, fail_judge_for

    def complete(self, request):
        from furnace.domain.errors import LLMRateLimit
        from furnace.llm.seam import TaskKind, Usage

        answer = str((request.inputs or {}).get("answer") or "")  # the judge never sees the persona: its answer
        if request.task == TaskKind.JUDGE and answer.startswith(f"## {self.fail_judge_for}\n"):  # names it
            raise LLMRateLimit("429 from the judge")
        c = self.inner.complete(request)
        prompt = sum(len(m.content) for m in request.messages) // 4
        usage = Usage(prompt_tokens=prompt, completion_tokens=c.usage.completion_tokens)
        return c.model_copy(update={"usage": usage, "cost_usd": usage.total_tokens * 1e-6})


def test_traces_have_span_types_token_usage_cost_and_assessments(settings, mlflow_ready):
    import mlflow
    from mlflow.entities import SpanType

    from experiments.helpers import library, scripted_llm
    from furnace.adapters.mlflow_tracker import MLflowTracker, run_summary

    outage = library()[1].name
    evo = make(MemoryResults(), llm=Priced(scripted_llm(), fail_judge_for=outage), generations=1)
    evo.tracker = MLflowTracker(settings.tracking_uri)
    report = evo.run()
    traces = mlflow.search_traces(
        locations=[evo.tracker.mlflow_experiment_id], return_type="list", run_id=evo.tracker.run_id
    )
    records = {f"individual g{r.generation} s{r.slot}": r for r in evo.results.individuals(report.experiment_id)}
    held = [t for t in traces if next(s for s in t.data.spans if s.parent_id is None).name == "held-out"]
    traces = [t for t in traces if t not in held]  # the evaluation after the search: test and re-evaluation
    assert len(held) == 1 and len(traces) == len(records) == 6 + 5
    assert report.status == "finished"
    names = {s.name for t in traces for s in t.data.spans}
    assert {"evaluate", "model reply", "model judge"} <= names
    assert any(n.startswith("fuse ") for n in names) and any(n.startswith("individual g1") for n in names)
    judge_model = evo.llm.model_name
    unscored = 0
    for trace in traces:
        spans = trace.data.spans
        root = next(s for s in spans if s.parent_id is None)
        record = records[root.name]
        assert root.span_type == SpanType.AGENT
        for span in spans:
            if span.name.startswith(("fuse ", "evaluate")):
                assert span.span_type == SpanType.CHAIN
            if span.name.startswith("model "):
                assert span.span_type == SpanType.LLM
                usage = span.get_attribute("mlflow.chat.tokenUsage")
                assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
                assert (usage["total_tokens"] > 0) == (span.status.status_code == "OK")  # a failed call spent 0
                assert span.get_attribute("mlflow.llm.cost")["total_cost"] == pytest.approx(
                    usage["total_tokens"] * 1e-6
                )
                assert span.get_attribute("mlflow.llm.model") == judge_model
            if span.name.startswith("score "):  # an in-process scorer (not a model call)
                assert span.span_type == SpanType.TOOL
                assert span.name.removeprefix("score ") in {"constraints", "brief_fit", "diversity"}
        assert all(s.span_type != SpanType.UNKNOWN for s in spans)
        tools = sorted(s.name for s in spans if s.span_type == SpanType.TOOL)
        if record.scores:  # its validation probes, each sampled k times: constraints and brief_fit per sample,
            k = len(evo.validation.probes) * evo.config.samples_per_probe  # diversity once
            assert tools == ["score brief_fit"] * k + ["score constraints"] * k + ["score diversity"]
        # the trace's token usage (MLflow's sum over its LLM spans) is the individual's own figure
        assert trace.info.token_usage["total_tokens"] == record.tokens > 0
        assert trace.info.cost["total_cost"] == pytest.approx(record.cost_usd)
        verdicts = {a.name: a for a in trace.info.assessments}
        assert set(verdicts) == {"constraints", "fidelity", "brief_fit", "diversity", "fitness"}
        fidelity = verdicts["fidelity"]
        assert fidelity.source.source_type == "LLM_JUDGE" and fidelity.source.source_id == judge_model
        assert verdicts["constraints"].source.source_type == "CODE"
        if record.scored:
            assert verdicts["fitness"].value == pytest.approx(record.fitness)
            for name, value in record.objectives.items():
                assert verdicts[name].value == pytest.approx(value) and verdicts[name].error is None
            assert fidelity.rationale  # the judge's reason (and feedback) per probe
        else:  # the judge failed: an error, never a 0
            unscored += 1
            assert record.elixir["name"] == outage
            assert fidelity.value is None and "429" in fidelity.error.error_message
            assert verdicts["fitness"].value is None and verdicts["fitness"].error is not None
            assert verdicts["constraints"].value == pytest.approx(record.objectives["constraints"])
    assert unscored >= 1
    # whole-run totals on the parent run are the accounting's (here the meter: no ledger), and
    # they are the sum of what the traces spent
    summary = run_summary(settings.tracking_uri, report.experiment_id)
    metrics = evo.tracker.client.get_run(summary["run_id"]).data.metrics
    everything = traces + held
    assert metrics["tokens"] == report.totals["tokens"] == sum(t.info.token_usage["total_tokens"] for t in everything)
    assert metrics["model_calls"] == report.totals["model_calls"]
    # the held-out figures beside them (two probes: no test split here, a re-evaluation of the top)
    assert metrics["reevaluation_drop"] == pytest.approx(report.held_out["reevaluation"]["drop"])
    assert metrics["cost_usd"] == pytest.approx(report.totals["cost_usd"])


def test_held_out_figures_are_step_metrics_a_table_and_assessments_on_each_tested_trace(settings, mlflow_ready):
    """Every generation's best's train and test fitness (with its interval and the gap) at its step,
    the leaderboard table with test beside train, and test assessments beside each tested individual's
    fitness on its own trace, read back from MLflow; a rerun adds none twice."""
    import mlflow

    from furnace.adapters.mlflow_tracker import MLflowTracker, run_summary
    from furnace.evolution.engine import trace_name

    evo = make(MemoryResults(), population=4, generations=2, probes={"set": "writing-en", "limit": 4})
    evo.tracker = MLflowTracker(settings.tracking_uri)
    report = evo.run()
    assert report.held_out["splits"]["test"]  # four probes: one of them held out
    summary = run_summary(settings.tracking_uri, report.experiment_id)
    steps = summary["held_out_steps"]
    for key in ("best_train_fitness", "best_test_fitness", "best_test_low", "best_test_high", "best_train_test_gap"):
        expected = [(g["generation"], g[key]) for g in report.generations if g.get(key) is not None]
        assert expected and steps[key] == [(s, pytest.approx(v)) for s, v in expected], key
    for low, test, high in zip(*(steps[f"best_test_{k}"] for k in ("low", "fitness", "high")), strict=True):
        assert low[1] <= test[1] <= high[1]
    metrics = evo.tracker.client.get_run(summary["run_id"]).data.metrics
    best = report.best
    assert best is not None and best["test_fitness"] is not None
    for key in ("test_fitness", "test_low", "test_high", "train_fitness", "train_test_gap"):
        assert metrics[f"champion_{key}"] == pytest.approx(best[key])
    table = mlflow.artifacts.load_dict(f"runs:/{summary['run_id']}/leaderboard_table.json")
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert [(r["agent_id"], r["test_fitness"], r["train_test_gap"]) for r in rows] == [
        (r["agent_id"], r.get("test_fitness"), r.get("train_test_gap")) for r in report.leaderboard
    ]

    def verdicts() -> dict[str, list]:
        traces = mlflow.search_traces(
            locations=[evo.tracker.mlflow_experiment_id], return_type="list", run_id=summary["run_id"]
        )
        return {t.info.tags["mlflow.traceName"]: t.info.assessments for t in traces}

    first = {}
    for r in sorted(evo.results.individuals(report.experiment_id), key=lambda r: (r.generation, r.slot)):
        first.setdefault(r.agent_id, r)
    tested = report.held_out["agents"]
    assert len(tested) >= len(report.generations)
    shown = verdicts()
    for agent_id, row in tested.items():
        on_trace = {a.name: a for a in shown[trace_name(first[agent_id].generation, first[agent_id].slot)]}
        assert on_trace["fitness"].value == pytest.approx(row["validation"])  # the search's, unchanged
        assert on_trace["train_fitness"].value == pytest.approx(row["train"])
        test = on_trace["test_fitness"]
        assert test.value == pytest.approx(row["test"]) and test.source.source_id == "furnace.held_out"
        low, high = float(test.metadata["test_low"]), float(test.metadata["test_high"])
        assert (low, high) == (pytest.approx(row["test_low"]), pytest.approx(row["test_high"]))
        assert low <= test.value <= high and f"[{low:.3f}, {high:.3f}]" in test.rationale
        assert on_trace["train_test_gap"].value == pytest.approx(row["train"] - row["test"], abs=1e-6)
    untested = [name for name, items in shown.items() if not any(a.name == "test_fitness" for a in items)]
    assert untested  # the held-out trace, and individuals never among the tested
    again = make(
        evo.results, population=4, generations=2, breeder=evo.breeder, probes={"set": "writing-en", "limit": 4}
    )
    again.tracker = MLflowTracker(settings.tracking_uri)
    again.run()
    counts = [sum(a.name == "test_fitness" for a in items) for items in verdicts().values()]
    assert max(counts) == 1 and sum(counts) == len(tested)
    assert run_summary(settings.tracking_uri, report.experiment_id)["held_out_steps"] == steps


_SERVE = """
import json, os, sys
from mlflow.server import app  # the app `mlflow ui` serves, configured as its CLI configures it
client = app.test_client()
run_id, = sys.argv[1:]
listed = client.get(f"/api/2.0/mlflow/artifacts/list?run_id={run_id}").get_json()
prompt = client.get(f"/get-artifact?path=best_prompt.md&run_uuid={run_id}")
print(json.dumps({"listed": sorted(f["path"] for f in listed.get("files", [])), "status": prompt.status_code,
                  "prompt": prompt.get_data(as_text=True)}))
"""


def test_a_moved_home_still_opens_runs_artifacts_and_traces(tmp_path, _mlflow_template):
    import shutil
    import subprocess
    import sys

    from mlflow import MlflowClient

    from furnace.adapters.mlflow_tracker import MLflowTracker, run_summary
    from furnace.settings import FurnaceSettings

    old = FurnaceSettings(home=tmp_path / "old")
    old.home.mkdir()
    shutil.copyfile(_mlflow_template, old.home / "mlflow.db")  # initialised (its creation is tested elsewhere)
    evo = make(MemoryResults(), generations=0)
    evo.tracker = MLflowTracker(old.tracking_uri)
    report = evo.run()
    run_id = evo.tracker.run_id
    moved = FurnaceSettings(home=tmp_path / "elsewhere" / "home")
    moved.home.parent.mkdir()
    shutil.move(old.home, moved.home)
    assert not old.home.exists()

    # furnace's own client (and notebooks through furnace.adapters): runs, artifacts, traces
    summary = run_summary(moved.tracking_uri, report.experiment_id)
    assert summary["run_id"] == run_id and "best_prompt.md" in summary["artifacts"]
    client = MlflowClient(tracking_uri=moved.tracking_uri)
    path = client.download_artifacts(run_id, "best_prompt.md", str(tmp_path))
    assert Path(path).read_text() == report.best_prompt
    assert str(old.home) not in client.get_run(run_id).info.artifact_uri
    traces = client.search_traces(locations=[summary["mlflow_experiment_id"]], run_id=run_id)
    traces = [t for t in traces if t.info.assessments]  # the individuals' (the held-out trace has none)
    assert len(traces) == 6 and all(t.data.spans for t in traces)

    # `mlflow ui --backend-store-uri sqlite:///<home>/mlflow.db --artifacts-destination <home>/mlartifacts`
    env = {
        **os.environ,
        "_MLFLOW_SERVER_FILE_STORE": moved.tracking_uri,
        "_MLFLOW_SERVER_REGISTRY_STORE": moved.tracking_uri,
        "_MLFLOW_SERVER_ARTIFACT_ROOT": "mlflow-artifacts:/",
        "_MLFLOW_SERVER_ARTIFACT_DESTINATION": str(moved.home / "mlartifacts"),
        "_MLFLOW_SERVER_SERVE_ARTIFACTS": "true",
    }
    out = subprocess.run(
        [sys.executable, "-c", _SERVE, run_id], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    served = json.loads(out.stdout.strip().splitlines()[-1])
    assert served["status"] == 200 and served["prompt"] == report.best_prompt
    assert {"best_prompt.md", "lineage.json", "leaderboard.json"} <= set(served["listed"])


class Killed(BaseException):
    """The process dying at that point (nothing after it runs)."""


def test_a_kill_while_logging_never_leaves_two_values_at_a_step(settings, monkeypatch, mlflow_ready):
    from furnace.adapters.mlflow_tracker import MLflowTracker, run_summary

    uri = settings.tracking_uri
    results = MemoryResults()
    first = make(results, generations=1)
    tracker = first.tracker = MLflowTracker(uri, tracing=False)
    log_batch = tracker.client.log_batch

    def die_on_child_metrics(run_id, metrics=(), **kwargs):
        child = run_id != tracker.run_id and tracker.client.get_run(run_id).data.tags.get("furnace.generation") == "1"
        if metrics and child:
            raise Killed  # after generation 1's parent metrics and its child run, before the child's metrics
        return log_batch(run_id, metrics=metrics, **kwargs)

    monkeypatch.setattr(tracker.client, "log_batch", die_on_child_metrics)
    with pytest.raises(Killed):
        first.run()

    second = make(results, generations=1, breeder=first.breeder)
    tracker = second.tracker = MLflowTracker(uri, tracing=False)

    set_terminated = tracker.client.set_terminated

    def die_when_closing(run_id, status="FINISHED"):
        if run_id == tracker.run_id:
            raise Killed  # in the final logging: after the totals, tags and artifacts
        return set_terminated(run_id, status)

    monkeypatch.setattr(tracker.client, "set_terminated", die_when_closing)
    with pytest.raises(Killed):
        second.run()

    third = make(results, generations=1, breeder=first.breeder)
    third.tracker = MLflowTracker(uri, tracing=False)
    report = third.run()
    summary = run_summary(uri, report.experiment_id)
    client = third.tracker.client
    assert summary["status"] == "FINISHED" and summary["children"] == 2  # one child run per generation
    for name in client.get_run(summary["run_id"]).data.metrics:
        steps = [m.step for m in client.get_metric_history(summary["run_id"], name)]
        assert len(steps) == len(set(steps)), (name, steps)
    assert [s for s, _ in summary["best_fitness_steps"]] == [0, 1]
    assert [m.step for m in client.get_metric_history(summary["run_id"], "calls")] == [0, 1]  # one per finish
    children = client.search_runs(
        [summary["mlflow_experiment_id"]], filter_string=f"tags.`mlflow.parentRunId` = '{summary['run_id']}'"
    )
    assert {r.info.status for r in children} == {"FINISHED"}
    for child in children:
        assert [m.step for m in client.get_metric_history(child.info.run_id, "best_fitness")] == [0]


def test_metric_steps_are_read_once_per_resumed_run_and_a_kill_before_the_child_run_adds_no_second_value(
    settings, monkeypatch, mlflow_ready
):
    """The tracker remembers the steps it wrote instead of re-reading the run's metric history before
    each write: a run it made is never read back, a reused run once per metric; and a kill between a
    generation's metrics and its child run still leaves one value per step after the resume."""
    from furnace.adapters.mlflow_tracker import MLflowTracker

    uri = settings.tracking_uri
    reads: list[tuple[str, str]] = []

    def counting(tracker: MLflowTracker) -> MLflowTracker:
        history = tracker.client.get_metric_history
        monkeypatch.setattr(
            tracker.client,
            "get_metric_history",
            lambda run_id, key: reads.append((run_id, key)) or history(run_id, key),
        )
        return tracker

    first = counting(MLflowTracker(uri, tracing=False))
    first.start_experiment("exp-steps", {"population": 4}, {})
    for generation in range(3):
        first.log_generation(generation, {"best_fitness": 0.1 * generation, "mean_fitness": 0.05}, {})
    first.log_held_out({0: {"best_test_fitness": 0.4}, 2: {"best_test_fitness": 0.5}}, {})
    first.finish("finished", {}, {}, {"calls": 10.0})
    assert reads == []  # a run this tracker made: what it holds is what the tracker wrote

    second = counting(MLflowTracker(uri, tracing=False))
    create_run = second.client.create_run
    monkeypatch.setattr(second.client, "create_run", lambda *a, **k: (_ for _ in ()).throw(Killed()))
    second.start_experiment("exp-steps", {"population": 4}, {})
    with pytest.raises(Killed):  # after generation 3's metrics on the run, before its child run
        second.log_generation(3, {"best_fitness": 0.3, "mean_fitness": 0.06}, {})
    monkeypatch.setattr(second.client, "create_run", create_run)

    reads.clear()
    third = counting(MLflowTracker(uri, tracing=False))
    third.start_experiment("exp-steps", {"population": 4}, {})
    for generation in range(5):
        third.log_generation(generation, {"best_fitness": 0.2 + 0.1 * generation, "mean_fitness": 0.07}, {})
    third.log_held_out({3: {"best_test_fitness": 0.6}, 2: {"best_test_fitness": 0.9}}, {})
    third.finish("finished", {}, {}, {"calls": 20.0})
    run_id = third.run_id
    on_run = [key for run, key in reads if run == run_id]
    assert sorted(on_run) == ["best_fitness", "best_test_fitness", "calls"]  # each once

    client = third.client
    for name in ("best_fitness", "mean_fitness", "best_test_fitness", "calls"):
        history = client.get_metric_history(run_id, name)
        assert len({m.step for m in history}) == len(history), name  # never two values at a step
    assert sorted((m.step, m.value) for m in client.get_metric_history(run_id, "best_fitness")) == [
        (0, 0.0),
        (1, 0.1),
        (2, 0.2),
        (3, 0.3),
        (4, pytest.approx(0.6)),
    ]  # the killed process's step 3 kept, the resume's later step added
    assert sorted((m.step, m.value) for m in client.get_metric_history(run_id, "best_test_fitness")) == [
        (0, 0.4),
        (2, 0.5),
        (3, 0.6),
    ]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "calls")] == [(0, 10.0), (1, 20.0)]
    children = client.search_runs([third.mlflow_experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'")
    assert sorted(int(r.data.tags["furnace.generation"]) for r in children) == [0, 1, 2, 3, 4]
    assert {r.data.tags["furnace.experiment_id"] for r in children} == {"exp-steps"}
    for child in children:
        assert len(client.get_metric_history(child.info.run_id, "best_fitness")) == 1
