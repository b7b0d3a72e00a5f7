"""The assistant's query scope, and the rules that read it from a message.

Resolution order (see :mod:`furnace.assistant.answer`): an explicit lock
command, then these rules on the current message, then the model on the
current message alone, then the model with history. Only a scope the user
locked persists across turns; an inferred scope applies to one turn.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict

Kind = Literal["agents", "revisions", "preferences", "experiments", "personas", "costs"]

_CLEAR = re.compile(
    r"^\s*(clear|reset|drop)\s+(the\s+)?scope\s*[.!]?\s*$|^\s*(清除|清空|重置)范围\s*[。！!]?\s*$", re.I
)
_LOCK = re.compile(
    r"^\s*(?:from now on,?\s*(?:only|just)(?:\s+look at)?|only look at|lock (?:the\s+)?scope to|"
    r"scope to|只看|锁定范围(?:到|为)?|以后只看|从现在起只看)\s*[:：]?\s*(?P<target>.+?)\s*[.!。！]?\s*$",
    re.I,
)


class Scope(BaseModel):
    """What a question is about. Empty fields mean 'not restricted'."""

    model_config = ConfigDict(frozen=True)

    persona: str | None = None
    experiment: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def is_empty(self) -> bool:
        return not any((self.persona, self.experiment, self.since, self.until))

    def overlaid(self, other: Scope) -> Scope:
        """This scope with ``other``'s set fields on top."""
        data = self.model_dump()
        data.update({k: v for k, v in other.model_dump().items() if v is not None})
        return Scope(**data)

    def label(self) -> str:
        """A one-line description, always shown to the user."""
        parts = []
        if self.persona:
            parts.append(f"persona={self.persona}")
        if self.experiment:
            parts.append(f"experiment={self.experiment}")
        if self.since or self.until:
            since = self.since.strftime("%Y-%m-%d %H:%M") if self.since else "…"
            until = self.until.strftime("%Y-%m-%d %H:%M") if self.until else "now"
            parts.append(f"time={since} → {until}")
        return " · ".join(parts) or "everything"


class Catalogue(BaseModel):
    """The names a message may refer to: persona and experiment ids → display names."""

    personas: dict[str, str] = {}
    experiments: dict[str, str] = {}


class Inferred(BaseModel):
    """What the rules read from one message."""

    scope: Scope = Scope()
    unresolved: list[str] = []  # names the user mentioned that match nothing (ask, don't guess)
    ambiguous: dict[str, list[str]] = {}  # a name matching several records


def parse_command(text: str) -> tuple[Literal["clear", "lock"], str] | None:
    """An explicit scope command: ``("clear", "")`` or ``("lock", target text)``."""
    if _CLEAR.match(text):
        return ("clear", "")
    m = _LOCK.match(text)
    if m:
        return ("lock", m.group("target"))
    return None


# --- time ---------------------------------------------------------------

_DAYS = re.compile(r"(?:last|past)\s+(\d{1,3})\s+days?|(?:最近|过去)\s*(\d{1,3})\s*天", re.I)


def infer_time(text: str, now: datetime) -> tuple[datetime | None, datetime | None]:
    """A time range named in ``text`` (UTC, relative to ``now``), or (None, None)."""
    low = text.lower()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    m = _DAYS.search(text)
    if m:
        return now - timedelta(days=int(m.group(1) or m.group(2))), None
    if "last night" in low or "昨晚" in text or "昨夜" in text:
        return today - timedelta(hours=6), today + timedelta(hours=9)
    if "yesterday" in low or "昨天" in text:
        return today - timedelta(days=1), today
    if "today" in low or "今天" in text:
        return today, None
    if "this week" in low or "本周" in text or "这周" in text:
        return today - timedelta(days=today.weekday()), None
    if "last week" in low or "上周" in text:
        start = today - timedelta(days=today.weekday() + 7)
        return start, start + timedelta(days=7)
    if "this month" in low or "本月" in text:
        return today.replace(day=1), None
    return None, None


# --- names --------------------------------------------------------------

# (pattern, explicit): "persona X" names a record; "X persona" may just be an adjective.
_PERSONA_NAMED = (
    (re.compile(r"(?:persona|elixir|人设|角色)\s*[\"'“]?([\w.-]+)", re.I), True),
    (re.compile(r"([\w.-]+)(?:'s)?\s+(?:persona|elixir)", re.I), False),
    (re.compile(r"([\w.\-\u4e00-\u9fff]{1,20}?)(?:这个)?人设"), False),
)
_EXPERIMENT_NAMED = (
    (re.compile(r"(?:experiment|sweep|实验)\s*[\"'“]?([\w.-]+)", re.I), True),
    (re.compile(r"([\w.-]+)(?:'s)?\s+(?:experiment|sweep)", re.I), False),
)
_STOP = {
    "the",
    "a",
    "an",
    "this",
    "that",
    "my",
    "our",
    "its",
    "which",
    "each",
    "every",
    "last",
    "night's",
    "s",
    "of",
    "for",
    "about",
    "from",
    "by",
    "in",
    "on",
    "with",
    "to",
    "show",
    "list",
    "best",
    "new",
    "revisions",
    "revision",
    "preferences",
    "learned",
    "learn",
    "agents",
    "scores",
    "results",
    "history",
    "versions",
    "runs",
    "leaderboard",
    "costs",
    "is",
    "was",
    "did",
    "has",
    "and",
    "or",
}


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^\w\u4e00-\u9fff]+", text.casefold()) if t}


def match_names(word: str, names: dict[str, str]) -> list[str]:
    """Ids whose id or display name matches ``word`` (exactly, or as one of its words)."""
    w = word.casefold().strip("\"'“”")
    exact = [i for i, n in names.items() if w in (i.casefold(), n.casefold())]
    if exact:
        return exact
    return sorted(i for i, n in names.items() if w in _tokens(n) | _tokens(i) or (len(w) >= 2 and w in n))


def _named(patterns: tuple[tuple[re.Pattern[str], bool], ...], text: str) -> list[tuple[str, bool]]:
    """Candidate names with whether they were named explicitly ("persona X")."""
    words = []
    for pattern, explicit in patterns:
        for m in pattern.finditer(text):
            word = m.group(1)
            if word and word.casefold() not in _STOP and not re.fullmatch(r"[\u4e00-\u9fff]*(?:只看|以后只看)", word):
                words.append((word, explicit))
    return words


def infer_scope(text: str, catalogue: Catalogue, now: datetime) -> Inferred:
    """Read persona, experiment and time range from one message by rules."""
    inferred = Inferred()
    fields: dict[str, object] = {}
    for attr, pattern, names in (
        ("persona", _PERSONA_NAMED, catalogue.personas),
        ("experiment", _EXPERIMENT_NAMED, catalogue.experiments),
    ):
        unknown = []
        for word, explicit in _named(pattern, text):
            hits = match_names(word, names)
            if len(hits) == 1:
                fields[attr] = hits[0]
                break
            if len(hits) > 1:
                inferred.ambiguous[word] = hits
                break
            if explicit:  # "persona X" names something; "X persona" may be an adjective
                unknown.append(f"{attr} {word}")
        else:
            inferred.unresolved.extend(unknown)
    since, until = infer_time(text, now)
    inferred.scope = Scope(since=since, until=until, **fields)  # type: ignore[arg-type]
    return inferred
