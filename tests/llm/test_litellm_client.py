"""LiteLLMClient over real HTTP against the OpenAI-compatible stub on 127.0.0.1."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from furnace.adapters.litellm_client import LiteLLMClient
from furnace.domain.errors import LLMError, LLMMalformedOutput, LLMTimeout
from furnace.llm.seam import LLM, TaskKind, system_user

from .stub_server import Reply, chat_body, error_body

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}


def client(stub, key: str, **kwargs) -> LiteLLMClient:
    kwargs.setdefault("backoff_s", 0.01)
    return LiteLLMClient("openai/stub", api_base=stub.api_base, api_key=SecretStr(key), **kwargs)


def ask(**kwargs):
    return system_user(TaskKind.REPLY, "You are terse.", "Say hello.", **kwargs)


def test_success_records_text_usage_latency_and_sends_params(stub, fake_key):
    stub.push(Reply(body=chat_body("Hello there.", prompt_tokens=21, completion_tokens=3)))
    llm = client(stub, fake_key)
    assert isinstance(llm, LLM)

    done = llm.complete(ask(seed=7, temperature=0.2, max_tokens=50))

    assert done.text == "Hello there."
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (21, 3)
    assert done.model == "openai/stub" and done.cached is False
    assert done.latency_s > 0 and done.cost_usd == 0.0  # no price known for a stub
    assert stub.calls == 1
    sent = stub.requests[0]
    assert sent["seed"] == 7 and sent["temperature"] == 0.2 and sent["max_tokens"] == 50
    assert sent["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."},
    ]
    assert "response_format" not in sent
    assert stub.headers[0].get("authorization") == f"Bearer {fake_key}"  # the key goes only to the server


def test_schema_request_sends_json_schema_and_parses(stub, fake_key):
    stub.push(Reply(body=chat_body('{"score": 0.8, "reason": "on topic"}')))
    done = client(stub, fake_key).complete(ask(json_schema=SCHEMA))
    assert done.parsed == {"score": 0.8, "reason": "on topic"}
    fmt = stub.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA


def test_rate_limit_then_success_makes_two_http_calls(stub, fake_key):
    stub.push(Reply(status=429, body=error_body("slow down", "rate_limit_exceeded")), Reply(body=chat_body("ok")))
    done = client(stub, fake_key).complete(ask())
    assert done.text == "ok"
    assert stub.calls == 2 and done.attempts == 2


def test_three_server_errors_raise_after_exactly_three_attempts(stub, fake_key):
    stub.push(*[Reply(status=500, body=error_body("boom")) for _ in range(3)], Reply(body=chat_body("too late")))
    llm = client(stub, fake_key, max_retries=2)
    with pytest.raises(LLMError) as info:
        llm.complete(ask())
    assert stub.calls == 3
    assert "3 attempts" in str(info.value)
    assert info.value.transient


def test_client_errors_are_not_retried(stub, fake_key):
    stub.push(Reply(status=400, body=error_body("bad request", "invalid_request_error")))
    with pytest.raises(LLMError) as info:
        client(stub, fake_key).complete(ask())
    assert stub.calls == 1 and not info.value.transient


def test_invalid_reply_is_reasked_once_with_the_error_then_raises(stub, fake_key):
    stub.push(
        Reply(body=chat_body("not json at all", prompt_tokens=10, completion_tokens=4)),
        Reply(body=chat_body('{"score": 3, "reason": "out of range"}', prompt_tokens=30, completion_tokens=8)),
        Reply(body=chat_body('{"score": 0.5, "reason": "never asked for"}')),
    )
    with pytest.raises(LLMMalformedOutput) as info:
        client(stub, fake_key).complete(ask(json_schema=SCHEMA))
    assert stub.calls == 2  # one re-ask, never a third identical try
    first, second = stub.requests
    assert first["messages"] != second["messages"]
    assert second["messages"][-2] == {"role": "assistant", "content": "not json at all"}
    assert "no JSON object found" in second["messages"][-1]["content"]
    err = info.value
    assert "reply on openai/stub" in str(err) and "score" in str(err) and not err.transient
    assert err.attempts == 2 and err.spent[0].prompt_tokens == 40  # failed attempts are paid for
    assert "out of range" in err.excerpt


def test_reasks_zero_fails_at_once(stub, fake_key):
    stub.push(Reply(body=chat_body("nope")), Reply(body=chat_body('{"score": 0.5, "reason": "x"}')))
    with pytest.raises(LLMMalformedOutput):
        client(stub, fake_key, reasks=0).complete(ask(json_schema=SCHEMA))
    assert stub.calls == 1


def test_reask_uses_the_retry_budget(stub, fake_key):
    stub.push(Reply(status=500, body=error_body("boom")), Reply(body=chat_body("prose only")))
    with pytest.raises(LLMError):
        client(stub, fake_key, max_retries=1).complete(ask(json_schema=SCHEMA))
    assert stub.calls == 2


@pytest.mark.parametrize(
    "reply",
    [
        'Here is the verdict: {"score": 0.5, "reason": "fine"} Hope that helps!',
        '<think>The answer {maybe} needs care.</think>\n{"score": 0.5, "reason": "fine"}',
        '```jsonc\n{"score": 0.5, "reason": "fine"}\n```',
        'Sure.\n```\n{"score": 0.5, "reason": "fine"}\n```\nDone.',
    ],
)
def test_json_is_found_in_prose_fences_and_think_blocks(stub, fake_key, reply):
    stub.push(Reply(body=chat_body(reply)))
    done = client(stub, fake_key).complete(ask(json_schema=SCHEMA))
    assert done.parsed == {"score": 0.5, "reason": "fine"} and stub.calls == 1 and done.attempts == 1


def test_retry_after_seconds_is_honoured_and_capped(stub, fake_key):
    slept: list[float] = []
    stub.push(
        Reply(status=429, body=error_body("slow"), headers={"Retry-After": "5"}),
        Reply(status=503, body=error_body("busy"), headers={"Retry-After": "120"}),
        Reply(body=chat_body("ok")),
    )
    llm = client(stub, fake_key, sleep=slept.append, max_retry_after_s=30.0)
    assert llm.complete(ask()).text == "ok"
    assert slept[0] >= 5.0 and slept[1] == 30.0


def test_retry_after_http_date():
    from datetime import UTC, datetime

    from furnace.adapters.litellm_client import parse_retry_after

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:07 GMT", now=now) == 7.0
    assert parse_retry_after("3", now=now) == 3.0 and parse_retry_after("soon", now=now) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_fail_at_once(stub, fake_key, status):
    stub.default = Reply(status=status, body=error_body("no"))
    with pytest.raises(LLMError) as info:
        client(stub, fake_key, max_retries=3).complete(ask())
    assert stub.calls == 1 and not info.value.transient


@pytest.mark.parametrize("status", [408, 409, 502])
def test_transient_statuses_are_retried(stub, fake_key, status):
    stub.push(Reply(status=status, body=error_body("later")), Reply(body=chat_body("ok")))
    assert client(stub, fake_key).complete(ask()).text == "ok" and stub.calls == 2


def test_rejected_key_names_the_variable(stub, fake_key):
    stub.default = Reply(status=401, body=error_body("invalid key"))
    with pytest.raises(LLMError) as info:
        client(stub, fake_key).complete(ask())
    assert "OPENAI_API_KEY" in str(info.value) and "HTTP 401" in str(info.value)


def test_missing_key_names_the_variable_without_a_request(stub, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(LLMError) as info:
        LiteLLMClient("deepseek/deepseek-chat").complete(ask())
    assert "set DEEPSEEK_API_KEY" in str(info.value) and not info.value.transient


def test_keyless_local_server_works(stub, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert LiteLLMClient("openai/local", api_base=stub.api_base).complete(ask()).text == "hello from the stub"


def test_context_length_fails_at_once(stub, fake_key):
    stub.default = Reply(
        status=400, body=error_body("This model's maximum context length is 4096 tokens", "invalid_request_error")
    )
    with pytest.raises(LLMError) as info:
        client(stub, fake_key).complete(ask())
    assert stub.calls == 1 and "context window" in str(info.value)


def test_malformed_then_valid_succeeds_and_sums_usage(stub, fake_key):
    stub.push(
        Reply(body=chat_body("{broken", prompt_tokens=10, completion_tokens=2)),
        Reply(body=chat_body('```json\n{"score": 0.5, "reason": "fine"}\n```', prompt_tokens=10, completion_tokens=9)),
    )
    done = client(stub, fake_key).complete(ask(json_schema=SCHEMA))
    assert done.parsed == {"score": 0.5, "reason": "fine"}
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (20, 11)
    assert stub.calls == 2 and done.attempts == 2


def test_timeout_raises_llm_timeout(stub, fake_key):
    stub.push(*[Reply(body=chat_body("late"), delay_s=1.5) for _ in range(2)])
    llm = client(stub, fake_key, timeout_s=0.3, max_retries=1)
    with pytest.raises(LLMTimeout) as info:
        llm.complete(ask())
    assert stub.calls == 2 and "timed out" in str(info.value)


def test_retries_zero_means_one_attempt(stub, fake_key):
    stub.push(Reply(status=503, body=error_body("unavailable")))
    with pytest.raises(LLMError):
        client(stub, fake_key, max_retries=0).complete(ask())
    assert stub.calls == 1


@pytest.mark.parametrize("status", [401, 429, 500])
def test_key_never_appears_in_errors(stub, fake_key, status):
    # A hostile server that echoes the Authorization header back in its error.
    echo = lambda payload: error_body(f"Incorrect API key provided: {fake_key} (Bearer {fake_key})")  # noqa: E731
    stub.default = Reply(status=status, body=echo)
    llm = client(stub, fake_key, max_retries=1)
    with pytest.raises(LLMError) as info:
        llm.complete(ask())
    err = info.value
    texts = [str(err), repr(err), repr(llm), str(err.__cause__), str(err.__context__)]
    assert all(fake_key not in t for t in texts)
    assert err.__cause__ is None and (err.__context__ is None or fake_key not in repr(err.__context__))
    assert fake_key[-12:] not in str(err)


def test_repr_hides_key(stub, fake_key):
    assert fake_key not in repr(client(stub, fake_key))


def test_key_is_not_in_traceback_locals(stub, fake_key):
    stub.default = Reply(status=401, body=error_body("no"))
    with pytest.raises(LLMError) as info:
        client(stub, fake_key).complete(ask())
    tb = info.value.__traceback__
    while tb is not None:
        for name, value in tb.tb_frame.f_locals.items():
            if name != "fake_key":
                assert fake_key not in repr(value), name
        tb = tb.tb_next


def test_key_is_not_logged(stub, fake_key):
    """Even at DEBUG, on every logger litellm, openai and httpx use, the key never shows."""
    import io
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    names = ["", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai", "httpx", "httpcore", "furnace"]
    loggers = [logging.getLogger(n) for n in names]
    saved = [(lg.level, lg.handlers[:]) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        stub.default = Reply(status=500, body=error_body(f"echo {fake_key}"))
        with pytest.raises(LLMError):
            client(stub, fake_key, max_retries=1).complete(ask())
    finally:
        for lg, (level, handlers) in zip(loggers, saved, strict=False):
            lg.setLevel(level)
            lg.handlers[:] = handlers
    text = stream.getvalue()
    assert "500" in text  # the loggers did record the failure
    assert fake_key not in text
