"""The OpenAI SDK and litellm, as clients of ``furnace agent serve``: list models, chat, stream, the key;
every answer is the one ``furnace agent answer`` gives and is in the call ledger under the response id."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from click.testing import CliRunner

from .conftest import ELIXIRS, KEY

QUESTION = "How should I start learning statistics?"


@pytest.fixture(scope="module")
def client(live) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.base_url, api_key=KEY, max_retries=0)


def agent_answer(lab, agent_id: str, message: str) -> dict:
    """What ``furnace agent answer ID MESSAGE --json`` prints on the lab's home (the CLI path)."""
    from furnace.cli import cli

    lab.runtime.close()  # the CLI's runtime and the server's open the live store on their own
    result = CliRunner().invoke(
        cli,
        ["--home", str(lab.runtime.settings.home), "agent", "answer", agent_id, message, "--json"],
        env={"FURNACE_EMBEDDER": "hash"},  # the lab's embedder: a committee routes by meaning with it
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_models_lists_agents_and_elixirs(client, lab) -> None:
    models = {m.id: m for m in client.models.list()}
    assert {lab.agent.id, lab.committee.id, *ELIXIRS} <= set(models)
    assert models[lab.agent.id].model_extra["kind"] == "agent"
    assert models["viral-copywriter"].model_extra["kind"] == "elixir"
    assert all(m.object == "model" and m.owned_by == "furnace" for m in models.values())
    assert client.models.retrieve(lab.committee.id).id == lab.committee.id


def test_chat_answers_as_agent_answer_does_with_usage_and_a_ledger_row(client, lab) -> None:
    resp = client.chat.completions.create(model=lab.agent.id, messages=[{"role": "user", "content": QUESTION}])
    text = resp.choices[0].message.content
    assert text == agent_answer(lab, lab.agent.id, QUESTION)["text"]
    assert resp.model == lab.agent.id and resp.object == "chat.completion"
    assert resp.choices[0].finish_reason == "stop" and resp.choices[0].message.role == "assistant"
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    rows = lab.runtime.llm.ledger.calls(resp.id)
    assert [(r.task, r.run_id) for r in rows] == [("reply", resp.id)]
    assert resp.model_extra["furnace"]["calls"] == 1 and resp.model_extra["furnace"]["leader"] is None


def test_a_committee_is_routed_and_says_who_led(client, lab) -> None:
    message = "Which statistical test fits two small samples?"
    resp = client.chat.completions.create(model=lab.committee.id, messages=[{"role": "user", "content": message}])
    cli = agent_answer(lab, lab.committee.id, message)
    extra = resp.model_extra["furnace"]
    assert resp.choices[0].message.content == cli["text"]
    assert (extra["leader"], extra["reason"]) == (cli["leader"], cli["reason"])
    assert extra["leader"].split("@")[0] in {"data-science-mentor", "viral-copywriter"}
    assert sorted(r.task for r in lab.runtime.llm.ledger.calls(resp.id)) == ["reply"]  # routed by meaning
    assert extra["calls"] + extra["cached_calls"] == 1 and extra["fallback"] is False and "text" not in extra


def test_an_elixir_answers_too_and_a_version_can_be_named(client, lab) -> None:
    first = client.chat.completions.create(model="viral-copywriter", messages=[{"role": "user", "content": "hi"}])
    pinned = client.chat.completions.create(model="viral-copywriter@1", messages=[{"role": "user", "content": "hi"}])
    assert first.choices[0].message.content and pinned.choices[0].message.content == first.choices[0].message.content
    assert first.model_extra["furnace"]["speaker"] == "viral-copywriter@1"
    assert len(lab.runtime.llm.ledger.calls(pinned.id)) == 1


def test_streaming_with_the_openai_sdk(client, lab) -> None:
    plain = client.chat.completions.create(model=lab.agent.id, messages=[{"role": "user", "content": QUESTION}])
    chunks = list(
        client.chat.completions.create(
            model=lab.agent.id,
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert {c.object for c in chunks} == {"chat.completion.chunk"} and len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content and len([c for c in chunks if c.choices]) > 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == plain.usage.total_tokens
    assert len(lab.runtime.llm.ledger.calls(chunks[0].id)) == 1  # the streamed answer's call, a cache hit
    assert lab.runtime.llm.ledger.calls(chunks[0].id)[0].cached


def test_the_sse_lines_end_with_done(live, lab) -> None:
    body = {"model": "socratic-math-tutor", "stream": True, "messages": [{"role": "user", "content": "Why?"}]}
    with httpx.stream(
        "POST", f"{live.base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}
    ) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in resp.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    first = json.loads(lines[0].removeprefix("data: "))
    assert first["choices"][0]["delta"]["role"] == "assistant"


def test_litellm_as_a_client_plain_and_streaming(live, client, lab) -> None:
    import litellm

    messages = [{"role": "user", "content": QUESTION}]
    expected = client.chat.completions.create(model=lab.agent.id, messages=messages).choices[0].message.content
    kw = dict(model=f"openai/{lab.agent.id}", api_base=live.base_url, api_key=KEY, messages=messages)
    plain = litellm.completion(**kw)
    assert plain.choices[0].message.content == expected and plain.usage.total_tokens > 0
    streamed = "".join(c.choices[0].delta.content or "" for c in litellm.completion(stream=True, **kw) if c.choices)
    assert streamed == expected


def test_errors_are_openai_style(client, live) -> None:
    with pytest.raises(openai.NotFoundError) as nf:
        client.chat.completions.create(model="no-such-persona", messages=[{"role": "user", "content": "hi"}])
    assert nf.value.code == "model_not_found" and nf.value.body["param"] == "model"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-persona")
    auth = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    url = f"{live.base_url}/chat/completions"
    bad = httpx.post(url, content=b'{"model": "x", "messages": [', headers=auth)
    assert bad.status_code == 400 and set(bad.json()["error"]) == {"message", "type", "param", "code"}
    assert bad.json()["error"]["type"] == "invalid_request_error"
    missing = httpx.post(url, json={"model": "viral-copywriter"}, headers=auth)
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "messages"
    with pytest.raises(openai.BadRequestError):  # the last message must be the user's
        client.chat.completions.create(model="viral-copywriter", messages=[{"role": "assistant", "content": "hi"}])


def test_the_bearer_key(live) -> None:
    with pytest.raises(openai.AuthenticationError) as wrong:
        openai.OpenAI(base_url=live.base_url, api_key="wrong-key", max_retries=0).models.list()
    assert wrong.value.status_code == 401 and wrong.value.code == "invalid_api_key"
    none = httpx.get(f"{live.base_url}/models")
    assert none.status_code == 401 and none.json()["error"]["code"] == "invalid_api_key"
    assert none.headers["www-authenticate"] == "Bearer"
    assert KEY not in none.text
