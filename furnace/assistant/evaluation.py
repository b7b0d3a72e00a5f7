"""Measure the assistant on a question set: intent, entities and the result's shape, per question.

Used by the tests (every question must pass) and by ``make bench`` (accuracy, the share answered
by rules vs the model, tuned vs held-out questions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta
from furnace.assistant.queries import COST_COLUMNS, SHAPES
from furnace.domain.intents import cost_group


@dataclass(frozen=True)
class Verdict:
    question: str
    expected: str
    intent: str | None
    source: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(assistant: Assistant, item: dict[str, Any], *, latest_experiment: str | None) -> Verdict:
    """Ask ``item['q']`` in a fresh session and list what the answer got wrong (empty: right)."""
    events = list(assistant.ask(item["q"], AssistantState()))
    done = events[-1]
    meta = next((e for e in events if isinstance(e, Meta)), None)
    problems: list[str] = []
    intent = meta.intent if meta else None
    if intent != item["intent"]:
        problems.append(f"intent {intent} != {item['intent']}")
    if not isinstance(done, Done) or done.result is None:
        problems.append(f"no result: {getattr(done, 'lead', '')[:120]}")
    scope = meta.scope if meta else None
    for key in ("persona", "experiment"):
        want = item.get(key)
        if want == "latest":
            want = latest_experiment
        got = getattr(scope, key) if scope else None
        if want is not None and got != want:
            problems.append(f"{key} {got} != {want}")
    if "agents" in item:
        named = sum(1 for word in item["q"].split() if word.lower().startswith("agt-"))
        if named != item["agents"]:
            problems.append(f"agents {named} != {item['agents']}")
    if item.get("group") and cost_group(item["q"]) != item["group"]:
        problems.append(f"group {cost_group(item['q'])} != {item['group']}")
    if isinstance(done, Done) and done.result is not None and intent in SHAPES:
        expected_columns = list(SHAPES[intent].columns)
        if intent == "costs":
            expected_columns = expected_columns[1:]
            got_columns = done.result.columns[1:]
            if got_columns != list(COST_COLUMNS):
                problems.append(f"columns {done.result.columns}")
        elif done.result.columns != expected_columns:
            problems.append(f"columns {done.result.columns} != {expected_columns}")
    return Verdict(item["q"], item["intent"], intent, meta.intent_source if meta else "none", problems)


def accuracy(verdicts: list[Verdict]) -> dict[str, float]:
    """Share right, and the share of questions the rules answered without the model."""
    n = len(verdicts) or 1
    return {
        "questions": len(verdicts),
        "accuracy": sum(v.ok for v in verdicts) / n,
        "by_rules": sum(v.source == "rules" for v in verdicts) / n,
        "by_model": sum(v.source.startswith("model") for v in verdicts) / n,
    }
