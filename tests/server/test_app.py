"""The server's app through FastAPI's TestClient (no socket): the persona's prompt from the synthesis
cache, earlier turns, pre-warming, the key from FURNACE_SERVE_KEY, model failures, registry aliases."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from furnace.domain.errors import LLMError, LLMTimeout
from furnace.fusion.synthesis import MemoryKV, SynthesisCache
from furnace.llm.cache import CachedLLM
from furnace.llm.fakes import EchoLLM, FakeLLM
from furnace.server.app import create_app

from .conftest import make_lab


@pytest.fixture(scope="module")
def rt(lab):
    return lab.runtime


def chat(client: TestClient, model: str, *messages: tuple[str, str], **extra) -> dict:
    body = {"model": model, "messages": [{"role": r, "content": c} for r, c in messages], **extra}
    resp = client.post("/v1/chat/completions", json=body)
    return {"status": resp.status_code, **resp.json()}


def test_the_persona_prompt_from_the_synthesis_cache_and_the_earlier_turns(rt, lab, monkeypatch) -> None:
    echo, cache = EchoLLM(), SynthesisCache(MemoryKV())
    monkeypatch.setattr(rt, "llm", CachedLLM(echo))
    monkeypatch.setattr(rt, "synthesis_cache", cache)
    with TestClient(create_app(rt)) as client:
        out = chat(
            client,
            lab.agent.id,
            ("system", "You are a pirate."),  # the persona is the model: a client's system prompt is not used
            ("user", "What is a p-value?"),
            ("assistant", "The chance of data this extreme under the null."),
            ("user", "And a confidence interval?"),
        )
    assert out["status"] == 200
    [request] = echo.calls
    roles = [m.role for m in request.messages]
    assert roles[0] == "system" and roles[-1] == "user" and request.messages[-1].content == "And a confidence interval?"
    assert request.messages[0].content.startswith(lab.agent.system_prompt)
    assert cache.get(lab.agent.lineage_hash)["prompt"] == lab.agent.system_prompt  # read through the cache
    contents = [m.content for m in request.messages]
    assert "What is a p-value?" in contents and "The chance of data this extreme under the null." in contents
    assert not any("pirate" in c for c in contents)
    assert [r.run_id for r in rt.llm.ledger.calls()] == [out["id"]]


def test_agents_are_prewarmed_at_start_and_when_one_is_created(rt, lab, monkeypatch) -> None:
    from furnace.fusion.fuse import fuse

    cache = SynthesisCache(MemoryKV())
    monkeypatch.setattr(rt, "synthesis_cache", cache)
    with TestClient(create_app(rt)) as client:
        catalogue = client.app.state.catalogue
        catalogue.settle(30)
        assert cache.get(lab.agent.lineage_hash) and cache.get(lab.committee.lineage_hash)
        assert cache.builds == 2
        # an agent created while the server runs (its own cache: as by `furnace fuse` in another process)
        other = SynthesisCache(MemoryKV())
        new = fuse(
            rt.store,
            ["socratic-math-tutor"],
            llm=rt.llm,
            embedder=rt.embedder,
            cache=other,
            seed=11,
            settings=rt.settings,
        ).agent
        assert cache.get(new.lineage_hash) is None
        assert new.id in {m["id"] for m in client.get("/v1/models").json()["data"]}
        catalogue.settle(30)
        assert cache.get(new.lineage_hash)["prompt"] == new.system_prompt and cache.builds == 3


def test_the_key_comes_from_furnace_serve_key(rt, monkeypatch) -> None:
    from furnace.settings import FurnaceSettings

    with TestClient(create_app(rt)) as open_client:  # no key set: none asked
        assert open_client.get("/v1/models").status_code == 200
    monkeypatch.setenv("FURNACE_SERVE_KEY", "from-the-env")
    monkeypatch.setattr(rt, "settings", FurnaceSettings(home=rt.settings.home, embedder="hash"))
    with TestClient(create_app(rt)) as client:
        assert client.get("/v1/models").status_code == 401
        wrong = client.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "Incorrect API key provided"
        assert client.get("/v1/models", headers={"Authorization": "Bearer from-the-env"}).status_code == 200


def test_listing_models_creates_no_mlflow_store(tmp_path) -> None:
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    bare = Runtime(FurnaceSettings(home=tmp_path / "bare", embedder="hash"))
    try:
        with TestClient(create_app(bare)) as client:  # answers are traced, a listing is not
            assert client.get("/v1/models").status_code == 200
        assert not (tmp_path / "bare" / "mlflow.db").exists()  # no registry in this home: none listed, none created
    finally:
        bare.close()


def test_model_failures_are_openai_errors_and_ledger_rows(rt, lab, monkeypatch) -> None:
    fake = FakeLLM([LLMTimeout("took too long"), LLMError("provider said no")])
    monkeypatch.setattr(rt, "llm", CachedLLM(fake))
    with TestClient(create_app(rt)) as client:
        slow = chat(client, "viral-copywriter", ("user", "hello"))
        failed = chat(client, "viral-copywriter", ("user", "hello again"))
    assert (
        slow["status"] == 504 and slow["error"]["type"] == "api_error" and "took too long" in slow["error"]["message"]
    )
    assert failed["status"] == 502 and failed["error"]["code"] == "model_error"
    assert [r.status for r in rt.llm.ledger.calls()] == ["LLMTimeout", "LLMError"]


def test_bad_requests(rt) -> None:
    with TestClient(create_app(rt)) as client:
        assert chat(client, "viral-copywriter")["error"]["code"] == "invalid_value"  # no messages at all
        assert chat(client, "viral-copywriter", ("user", "hi"), n=2)["error"]["param"] == "n"
        assert chat(client, "viral-copywriter", ("tool", "{}"), ("user", "hi"))["status"] == 400
        assert chat(client, "viral-copywriter@x", ("user", "hi"))["error"]["code"] == "model_not_found"
        assert client.post("/v1/chat/completions", content=b"[1, 2]").json()["error"]["code"] == "invalid_json"
        assert client.get("/v1/nothing-here").json()["error"]["code"] == "not_found"


@pytest.fixture(scope="module")
def plain_client(rt):
    """One app on the lab's runtime for the validation cases (a refused body makes no call)."""
    with TestClient(create_app(rt, trace=False)) as client:
        yield client


HI = [{"role": "user", "content": "hi"}]
MISSING, INVALID_TYPE, INVALID_VALUE = "missing_required_parameter", "invalid_type", "invalid_value"
DROP = object()  # a field left out of the body
PYTHON_REPRS = ("None", "True", "False", "{'", "['", "<class", "!r")

BAD_BODIES = {
    # field: what it is set to -> the code and the param of the 400
    "model-absent": ({"model": DROP}, MISSING, "model"),
    "model-null": ({"model": None}, MISSING, "model"),
    "model-integer": ({"model": 123}, INVALID_TYPE, "model"),
    "model-blank": ({"model": "  "}, INVALID_VALUE, "model"),
    "messages-absent": ({"messages": DROP}, MISSING, "messages"),
    "messages-string": ({"messages": "hi"}, INVALID_TYPE, "messages"),
    "messages-empty": ({"messages": []}, INVALID_VALUE, "messages"),
    "message-integer": ({"messages": [5]}, INVALID_TYPE, "messages[0]"),
    "role-absent": ({"messages": [{"content": "hi"}]}, MISSING, "messages[0].role"),
    "role-null": ({"messages": [{"role": None, "content": "hi"}]}, MISSING, "messages[0].role"),
    "role-integer": ({"messages": [{"role": 1, "content": "hi"}]}, INVALID_TYPE, "messages[0].role"),
    "role-tool": ({"messages": [{"role": "tool", "content": "{}"}, *HI]}, INVALID_VALUE, "messages[0].role"),
    "content-integer": ({"messages": [{"role": "user", "content": 5}]}, INVALID_TYPE, "messages[0].content"),
    "content-object": ({"messages": [{"role": "user", "content": {}}]}, INVALID_TYPE, "messages[0].content"),
    "part-string": ({"messages": [{"role": "user", "content": ["hi"]}]}, INVALID_TYPE, "messages[0].content[0]"),
    "part-no-type": (
        {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
        MISSING,
        "messages[0].content[0].type",
    ),
    "part-text-integer": (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
        INVALID_TYPE,
        "messages[0].content[0].text",
    ),
    "last-not-user": (
        {"messages": [*HI, {"role": "assistant", "content": "hello"}]},
        INVALID_VALUE,
        "messages[1].role",
    ),
    "last-empty": ({"messages": [{"role": "user", "content": " "}]}, INVALID_VALUE, "messages[0].content"),
    "n-string": ({"n": "2"}, INVALID_TYPE, "n"),
    "n-boolean": ({"n": True}, INVALID_TYPE, "n"),
    "n-decimal": ({"n": 1.5}, INVALID_TYPE, "n"),
    "n-two": ({"n": 2}, INVALID_VALUE, "n"),
    "seed-string": ({"seed": "7"}, INVALID_TYPE, "seed"),
    "stream-string": ({"stream": "yes"}, INVALID_TYPE, "stream"),
    "stream-zero": ({"stream": 0}, INVALID_TYPE, "stream"),
    "stream-options-string": ({"stream": True, "stream_options": "x"}, INVALID_TYPE, "stream_options"),
    "include-usage-string": (
        {"stream": True, "stream_options": {"include_usage": "yes"}},
        INVALID_TYPE,
        "stream_options.include_usage",
    ),
    "stream-options-without-stream": ({"stream_options": {"include_usage": True}}, INVALID_VALUE, "stream_options"),
}


@pytest.mark.parametrize(("fields", "code", "param"), list(BAD_BODIES.values()), ids=list(BAD_BODIES))
def test_a_bad_field_is_named_with_its_path_and_an_openai_code(plain_client, fields, code, param) -> None:
    body = {"model": "viral-copywriter", "messages": HI} | fields
    resp = plain_client.post("/v1/chat/completions", json={k: v for k, v in body.items() if v is not DROP})
    error = resp.json()["error"]
    assert resp.status_code == 400 and set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param)
    assert error["message"] and not any(r in error["message"] for r in PYTHON_REPRS), error["message"]
    if code == MISSING:
        assert error["message"] == f"Missing required parameter: '{param}'."
    if code == INVALID_TYPE:
        assert error["message"].startswith(f"Invalid type for '{param}': expected ")


def test_wrong_types_are_worded_as_openai_words_them(plain_client) -> None:
    def error(**fields) -> dict:
        body = {"model": "viral-copywriter", "messages": HI} | fields
        return plain_client.post("/v1/chat/completions", json=body).json()["error"]

    assert error(model=123)["message"] == "Invalid type for 'model': expected a string, but got an integer instead."
    assert error(n="2")["message"] == "Invalid type for 'n': expected an integer, but got a string instead."
    assert error(stream_options="x", stream=True)["message"].endswith("expected an object, but got a string instead.")
    assert error(n=2)["message"] == "Invalid value for 'n': only 1 is supported, got 2."
    assert error(stream_options={})["message"] == (
        "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    )


GOOD_BODIES = {
    "nulls-are-defaults": {"n": None, "seed": None, "stream": None, "stream_options": None},
    "n-one": {"n": 1, "stream": False},
    "developer-and-parts": {
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "hi"}],
            },
        ]
    },
    "stream-with-options": {"stream": True, "stream_options": {}},
    "stream-with-usage-null": {"stream": True, "stream_options": {"include_usage": None}},
}


@pytest.mark.parametrize("fields", list(GOOD_BODIES.values()), ids=list(GOOD_BODIES))
def test_well_typed_bodies_are_answered_and_furnace_does_not_repeat_the_text(plain_client, fields) -> None:
    body = {"model": "viral-copywriter", "messages": HI} | fields
    resp = plain_client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    if body.get("stream"):
        lines = [line.removeprefix("data: ") for line in resp.text.splitlines() if line.startswith("data: {")]
        chunks = [json.loads(line) for line in lines]
        assert "usage" not in chunks[-1]  # include_usage null: no usage chunk
        [extra] = [c["furnace"] for c in chunks if "furnace" in c]
    else:
        extra = resp.json()["furnace"]
    assert extra["speaker"] == "viral-copywriter@1" and "text" not in extra


def test_registry_aliases_are_models(tmp_path, _mlflow_template) -> None:
    from furnace.adapters import mlflow_prompts as mp

    lab = make_lab(tmp_path / "home")
    rt = lab.runtime
    shutil.copyfile(_mlflow_template, rt.settings.home / "mlflow.db")  # an initialised, empty MLflow store
    try:
        uri = rt.settings.tracking_uri
        mp.register_agent_prompt(rt.store, lab.agent.id, tracking_uri=uri, name="furnace-serve-lab", alias="champion")
        with TestClient(create_app(rt)) as client:
            models = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
            assert models["furnace-serve-lab@champion"]["agent"] == lab.agent.id
            assert "furnace-serve-lab@candidate" not in models
            out = chat(client, "furnace-serve-lab@champion", ("user", "Where do I begin?"))
            assert out["status"] == 200 and out["furnace"]["speaker"] == lab.agent.id
            assert chat(client, "furnace-serve-lab@candidate", ("user", "hi"))["error"]["code"] == "model_not_found"
    finally:
        rt.close()


def test_the_serve_command_binds_loopback_port_8000_by_default() -> None:
    from furnace.cli import cli

    result = CliRunner().invoke(cli, ["agent", "serve", "--help"])
    assert result.exit_code == 0
    assert "127.0.0.1" in result.output and "8000" in result.output and "FURNACE_SERVE_KEY" in result.output
    assert CliRunner().invoke(cli, ["agent", "serve", "--port", "70000"]).exit_code == 2
