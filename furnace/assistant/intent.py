"""What a question asks for, and how sure we are: rules first (en and zh, :mod:`furnace.domain.intents`),
the model only when rules cannot tell.

Confidence from the rules: a *strong* match (words that name the intent on their own) is
:data:`STRONG`; a lone *weak* match (one generic word: "runs", "history") is :data:`WEAK`; a weak
match contradicted by another intent's weak match is :data:`CONTESTED`. Below
:data:`CLARIFY_BELOW` the assistant does not guess: it asks the model (when it has one) and, if the
model is no surer, asks the user a clarifying question naming the readings it hesitates between.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from furnace.assistant.scope import Catalogue, without_ids
from furnace.domain.intents import Intent, rule_matches
from furnace.llm.structured import schema_of

GuessSource = Literal["rules", "model", "model+history", "none"]
"""How an intent was found: by the rules, by the model (alone or with the chat history), or not at all."""

CLARIFY_BELOW = 0.6
"""Below this confidence (rules' or model's) the assistant asks back instead of answering."""
STRONG, WEAK, CONTESTED = 0.95, 0.7, 0.45


class IntentGuess(BaseModel):
    """An intent with how it was found, how sure we are, and the other readings considered."""

    model_config = ConfigDict(frozen=True)

    intent: Intent | None
    confidence: float
    source: GuessSource
    alternatives: tuple[Intent, ...] = ()

    @property
    def needs_clarification(self) -> bool:
        """Too unsure to answer: ask the user (or the model) first."""
        return self.intent is None or self.confidence < CLARIFY_BELOW


_SQL = re.compile(r"^\s*(select|insert|update|delete|drop|create|alter|with)\b.*\b(from|into|table|set)\b", re.I | re.S)


def classify(text: str, catalogue: Catalogue | None = None) -> IntentGuess:
    """The intent the rules read from ``text``, with a confidence (``intent=None`` when no rule matches).

    The rules read the words around the records named, never an id's own words: every id (``agt-…``,
    ``exp-…``, a session or content id, and ``catalogue``'s persona and experiment ids) is taken out first
    (:func:`~furnace.assistant.scope.without_ids`), so "which agents scored best in exp-demo-judges-…" is the
    best agents of that experiment, not its judge feedback. SQL is not a question: the assistant runs only its
    own parameterised reads."""
    if _SQL.search(text):
        return IntentGuess(intent=None, confidence=0.0, source="none")
    matches = rule_matches(without_ids(text, catalogue))
    strong = [intent for intent, sure in matches if sure]
    if strong:
        return IntentGuess(intent=strong[0], confidence=STRONG, source="rules", alternatives=tuple(strong[1:3]))
    if not matches:
        return IntentGuess(intent=None, confidence=0.0, source="none")
    weak = [intent for intent, _ in matches]
    confidence = WEAK if len(weak) == 1 else CONTESTED
    return IntentGuess(intent=weak[0], confidence=confidence, source="rules", alternatives=tuple(weak[1:3]))


class Classification(BaseModel):
    """What the model answers when the rules cannot tell (structured output)."""

    intent: Intent | None = None
    persona: str | None = None
    experiment: str | None = None
    days: int | None = Field(default=None, ge=1, le=3650)
    confidence: float = Field(default=0.0, ge=0, le=1)


CLASSIFY_SCHEMA = schema_of(Classification)
