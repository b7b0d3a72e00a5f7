"""Measure the assistant on a question set: intent, entities and the result's shape, per question.

Used by the tests (every question must pass) and by ``make bench`` (accuracy, the share answered
by rules vs the model, tuned vs held-out questions).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta
from furnace.assistant.queries import COST_COLUMNS, SHAPES
from furnace.assistant.scope import Scope
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


Truth = Callable[[str, Any], Any]
"""``truth(fact, arg)``: the expected value of a fact, computed by the caller from its own data."""
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _expected_lock(want: dict[str, Any] | None, now: datetime) -> Scope | None:
    if want is None:
        return None
    fields = {k: v for k, v in want.items() if k in ("persona", "experiment", "agent", "operator")}
    if "since_hours" in want:
        fields["since"] = now - timedelta(hours=want["since_hours"])
    if "since_days" in want:
        fields["since"] = now - timedelta(days=want["since_days"])
    if want.get("since_today"):
        fields["since"] = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return Scope(**fields)


def check_dialog(assistant: Assistant, item: dict[str, Any], truth: Truth, *, now: datetime) -> Verdict:
    """Ask ``item``'s turns in one fresh session and list what the last answer got wrong (empty: right).

    ``item``: ``q`` or ``turns``; ``intent`` (or ``lock`` / ``clear`` / ``clarify``); optional ``locked``
    (the session's lock afterwards) and ``answer`` (``{fact, arg, column, mode}``, checked against
    ``truth(fact, arg)``). A clarifying question must be in the language of the question.
    """
    turns = item.get("turns") or [item["q"]]
    state = AssistantState()
    events: list[Any] = []
    for question in turns:
        events = list(assistant.ask(question, state))
    done = events[-1]
    metas = [e for e in events if isinstance(e, Meta)]
    meta = metas[-1] if metas else None
    problems: list[str] = []
    if not isinstance(done, Done):
        return Verdict(turns[-1], item["intent"], None, "none", ["no Done event"])
    if done.clarify:
        got = "clarify"
    elif meta is not None and meta.intent is not None:
        got = meta.intent
    else:
        got = "lock" if state.locked is not None else "clear"
    if got != item["intent"]:
        problems.append(f"intent {got} != {item['intent']} ({done.lead[:100]})")
    if got == "clarify" and bool(_CJK.search(turns[-1])) != bool(_CJK.search(done.lead)):
        problems.append("the clarifying question is not in the question's language")
    if "locked" in item and state.locked != _expected_lock(item["locked"], now):
        problems.append(f"locked {state.locked} != {item['locked']}")
    want = item.get("answer")
    if want and done.result is None:
        problems.append("no result")
    elif want and done.result is not None:
        expected = truth(want["fact"], want.get("arg"))
        items = done.result.items
        if want["mode"] == "count":
            got_value: Any = items[0]["count"] if items else None
        elif want["mode"] == "first":
            got_value = items[0].get(want["column"]) if items else None
        else:
            got_value = {r.get(want["column"]) for r in items}
            expected = set(expected)
        if got_value != expected:
            problems.append(f"answer {got_value} != {expected}")
    source = meta.intent_source if meta else "none"
    return Verdict(turns[-1], item["intent"], got, source, problems)


def accuracy(verdicts: list[Verdict]) -> dict[str, float]:
    """Share right, and the share of questions the rules answered without the model."""
    n = len(verdicts) or 1
    return {
        "questions": len(verdicts),
        "accuracy": sum(v.ok for v in verdicts) / n,
        "by_rules": sum(v.source == "rules" for v in verdicts) / n,
        "by_model": sum(v.source.startswith("model") for v in verdicts) / n,
    }
