"""The response zoo (tests/llm/zoo): recorded shapes of real replies, replayed through the stub
server for every task that expects JSON — each shape is read into the task's value, a cut-off reply
is re-asked once (never an identical retry), and an error body echoing the key never leaks it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from furnace.adapters.litellm_client import LiteLLMClient
from furnace.assistant.intent import CLASSIFY_SCHEMA
from furnace.domain.errors import LLMError, LLMMalformedOutput
from furnace.llm.seam import LLMRequest, TaskKind

from .conftest import FAKE_KEY
from .stub_server import Reply, StubServer
from .test_cache_keys import BUILDERS, persona

ZOO = Path(__file__).parent / "zoo"
READABLE = ["openai_json_mode", "reasoning_think", "local_prose_fence", "local_prose_inline"]

# A valid answer per task kind that expects JSON (the stub sends it inside each recorded shape).
ANSWERS: dict[TaskKind, Any] = {
    TaskKind.IDENTITY: {"identity": "You are a tea master and a coach."},
    TaskKind.REWRITE: {"principle": "Keep answers short."},
    TaskKind.ADJUDICATE: {"choice": 0, "reason": "the stricter option"},
    TaskKind.ROUTE: {"member": "a@1", "reason": "tea questions"},
    TaskKind.JUDGE: {"score": 0.75, "reason": "names the water temperature"},
    TaskKind.GENERATE: {"title": "Green tea", "body": "Brew at 80 degrees. Steep two minutes."},
    TaskKind.REVISE: {"title": "Tea", "body": "Brew it.", "note": "", "applied": ["make it shorter"]},
    TaskKind.EXTRACT_PREFERENCES: {"preferences": [{"dimension": "length", "value": "concise", "weight": 0.6}]},
    TaskKind.PLAN: {"speakers": [{"member": "tea-master", "task": "answer"}], "budget": {"max_speakers": 1}},
    TaskKind.REFLECT: {
        "edits": [{"kind": "add_principle", "text": "Name the water temperature."}],
        "reason": "missing",
    },
    TaskKind.ASSIST: {"intent": "top_agents", "confidence": 0.8},
}


def _request(task: TaskKind) -> LLMRequest:
    request = BUILDERS[task](persona())
    if task is TaskKind.ASSIST:  # the assistant's classify call
        request = request.model_copy(update={"json_schema": CLASSIFY_SCHEMA})
    assert request.json_schema is not None, task
    return request


def _shape(name: str, answer: Any = None) -> Reply:
    text = (ZOO / f"{name}.json").read_text(encoding="utf-8")
    if answer is not None:  # the JSON answer goes in as the text of the message content
        text = text.replace('"{{JSON}}"', json.dumps(json.dumps(answer)))
        text = text.replace("{{JSON}}", json.dumps(json.dumps(answer))[1:-1])
    data = json.loads(text.replace("{{KEY}}", FAKE_KEY))
    return Reply(status=data["status"], body=data["body"])


def _client(stub: StubServer, *, retries: int = 2) -> LiteLLMClient:
    return LiteLLMClient(
        "openai/stub", api_base=stub.api_base, api_key=SecretStr(FAKE_KEY), max_retries=retries, sleep=lambda s: None
    )


def test_every_json_task_is_in_the_zoo() -> None:
    json_tasks = {t for t in TaskKind if t is TaskKind.ASSIST or BUILDERS[t](persona()).json_schema is not None}
    assert json_tasks == set(ANSWERS)


@pytest.mark.parametrize("shape", READABLE)
@pytest.mark.parametrize("task", sorted(ANSWERS), ids=lambda t: t.value)
def test_each_recorded_shape_is_read_into_the_tasks_value(stub, shape: str, task: TaskKind) -> None:
    stub.push(_shape(shape, ANSWERS[task]))
    done = _client(stub).complete(_request(task))
    assert done.parsed == ANSWERS[task] and done.attempts == 1 and stub.calls == 1
    assert done.usage.total_tokens > 0


@pytest.mark.parametrize("task", sorted(ANSWERS), ids=lambda t: t.value)
def test_a_cut_off_reply_is_re_asked_once_with_the_problem(stub, task: TaskKind) -> None:
    stub.push(_shape("truncated_length"), _shape("openai_json_mode", ANSWERS[task]))
    done = _client(stub).complete(_request(task))
    assert done.parsed == ANSWERS[task] and done.attempts == 2 and stub.calls == 2
    first, again = stub.requests
    assert again["messages"] != first["messages"]  # never an identical retry
    assert "finish_reason=length" in again["messages"][-1]["content"]


def test_a_reply_cut_off_every_time_is_one_clear_error(stub) -> None:
    stub.push(_shape("truncated_length"), _shape("truncated_length"))
    with pytest.raises(LLMMalformedOutput) as err:
        _client(stub).complete(_request(TaskKind.IDENTITY))
    text = str(err.value)
    assert "\n" not in text and text.startswith("identity on openai/stub") and "cut off" in text
    assert stub.calls == 2  # one re-ask, then no more (re-asks count against the same attempts)
    assert getattr(err.value, "excerpt", "").startswith('{"identity"')


@pytest.mark.parametrize("task", sorted(ANSWERS), ids=lambda t: t.value)
def test_an_error_body_echoing_the_key_fails_at_once_and_never_leaks_it(stub, task: TaskKind) -> None:
    stub.push(_shape("error_echo_authorization"))
    with pytest.raises(LLMError) as err:
        _client(stub).complete(_request(task))
    assert stub.calls == 1  # a rejected key is not retried
    text = f"{err.value} {getattr(err.value, 'excerpt', '')} {err.value.__cause__!r} {err.value.__context__!r}"
    assert FAKE_KEY not in text and FAKE_KEY[-12:] not in text
    assert "FURNACE_API_KEY" in str(err.value) or "API key" in str(err.value)
