"""The server's app through FastAPI's TestClient (no socket): the persona's prompt from the synthesis
cache, earlier turns, pre-warming, the key from FURNACE_SERVE_KEY, model failures, registry aliases."""

from __future__ import annotations

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
