"""Each served answer is an MLflow trace, as a ``furnace agent answer`` is (one shared path), written in
the background: the response never waits for it."""

from __future__ import annotations

import shutil
import threading

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from furnace.server.app import create_app

from .conftest import make_lab


@pytest.fixture()
def traced_lab(tmp_path, _mlflow_template):
    lab = make_lab(tmp_path / "home")
    shutil.copyfile(_mlflow_template, lab.runtime.settings.home / "mlflow.db")  # an initialised, empty store
    yield lab
    lab.runtime.close()


def _traces(uri: str, **tags: str) -> list:
    from furnace.adapters.mlflow_answers import ANSWERS_EXPERIMENT
    from furnace.adapters.mlflow_tracker import MLflowTracker

    tracker = MLflowTracker(uri, mlflow_experiment=ANSWERS_EXPERIMENT)
    found = tracker.traces.search_traces(locations=[tracker.mlflow_experiment_id], max_results=100)
    return [t for t in found if all(t.info.tags.get(k) == v for k, v in tags.items())]


def _llm_tokens(trace) -> int:
    spans = [s for s in trace.data.spans if s.span_type == "LLM"]
    return sum(s.get_attribute("mlflow.chat.tokenUsage")["total_tokens"] for s in spans)


def test_served_answers_are_traced_plain_streamed_and_failed(traced_lab) -> None:
    rt, lab = traced_lab.runtime, traced_lab
    body = {"model": lab.committee.id, "messages": [{"role": "user", "content": "How do I price a newsletter?"}]}
    with TestClient(create_app(rt)) as client:
        plain = client.post("/v1/chat/completions", json=body).json()
        streamed = client.post(
            "/v1/chat/completions",
            json={**body, "model": lab.agent.id, "stream": True, "stream_options": {"include_usage": True}},
        )
        assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")
        missing = client.post("/v1/chat/completions", json={**body, "model": "no-such-agent"})
        assert missing.status_code == 404
        client.app.state.traces.flush()
    uri = rt.settings.tracking_uri
    (trace,) = _traces(uri, **{"furnace.response_id": plain["id"]})
    assert trace.info.tags["furnace.face"] == "serve" and trace.info.tags["furnace.speaker"] == lab.committee.id
    root = next(s for s in trace.data.spans if s.parent_id is None)
    assert root.name == f"answer {lab.committee.id}" and root.span_type == "AGENT"
    assert root.outputs["text"] == plain["choices"][0]["message"]["content"][:500]
    assert root.outputs["leader"] == plain["furnace"]["leader"]
    calls = [s for s in trace.data.spans if s.span_type == "LLM"]
    assert len(calls) == plain["furnace"]["calls"] and all(s.parent_id == root.span_id for s in calls)
    assert _llm_tokens(trace) == plain["usage"]["total_tokens"]  # fresh calls: the ledger's tokens
    assert all(root.start_time_ns <= s.start_time_ns <= s.end_time_ns <= root.end_time_ns for s in calls)
    streamed_traces = [t for t in _traces(uri, **{"furnace.speaker": lab.agent.id})]
    assert len(streamed_traces) == 1 and streamed_traces[0].info.tags["furnace.response_id"].startswith("chatcmpl-")
    assert len(_traces(uri)) == 2  # an unknown model is refused before any answer: nothing to trace


def test_a_response_never_waits_for_its_trace(traced_lab, monkeypatch) -> None:
    from furnace.adapters.mlflow_answers import AnswerTraces

    rt, lab = traced_lab.runtime, traced_lab
    gate, write = threading.Event(), AnswerTraces._write
    monkeypatch.setattr(AnswerTraces, "_write", lambda self, *a: gate.wait(120) and write(self, *a))
    body = {"model": lab.agent.id, "messages": [{"role": "user", "content": "Where do I begin?"}]}
    with TestClient(create_app(rt)) as client:
        traces = client.app.state.traces
        answered = client.post("/v1/chat/completions", json=body)
        assert answered.status_code == 200  # answered while the trace writer is held
        assert traces.written == 0
        gate.set()
        traces.flush()
        assert traces.written == 1
    assert [t.info.tags["furnace.response_id"] for t in _traces(rt.settings.tracking_uri)] == [answered.json()["id"]]


def test_agent_answer_is_traced_through_the_same_path(traced_lab) -> None:
    from furnace.cli import cli

    rt, lab = traced_lab.runtime, traced_lab
    rt.close()  # the CLI opens the home itself
    home = str(rt.settings.home)
    env = {"FURNACE_EMBEDDER": "hash"}
    traced = CliRunner().invoke(cli, ["--home", home, "agent", "answer", lab.agent.id, "Tea or coffee?"], env=env)
    assert traced.exit_code == 0, traced.output
    untraced = ["--home", home, "agent", "answer", lab.agent.id, "Milk or lemon?", "--no-mlflow"]
    assert CliRunner().invoke(cli, untraced, env=env).exit_code == 0
    (trace,) = _traces(rt.settings.tracking_uri)
    assert trace.info.tags["furnace.face"] == "cli" and trace.info.tags["furnace.speaker"] == lab.agent.id
    root = next(s for s in trace.data.spans if s.parent_id is None)
    assert root.inputs["message"] == "Tea or coffee?" and root.outputs["text"] in traced.output
    assert [s.name for s in trace.data.spans if s.span_type == "LLM"] == ["model reply"]
