"""Snapshot tests of the fusion prompts, parsers, and the offline fusion handlers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from furnace.domain.errors import LLMMalformedOutput
from furnace.fusion.operators import prompts
from furnace.llm.offline import fusion_tasks
from furnace.llm.offline.engine import OfflineEngine
from furnace.llm.seam import Completion, LLMRequest

from .conftest import COACH, WIT, make_elixir

SNAPSHOTS = Path(__file__).parent / "snapshots"


def _text(request: LLMRequest) -> str:
    parts = [f"task: {request.task.value}  temperature: {request.temperature}  seed: {request.seed}"]
    parts += [f"--- {m.role}\n{m.content}" for m in request.messages]
    parts.append("--- inputs\n" + json.dumps(request.inputs, ensure_ascii=False, indent=1, sort_keys=True))
    return "\n".join(parts) + "\n"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if not path.exists() or os.environ.get("UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} prompt changed (UPDATE_SNAPSHOTS=1 to accept)"


def parents():
    return [make_elixir("Data Coach", **COACH), make_elixir("Travel Wit", **WIT)]


def test_identity_prompt_snapshot() -> None:
    check_snapshot("identity", _text(prompts.build_identity_request(parents(), language="en")))


def test_rewrite_prompt_snapshot() -> None:
    check_snapshot("rewrite", _text(prompts.build_rewrite_request("回答要简短。", language="zh", seed=3)))


def test_adjudicate_prompt_snapshot() -> None:
    options = [
        {"label": "must use markdown", "value": True, "priority": 100, "source": "A"},
        {"label": "no markdown (plain text)", "value": False, "priority": 100, "source": "B"},
    ]
    check_snapshot(
        "adjudicate",
        _text(
            prompts.build_adjudicate_request("constraints.must_use_markdown", options, rule="plain_text", language="en")
        ),
    )


def test_route_prompt_snapshot() -> None:
    members = [
        {"ref": "a@1", "name": "A", "expertise": ["statistics"]},
        {"ref": "b@2", "name": "B", "expertise": ["travel"]},
    ]
    check_snapshot("route", _text(prompts.build_route_request("How to travel?", members, language="en")))


def _c(text: str = "", parsed=None) -> Completion:
    return Completion(text=text, parsed=parsed, model="m")


def test_parsers() -> None:
    assert prompts.parse_identity(_c('{"identity": "You are X."}')) == "You are X."
    assert prompts.parse_identity(_c('Sure! {"identity": "You are\\n Y."} Enjoy.')) == "You are Y."
    with pytest.raises(LLMMalformedOutput, match="identity on m"):
        prompts.parse_identity(_c("You are Y."))  # no JSON: a malformed reply, not a persona
    with pytest.raises(LLMMalformedOutput):
        prompts.parse_identity(_c("  "))
    assert prompts.parse_adjudicate(_c(parsed={"choice": 1, "reason": "r"}), 2) == (1, "r")
    with pytest.raises(LLMMalformedOutput):
        prompts.parse_adjudicate(_c(parsed={"choice": 2, "reason": "r"}), 2)
    with pytest.raises(LLMMalformedOutput):
        prompts.parse_adjudicate(_c(parsed={"choice": True, "reason": "r"}), 2)
    assert prompts.parse_route(_c(parsed={"member": "b", "reason": ""}), ["a@1", "b@2"]) == "b@2"
    with pytest.raises(LLMMalformedOutput):
        prompts.parse_route(_c(parsed={"member": "c@1"}), ["a@1", "b@2"])
    assert prompts.parse_rewrite(_c(parsed={"principle": "Reply briefly."})) == "Reply briefly."


def _run(request: LLMRequest):
    return OfflineEngine().complete(request).parsed


def test_offline_identity_en_and_zh() -> None:
    assert _run(prompts.build_identity_request(parents(), language="en")) == {
        "identity": "You are a seasoned data scientist and a witty travel writer in one voice."
    }
    zh = [
        make_elixir("诗词向导", language="zh", identity="你是一位古典诗词向导，擅长讲解意象。", priority=100),
        make_elixir("家常大厨", language="zh", identity="你是一位家常菜大厨。", priority=200),
    ]
    assert (
        _run(prompts.build_identity_request(zh, language="zh"))["identity"]
        == "你是一位家常菜大厨，同时也是一位古典诗词向导。"
    )
    assert (
        fusion_tasks.role_phrase("A practical data-science mentor who teaches.", "en")
        == "a practical data-science mentor"
    )
    # commas between adjectives are part of the role; a comma after the noun ends it
    roles = {
        "A warm, patient coach who helps people untangle stress.": "a warm, patient coach",
        "A calm, dry, exact reviewer.": "a calm, dry, exact reviewer",
        "A data engineer, writer and teacher.": "a data engineer",
        "You are a chef, who cooks.": "a chef",
    }
    for identity, role in roles.items():
        assert fusion_tasks.role_phrase(identity, "en") == role, identity


def test_offline_rewrite_is_seeded_and_changes_wording() -> None:
    for text, lang in [
        ("Answer briefly.", "en"),
        ("When unsure, ask a question.", "en"),
        ("回答要简短。", "zh"),
        ("如果不确定，先提问。", "zh"),
    ]:
        outs = {_run(prompts.build_rewrite_request(text, language=lang, seed=s))["principle"] for s in range(4)}
        assert text not in outs
        again = _run(prompts.build_rewrite_request(text, language=lang, seed=0))["principle"]
        assert again == _run(prompts.build_rewrite_request(text, language=lang, seed=0))["principle"]
    # no rule fits: the principle comes back as it was, never with a stock prefix
    assert _run(prompts.build_rewrite_request("Zebra quux.", language="en", seed=0))["principle"] == "Zebra quux."


def test_offline_adjudicate_priority_then_rule() -> None:
    def opts(p1, p2, v1, v2):
        return [
            {"label": str(v1), "value": v1, "priority": p1, "source": "A"},
            {"label": str(v2), "value": v2, "priority": p2, "source": "B"},
        ]

    out = _run(prompts.build_adjudicate_request("f", opts(100, 200, 300, 150), rule="stricter", language="en"))
    assert out["choice"] == 1 and "priority" in out["reason"]
    out = _run(prompts.build_adjudicate_request("f", opts(100, 100, 150, 300), rule="stricter", language="en"))
    assert out["choice"] == 0 and "stricter" in out["reason"]
    out = _run(prompts.build_adjudicate_request("f", opts(100, 100, True, False), rule="plain_text", language="zh"))
    assert out["choice"] == 1 and "优先级相同" in out["reason"]


def test_offline_route_zh() -> None:
    members = [
        {"ref": "a@1", "name": "诗", "expertise": ["古典诗词"]},
        {"ref": "b@1", "name": "厨", "expertise": ["家常菜", "烹饪"]},
    ]
    out = _run(prompts.build_route_request("红烧肉的家常菜做法？", members, language="zh"))
    assert out["member"] == "b@1"
