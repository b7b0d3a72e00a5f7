"""The one structured-output path: JSON extraction, schema checks, re-asks, task reply models."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from furnace.domain.errors import LLMMalformedOutput
from furnace.llm.seam import Completion, TaskKind, system_user
from furnace.llm.structured import NoJSON, check_schema, extract_json, parse_reply, read_reply, reask, schema_of


class Verdict(BaseModel):
    score: float = Field(ge=0, le=1)
    reason: str


@pytest.mark.parametrize(
    "text",
    [
        '{"score": 1, "reason": "r"}',
        'Here is the verdict:\n{"score": 1, "reason": "r"}\nLet me know!',
        '```json\n{"score": 1, "reason": "r"}\n```',
        '```JSON5\n{"score": 1, "reason": "r"}\n```',
        '```\n{"score": 1, "reason": "r"}\n```',
        '<think>maybe {"score": 0} is wrong</think>{"score": 1, "reason": "r"}',
        '<reasoning>\nweigh {it}\n</reasoning>\n\nAnswer: {"score": 1, "reason": "r"}',
        '{"score": 1, "reason": "r"}\n<think>unterminated thoughts',
    ],
)
def test_extracts_the_json_object(text: str) -> None:
    assert extract_json(text) == {"score": 1, "reason": "r"}


def test_nested_braces_in_prose_are_skipped() -> None:
    assert extract_json('Use {braces} like {"a": {"b": [1, 2]}} ok') == {"a": {"b": [1, 2]}}


@pytest.mark.parametrize(("text", "problem"), [("no json here", "no JSON object"), ('{"score": 1, "rea', "cut off")])
def test_no_json_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(NoJSON, match=problem):
        extract_json(text)


def test_schema_comes_from_the_model_and_checks_values() -> None:
    schema = schema_of(Verdict)
    assert schema["required"] == ["score", "reason"]
    assert check_schema({"score": 0.5, "reason": "x"}, schema) is None
    assert "score" in (check_schema({"score": 3, "reason": "x"}, schema) or "")
    assert read_reply('Sure: {"score": 2, "reason": "x"}', schema)[1] is not None


def test_reask_adds_the_reply_and_the_problem() -> None:
    request = system_user(TaskKind.JUDGE, "judge", "this", json_schema=schema_of(Verdict))
    again = reask(request, "not json", "no JSON object found in the reply")
    assert again.messages[: len(request.messages)] == request.messages
    assert [m.role for m in again.messages[-2:]] == ["assistant", "user"]
    assert "no JSON object found" in again.messages[-1].content
    assert again.cache_key("m") != request.cache_key("m")


def test_parse_reply_names_task_model_and_problem() -> None:
    good = parse_reply(Completion(text='ok {"score": 0.2, "reason": "r"}', model="m"), Verdict, task="judge")
    assert good.score == 0.2
    with pytest.raises(LLMMalformedOutput) as info:
        parse_reply(Completion(text='{"score": 7, "reason": "r"}', model="local/qwen"), Verdict, task="judge")
    message = str(info.value)
    assert message.startswith("judge on local/qwen:") and "score" in message and "\n" not in message
    assert '"score": 7' in info.value.excerpt
