"""The assistant's query scope, and the rules that read it from a message.

Resolution order (see :mod:`furnace.assistant.answer`): an explicit lock
command, then these rules on the current message, then the model on the
current message alone, then the model with history. Only a scope the user
locked persists across turns; an inferred scope applies to one turn.
"""

from __future__ import annotations

import difflib
import re
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict

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
    """The names a message may refer to: persona and experiment ids → display names.

    ``experiments`` is ordered newest first, so "the last experiment" is its first key.
    """

    personas: dict[str, str] = {}
    experiments: dict[str, str] = {}

    @property
    def latest_experiment(self) -> str | None:
        return next(iter(self.experiments), None)


class Inferred(BaseModel):
    """What the rules read from one message."""

    scope: Scope = Scope()
    agents: list[str] = []  # agent ids named in the message (lineage questions)
    versions: list[int] = []  # version numbers named in the message (diff, versions)
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

_DAYS = re.compile(r"(?:last|past)\s+(\d{1,3})\s+days?|(?:最近|过去|近)\s*(\d{1,3})\s*天", re.I)
_PAST_WEEK = re.compile(r"\b(past|last)\s+(7 days|seven days)\b|\bpast week\b|(最近|过去|近)(一|1)(周|星期)", re.I)


def infer_time(text: str, now: datetime) -> tuple[datetime | None, datetime | None]:
    """A time range named in ``text`` (UTC, relative to ``now``), or (None, None)."""
    low = text.lower()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    m = _DAYS.search(text)
    if m:
        return now - timedelta(days=int(m.group(1) or m.group(2))), None
    if _PAST_WEEK.search(text):
        return now - timedelta(days=7), None
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
    if "this month" in low or "本月" in text or "这个月" in text:
        return today.replace(day=1), None
    if "last month" in low or "上个月" in text or "上月" in text:
        end = today.replace(day=1)
        return (end - timedelta(days=1)).replace(day=1), end
    return None, None


# --- names --------------------------------------------------------------


# (pattern, explicit): "persona X" names a record; "X persona" may just be an adjective.
_PERSONA_NAMED = (
    (re.compile(r"(?:persona|elixir|人设|角色)\s*[\"'“]?([A-Za-z0-9][\w.-]*)", re.I), True),
    (re.compile(r"([\w.-]+)(?:'s)?\s+(?:persona|elixir)", re.I), False),
    (re.compile(r"([\w.\-\u4e00-\u9fff]{1,20}?)(?:这个)?人设"), False),
)
_EXPERIMENT_NAMED = (
    (re.compile(r"(?:experiment|sweep|实验)\s*[\"'“]?([A-Za-z0-9][\w.-]*)", re.I), True),
    (re.compile(r"([\w.-]+)(?:'s)?\s+(?:experiment|sweep)", re.I), False),
)
_LATEST_EXPERIMENT = re.compile(
    r"\b(last|latest|most recent|newest|previous|recent|my|our|this|current)\s+(experiment|run|sweep)\b|"
    r"(最近|上|最新|刚才|刚刚)(一次|一个|的)?(的)?(实验|试验)|我的实验|这次实验",
    re.I,
)
_AGENT = re.compile(r"\bagt-[0-9a-z][0-9a-z-]*", re.I)
_VERSION = re.compile(r"\bv(\d{1,4})\b|\bversions?\s+(\d{1,4})\b|第\s*(\d{1,4})\s*(?:个)?版|(\d{1,4})\s*版本?", re.I)
# Words that can follow "persona"/"experiment" without being a name.
_STOP = set(
    [
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
        "latest",
        "recent",
        "previous",
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
        "top",
        "new",
        "revisions",
        "revision",
        "preferences",
        "learned",
        "learn",
        "agents",
        "agent",
        "scores",
        "score",
        "results",
        "history",
        "versions",
        "version",
        "runs",
        "run",
        "leaderboard",
        "costs",
        "cost",
        "calls",
        "call",
        "tokens",
        "spend",
        "spent",
        "is",
        "was",
        "were",
        "did",
        "do",
        "does",
        "has",
        "have",
        "and",
        "or",
        "operators",
        "operator",
        "failures",
        "failed",
        "feedback",
        "lineage",
        "ancestors",
        "descendants",
        "compare",
        "vs",
        "versus",
        "diff",
        "changes",
        "changed",
        "what",
        "how",
        "many",
        "much",
        "so",
        "far",
    ]
)


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^\w\u4e00-\u9fff]+", text.casefold()) if t}


def match_names(word: str, names: dict[str, str]) -> list[str]:
    """Ids whose id or display name matches ``word`` (exactly, as one of its words, or closely spelled)."""
    w = word.casefold().strip("\"'“”")
    if not w:
        return []
    exact = [i for i, n in names.items() if w in (i.casefold(), n.casefold())]
    if exact:
        return exact
    partial = sorted(i for i, n in names.items() if w in _tokens(n) | _tokens(i) or (len(w) >= 2 and w in n))
    if partial:
        return partial
    if len(w) >= 5:  # a typo: "tea-mastr", "empathic-coach"
        keys = {i.casefold(): i for i in names}
        return [keys[k] for k in difflib.get_close_matches(w, list(keys), n=2, cutoff=0.85)]
    return []


def _named(patterns: tuple[tuple[re.Pattern[str], bool], ...], text: str) -> list[tuple[str, bool]]:
    """Candidate names with whether they were named explicitly ("persona X")."""
    words = []
    for pattern, explicit in patterns:
        for m in pattern.finditer(text):
            word = m.group(1)
            if word and word.casefold() not in _STOP and not re.fullmatch(r"[\u4e00-\u9fff]*(?:只看|以后只看)", word):
                words.append((word, explicit))
    return words


def _mentioned(text: str, names: dict[str, str]) -> list[str]:
    """Ids whose id or display name appears in ``text`` as it is (longest mention first, no overlaps)."""
    low = text.casefold()
    spans: list[tuple[int, int, str]] = []
    for ident, name in names.items():
        for label in {ident, name}:
            key = label.casefold()
            if len(key) < 2:
                continue
            for m in re.finditer(re.escape(key), low):
                start, end = m.span()
                ascii_label = key.isascii()
                if ascii_label and (
                    (start > 0 and (low[start - 1].isalnum() or low[start - 1] in "-_"))
                    or (end < len(low) and (low[end].isalnum() or low[end] in "-_"))
                ):
                    continue  # part of a longer word
                spans.append((start, end, ident))
    spans.sort(key=lambda s: (-(s[1] - s[0]), s[0]))
    taken: list[tuple[int, int]] = []
    found: list[str] = []
    for start, end, ident in spans:
        if any(start < e and s < end for s, e in taken):
            continue
        taken.append((start, end))
        if ident not in found:
            found.append(ident)
    return found


def _fuzzy(text: str, names: dict[str, str]) -> list[str]:
    """Ids closely spelled by one word of ``text`` (typos in ids like ``tea-mastr``)."""
    keys = {i.casefold(): i for i in names}
    hits: list[str] = []
    for word in re.findall(r"[a-z0-9][a-z0-9_-]{4,}", text.casefold()):
        if word in _STOP:
            continue
        for key in difflib.get_close_matches(word, list(keys), n=1, cutoff=0.85):
            if keys[key] not in hits:
                hits.append(keys[key])
    return hits


def infer_versions(text: str) -> list[int]:
    """Version numbers named in ``text`` in the order given ("v1 vs v3", "第2版")."""
    return [int(next(g for g in m.groups() if g)) for m in _VERSION.finditer(text)]


_ID_SHAPED = re.compile(r"(?<![\w-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])")
_RECORD_PREFIXES = ("agt-", "exp-", "ses-", "cnt-", "run-", "rev-")


def infer_scope(text: str, catalogue: Catalogue, now: datetime) -> Inferred:
    """Read persona, experiment, agents, versions and time range from one message by rules."""
    inferred = Inferred()
    fields: dict[str, object] = {}
    for attr, pattern, names in (
        ("persona", _PERSONA_NAMED, catalogue.personas),
        ("experiment", _EXPERIMENT_NAMED, catalogue.experiments),
    ):
        mentioned = _mentioned(text, names)
        if len(mentioned) == 1:
            fields[attr] = mentioned[0]
            continue
        if len(mentioned) > 1 and attr == "experiment":
            continue  # several experiments named: a comparison, read by the experiments query itself
        if len(mentioned) > 1:
            fields[attr] = mentioned[0]
            continue
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
            fuzzy = _fuzzy(text, names)
            if len(fuzzy) == 1:
                fields[attr] = fuzzy[0]
            else:
                inferred.unresolved.extend(unknown)
    if "persona" not in fields and not inferred.unresolved and "persona" not in str(inferred.ambiguous):
        # an id-shaped word ("tea-master") that names no persona or experiment: ask, never answer
        # for everything as if no persona had been named
        known = {*catalogue.personas, *catalogue.experiments}
        for word in _ID_SHAPED.findall(text):
            unknown_id = word not in known and not word.startswith(_RECORD_PREFIXES)
            if unknown_id and not match_names(word, catalogue.personas):
                inferred.unresolved.append(f"persona {word}")
                break
    if "experiment" not in fields and _LATEST_EXPERIMENT.search(text):
        if catalogue.latest_experiment:
            fields["experiment"] = catalogue.latest_experiment
        inferred.unresolved = [u for u in inferred.unresolved if not u.startswith("experiment ")]
    inferred.agents = list(dict.fromkeys(m.group(0).lower() for m in _AGENT.finditer(text)))
    inferred.versions = infer_versions(_AGENT.sub(" ", text))
    since, until = infer_time(text, now)
    inferred.scope = Scope(since=since, until=until, **fields)  # type: ignore[arg-type]
    return inferred
