"""What a question asks for: rules first (en and zh, :mod:`furnace.domain.intents`), the model only
when rules cannot tell."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.intents import Intent, rule_intent
from furnace.llm.structured import schema_of

GuessSource = Literal["rules", "model", "model+history", "none"]
"""How an intent was found: by the rules, by the model (alone or with the chat history), or not at all."""


class IntentGuess(BaseModel):
    """An intent with how it was found and how sure we are."""

    model_config = ConfigDict(frozen=True)

    intent: Intent | None
    confidence: float
    source: GuessSource


def classify(text: str) -> IntentGuess:
    """The intent named by rules, or ``intent=None`` when the rules cannot tell."""
    intent = rule_intent(text)
    if intent is not None:
        return IntentGuess(intent=intent, confidence=1.0, source="rules")
    return IntentGuess(intent=None, confidence=0.0, source="none")


class Classification(BaseModel):
    """What the model answers when the rules cannot tell (structured output)."""

    intent: Intent | None = None
    persona: str | None = None
    experiment: str | None = None
    days: int | None = Field(default=None, ge=1, le=3650)
    confidence: float = Field(default=0.0, ge=0, le=1)


CLASSIFY_SCHEMA = schema_of(Classification)
