"""Offline ASSIST task: the lab assistant's classifier fallback and lead writer.

Inputs (``request.inputs``):

- ``{"mode": "classify", "question": str, "catalogue": {...}, "history": [earlier questions]}``
  → parsed ``{intent, persona, experiment, days, confidence}``. The rules in
  :mod:`furnace.domain.intents` already ran and failed, so this looks for
  looser synonyms; for a follow-up ("and yesterday?") it carries the intent of
  the latest earlier question. Unknown → ``confidence`` 0 (the assistant then
  asks a clarifying question instead of guessing).
- ``{"mode": "lead", "question": str, "result": summary, "language": "zh"|"en"}``
  → one sentence that introduces the table without listing it.
"""

from __future__ import annotations

import random
import re
from typing import Any

from furnace.domain.intents import rule_intent
from furnace.llm.seam import LLMRequest

_SYNONYMS: dict[str, tuple[str, ...]] = {  # looser words than the assistant's rules (which ran first and failed)
    "top_agents": ("standout", "star performer", "mvp", "doing great", "尖子", "高手", "佼佼者"),
    "operators": ("which method", "breeding method", "which recipe", "哪种方法", "配方"),
    "revisions": ("changes", "changed", "改动", "改了"),
    "preferences": ("habits", "习惯"),
    "costs": ("price", "how pricey", "多贵", "贵"),
    "experiments": ("trials", "jobs"),
    "personas": ("who do we have", "cast"),
    "failures": ("problems", "issues", "毛病"),
    "arena_runs": ("chat room", "聊天室"),
}
_FOLLOW_UP = re.compile(r"^\s*(and|what about|how about|same for|also)\b|^\s*(那|还有|同样)", re.I)


def _synonym_intent(text: str) -> str | None:
    low = text.casefold()
    for intent, words in _SYNONYMS.items():
        if any(w in low for w in words):
            return intent
    return None


def _classify(inputs: dict[str, Any]) -> dict[str, Any]:
    question = inputs.get("question", "")
    intent = _synonym_intent(question)
    if intent:
        return {"intent": intent, "persona": None, "experiment": None, "days": None, "confidence": 0.7}
    history = inputs.get("history") or []
    if history and _FOLLOW_UP.search(question):
        for earlier in reversed(history):
            guess = rule_intent(earlier) or _synonym_intent(earlier)
            if guess:
                return {"intent": guess, "persona": None, "experiment": None, "days": None, "confidence": 0.65}
    return {"intent": None, "persona": None, "experiment": None, "days": None, "confidence": 0.0}


def _lead(inputs: dict[str, Any]) -> str:
    result = inputs.get("result") or {}
    count = int(result.get("count") or 0)
    title = str(result.get("title") or "")
    top = (result.get("top") or [{}])[0]
    first = next((str(v) for v in top.values() if v not in (None, "")), "") if top else ""
    if inputs.get("language") == "zh":
        return f"{title}共 {count} 条，详见下表；排在最前的是 {first}。" if count else "没有符合条件的记录。"
    return f"{title}: {count} row(s) in the table below, led by {first}." if count else "Nothing matches yet."


def assist(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Dispatch on ``inputs['mode']``."""
    mode = request.inputs.get("mode")
    if mode == "classify":
        return "", _classify(request.inputs)
    if mode == "lead":
        return _lead(request.inputs), None
    return "I only classify questions and write leads for the lab assistant.", None
