"""What a question asks for: rules first, the model only when rules cannot tell."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

Intent = Literal["top_agents", "revisions", "preferences", "experiments", "personas", "costs"]
INTENTS: tuple[Intent, ...] = ("top_agents", "revisions", "preferences", "experiments", "personas", "costs")

# Checked in order: the first rule that matches wins ("what did X learn from its
# revisions" is about preferences, not revisions).
_RULES: tuple[tuple[Intent, re.Pattern[str]], ...] = (
    ("preferences", re.compile(r"\b(learn(ed|t)?|preferences?|style prefs?)\b|学到|学会|偏好", re.I)),
    (
        "top_agents",
        re.compile(
            r"\b(best|top|highest|fittest|leaderboard|winners?|scored?|ranking)\b|得分最高|最好|排行|排名|最优", re.I
        ),
    ),
    ("revisions", re.compile(r"\b(revisions?|revised|edits?|rewrites?)\b|修订|修改|改稿|改写", re.I)),
    ("costs", re.compile(r"\b(cost|costs|spend|spent|tokens?|budget|usd)\b|花费|成本|开销|费用", re.I)),
    ("experiments", re.compile(r"\b(experiments?|sweeps?|runs?)\b|实验", re.I)),
    ("personas", re.compile(r"\b(personas?|elixirs?|library)\b|人设|角色|丹药", re.I)),
)


class IntentGuess(BaseModel):
    """An intent with how it was found and how sure we are."""

    model_config = ConfigDict(frozen=True)

    intent: Intent | None
    confidence: float
    source: Literal["rules", "model", "model+history", "none"]


def classify(text: str) -> IntentGuess:
    """The intent named by rules, or ``intent=None`` when the rules cannot tell."""
    for intent, pattern in _RULES:
        if pattern.search(text):
            return IntentGuess(intent=intent, confidence=1.0, source="rules")
    return IntentGuess(intent=None, confidence=0.0, source="none")


CLASSIFY_SCHEMA = {
    "type": "object",
    "properties": {
        "intent": {"type": ["string", "null"], "enum": [*INTENTS, None]},
        "persona": {"type": ["string", "null"]},
        "experiment": {"type": ["string", "null"]},
        "days": {"type": ["integer", "null"], "minimum": 1, "maximum": 3650},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["intent", "confidence"],
}
