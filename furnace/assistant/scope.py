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

_END = r"\s*[.!?。！？]*\s*$"
_CLEAR = re.compile(
    r"^\s*(?:please\s+|ok,?\s+|now\s+)?(?:"
    r"(?:clear|reset|drop|remove|cancel|undo|lift|turn off|get rid of)\s+"
    r"(?:the\s+|my\s+|all\s+|any\s+|that\s+|this\s+)?"
    r"(?:scope|filters?|locks?|restrictions?|focus)(?:\s+please)?|"
    r"unlock(?:\s+(?:the\s+)?scope)?|forget\s+(?:the\s+|that\s+|my\s+|about\s+the\s+)?(?:filters?|scope|lock|focus)|"
    r"(?:show|look at|see)\s+(?:me\s+)?(?:everything|all(?:\s+the)?\s+data|all of it)(?:\s+again)?|"
    r"back to everything|no (?:more )?(?:filters?|scope)|stop filtering"
    r")" + _END + "|"
    r"^\s*(?:请|帮我|麻烦)?(?:把)?(?:(?:清除|清空|重置|取消|解除|去掉|撤销|删除|删掉|去除)(?:一下)?.{0,6}?"
    r"(?:范围|锁定|筛选|过滤|限制|条件)|(?:范围|锁定|筛选|过滤|限制).{0,4}?(?:清除|清空|重置|取消|解除|去掉|删掉)"
    r"(?:掉|了|吧|一下)*|不限了|不限制了|不用限制了|不限范围了?|不再限定了?|"
    r"(?:看|显示|恢复|回到)(?:一下)?(?:全部|所有|全部数据|所有数据)|全部都看|都看看|恢复全部)(?:吧|了|啦)?" + _END,
    re.I,
)
_LOCK = re.compile(
    r"^\s*(?:(?:ok|okay|please|now|and),?\s+)?(?:let'?s\s+|please\s+|can you\s+|i want to\s+)?(?:"
    r"(?:from now on|going forward|for now|henceforth|for the rest of (?:this|the) session),?\s*"
    r"(?:(?:only|just)\s+)?(?:(?:look at|focus on|show|stick to|use|consider)\s+)?(?:(?:only|just)\s+)?|"
    r"(?:only|just)\s+(?:look at|show|consider|focus on)|focus (?:only )?on|stick to|"
    r"lock (?:the\s+)?(?:scope\s+)?(?:to|on|onto|at)|lock on(?:to)?|scope (?:it )?to|set (?:the )?scope to|"
    r"(?:restrict|limit|narrow)(?: it| the scope| everything| this)?(?: down)? to|keep (?:to|it to)|"
    r"(?:接下来|后面|之后|以后|今后|往后|从现在起|从现在开始|下面)(?:都|就|全|一直)?(?:只)?(?:看|关注|聚焦|盯着?|针对)(?:一下)?|"
    r"只看|只关注|只聚焦|只针对|锁定(?:范围)?(?:到|为|在|成)?|范围(?:锁定|限定|限制|设)(?:到|为|在|成)|"
    r"(?:限定|限制|聚焦)(?:到|在|为|于)"
    r")\s*[:：]?\s*(?P<target>.+?)\s*"
    r"(?:,?\s*(?:from now on|going forward|for now|please|only|for the rest of (?:this|the) session))?"
    r"(?:吧|就行|就好|即可)?\s*[.!。！]?\s*$",
    re.I,
)

KNOWN_OPERATORS = ("crossover", "mutation", "ensemble", "reflect")
"""The fusion operators furnace ships (data may name more: :attr:`Catalogue.operators`)."""
_OPERATOR_WORDS = {  # other words for an operator, en and zh
    "crossovers": "crossover",
    "交叉": "crossover",
    "杂交": "crossover",
    "mutations": "mutation",
    "mutate": "mutation",
    "变异": "mutation",
    "突变": "mutation",
    "ensembles": "ensemble",
    "集成": "ensemble",
    "reflection": "reflect",
    "reflective": "reflect",
    "反思": "reflect",
}
Language = Literal["zh", "en"]
_LANGUAGE = (
    ("zh", re.compile(r"\b(chinese|mandarin)\b|中文|汉语|华语|简体", re.I)),
    ("en", re.compile(r"\benglish\b|英文|英语", re.I)),
)


class Scope(BaseModel):
    """What a question is about. Empty fields mean 'not restricted'."""

    model_config = ConfigDict(frozen=True)

    persona: str | None = None
    experiment: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    agent: str | None = None
    operator: str | None = None

    def is_empty(self) -> bool:
        return not any((self.persona, self.experiment, self.since, self.until, self.agent, self.operator))

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
        if self.agent:
            parts.append(f"agent={self.agent}")
        if self.operator:
            parts.append(f"operator={self.operator}")
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
    operators: list[str] = []  # operator names found in the data (besides :data:`KNOWN_OPERATORS`)

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
    personas: list[str] = []  # every persona named (a comparison compares them)
    operators: list[str] = []  # operator names in the message ("crossover", "集成"), in order
    language: Language | None = None  # "written in Chinese", "英文的人设"


def parse_command(text: str) -> tuple[Literal["clear", "lock"], str] | None:
    """An explicit scope command: ``("clear", "")`` or ``("lock", target text)``."""
    if _CLEAR.match(text):
        return ("clear", "")
    m = _LOCK.match(text)
    if m:
        return ("lock", m.group("target"))
    return None


# --- time ---------------------------------------------------------------

_ZH_DIGITS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_NUM = r"(\d{1,4}|[一两二三四五六七八九十]{1,3})"
_EN_NUM = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10, "a": 1, "an": 1}
_SPAN = re.compile(
    r"\b(?:last|past|previous|recent)\s+(\d{1,4}|one|two|three|four|five|six|seven|ten|a|an)?\s*"
    r"(hours?|h|days?|weeks?|months?)\b|"
    r"(?:最近|过去|近|前)\s*" + _NUM + r"\s*(?:个)?\s*(小时|钟头|天|日|周|星期|礼拜|个月|月)",
    re.I,
)
_UNIT = {"h": "hours", "hour": "hours", "小时": "hours", "钟头": "hours", "day": "days", "天": "days", "日": "days"}
_UNIT.update({"week": "weeks", "周": "weeks", "星期": "weeks", "礼拜": "weeks", "month": "months"})
_UNIT.update({"个月": "months", "月": "months"})


def _zh_number(text: str) -> int:
    if text.isdigit():
        return int(text)
    if text.startswith("十"):  # 十, 十五
        return 10 + (_ZH_DIGITS.get(text[1:], 0) if len(text) > 1 else 0)
    if "十" in text:  # 二十, 二十四
        tens, _, ones = text.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(text, 1)


def _span(text: str, now: datetime) -> datetime | None:
    """The start of a window ending now: "last 24 hours", "past 3 days", "最近一周", "过去两个月"."""
    m = _SPAN.search(text)
    if not m:
        return None
    if m.group(2):  # English
        raw, unit = (m.group(1) or "").lower(), m.group(2).lower().rstrip("s")
        if not raw and unit in ("week", "month"):
            return None  # "last week" / "last month" are calendar periods (below)
        n = int(raw) if raw.isdigit() else _EN_NUM.get(raw, 1)
    else:
        n, unit = _zh_number(m.group(3)), m.group(4)
    kind = _UNIT.get(unit, unit + "s" if not unit.endswith("s") else unit)
    if kind == "hours":
        return now - timedelta(hours=n)
    if kind == "weeks":
        return now - timedelta(days=7 * n)
    if kind == "months":
        return now - timedelta(days=30 * n)
    return now - timedelta(days=n)


def infer_time(text: str, now: datetime) -> tuple[datetime | None, datetime | None]:
    """A time range named in ``text`` (UTC, relative to ``now``), or (None, None)."""
    low = text.lower()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    since = _span(text, now)
    if since is not None:
        return since, None
    if re.search(r"\b(past|last) (hour|day)\b|\bpast week\b|\bpast month\b", low):
        unit = re.search(r"(hour|day|week|month)", low)
        assert unit is not None
        return now - {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}.get(
            unit.group(1), timedelta(days=30)
        ), None
    if "last night" in low or "昨晚" in text or "昨夜" in text:
        return today - timedelta(hours=6), today + timedelta(hours=9)
    if "yesterday" in low or "昨天" in text:
        return today - timedelta(days=1), today
    if "today" in low or "今天" in text or "今日" in text:
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


def infer_operators(text: str, catalogue: Catalogue) -> list[str]:
    """Operator names in ``text`` ("crossover", "ensembles", "集成"), in the order written, each once."""
    low = text.casefold()
    names = {n.casefold(): n for n in (*KNOWN_OPERATORS, *catalogue.operators) if n and n != "seed"}
    words = {**{k: v for k, v in _OPERATOR_WORDS.items() if v in names.values()}, **names}
    hits: list[tuple[int, str]] = []
    for word, name in words.items():
        pattern = re.escape(word) if not word.isascii() else rf"(?<![\w-]){re.escape(word)}(?![\w-])"
        for m in re.finditer(pattern, low):
            hits.append((m.start(), name))
    return list(dict.fromkeys(name for _, name in sorted(hits)))


def infer_language(text: str) -> Language | None:
    """A persona language the message asks for ("written in Chinese", "中文的人设", "English personas")."""
    for language, pattern in _LANGUAGE:
        if pattern.search(text):
            return language  # type: ignore[return-value]
    return None


def infer_versions(text: str) -> list[int]:
    """Version numbers named in ``text`` in the order given ("v1 vs v3", "第2版")."""
    return [int(next(g for g in m.groups() if g)) for m in _VERSION.finditer(text)]


_ID_SHAPED = re.compile(r"(?<![\w-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])")
# Hyphenated words of the questions people ask about experiments, never taken for a persona's id: the
# held-out evaluation's terms, the search bench's baselines, and ordinary English ("the top-3 agents").
_PLAIN_HYPHENATED = re.compile(
    r"(?:top|bottom|first|last|best|worst)-\d+|held-out|hold-out|train-test|test-train|train-validation|"
    r"in-sample|out-of-sample|re-evaluat\w*|re-run\w*|re-scor\w*|copy-feedback|best-seed|hill-climb\w*|"
    r"evo-reflect|cross-over|per-probe|per-call|multi-judge|well-known|follow-up|long-term|short-term|"
    r"step-by-step|real-time|zero-shot|few-shot|state-of-the-art|so-called|non-\w+|self-\w+"
)
_RECORD_PREFIXES = ("agt-", "exp-", "ses-", "cnt-", "run-", "rev-")
_ASCII_ID = "0-9A-Za-z_"


def _prefixed_id(*prefixes: str) -> re.Pattern[str]:
    """A record id that starts with one of ``prefixes`` (``"exp-"``), ASCII only: "exp-tea里" ends at 里."""
    heads = "|".join(re.escape(p) for p in prefixes)
    return re.compile(rf"(?<![{_ASCII_ID}-])(?:{heads})[0-9a-z](?:[0-9a-z_-]*[0-9a-z])?", re.I)


_RECORD_ID = _prefixed_id(*_RECORD_PREFIXES)
"""A record id by its prefix: agent ``agt-…``, experiment ``exp-…``, session ``ses-…``, content ``cnt-…``, arena
run ``run-…``, revision ``rev-…``."""
_EXPERIMENT_ID = _prefixed_id("exp-")


def without_ids(text: str, catalogue: Catalogue | None = None) -> str:
    """``text`` with the records it names taken out, each replaced by a space: every id-prefixed word
    (:data:`_RECORD_ID`) and, from ``catalogue``, the persona and experiment ids (and their display names when
    these are id-shaped, "demo-judges"). An id is a subject or a scope, never a question word: the rules read
    what is asked from what is left, so "which agents scored best in exp-demo-judges-…" asks for the best agents
    (not judge feedback) and "cost-sweep's best agents" for agents (not costs)."""
    labels: set[str] = set()
    for names in (catalogue.personas, catalogue.experiments) if catalogue else ():
        for ident, name in names.items():
            labels.add(ident)
            if name and _ID_SHAPED.fullmatch(name.casefold()):
                labels.add(name)
    for label in sorted(filter(None, labels), key=len, reverse=True):
        if re.search(re.escape(label), text, re.I):
            text = re.sub(rf"(?<![{_ASCII_ID}-]){re.escape(label)}(?![{_ASCII_ID}-])", " ", text, flags=re.I)
    return _RECORD_ID.sub(" ", text)


def infer_scope(text: str, catalogue: Catalogue, now: datetime) -> Inferred:
    """Read persona, experiment, agents, versions and time range from one message by rules."""
    inferred = Inferred()
    fields: dict[str, object] = {}
    for attr, pattern, names in (
        ("persona", _PERSONA_NAMED, catalogue.personas),
        ("experiment", _EXPERIMENT_NAMED, catalogue.experiments),
    ):
        mentioned = _mentioned(text, names)
        if attr == "persona":
            inferred.personas = list(mentioned)
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
                if attr == "persona":
                    inferred.personas = [hits[0]]
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
                if attr == "persona":
                    inferred.personas = [fuzzy[0]]
            else:
                inferred.unresolved.extend(unknown)
    if "persona" not in fields and not inferred.unresolved and "persona" not in str(inferred.ambiguous):
        # an id-shaped word ("tea-master") that names no persona or experiment: ask, never answer
        # for everything as if no persona had been named
        known = {n.casefold() for n in (*catalogue.personas, *catalogue.experiments, *catalogue.experiments.values())}
        for word in _ID_SHAPED.findall(text):
            if _PLAIN_HYPHENATED.fullmatch(word):
                continue
            unknown_id = word not in known and not word.startswith(_RECORD_PREFIXES)
            if unknown_id and not match_names(word, catalogue.personas):
                inferred.unresolved.append(f"persona {word}")
                break
    if not inferred.unresolved and not inferred.ambiguous:
        # an experiment id ("exp-…") that names no experiment: ask, never answer for everything
        known_experiments = {e.casefold() for e in catalogue.experiments}
        for word in _EXPERIMENT_ID.findall(text):
            if word.casefold() not in known_experiments and not match_names(word, catalogue.experiments):
                inferred.unresolved.append(f"experiment {word}")
                break
    if "experiment" not in fields and _LATEST_EXPERIMENT.search(text):
        if catalogue.latest_experiment:
            fields["experiment"] = catalogue.latest_experiment
        inferred.unresolved = [u for u in inferred.unresolved if not u.startswith("experiment ")]
    inferred.agents = list(dict.fromkeys(m.group(0).lower() for m in _AGENT.finditer(text)))
    inferred.versions = infer_versions(_AGENT.sub(" ", text))
    inferred.operators = infer_operators(text, catalogue)
    if len(inferred.operators) == 1:  # one operator named: a filter ("agents that used ensemble")
        fields["operator"] = inferred.operators[0]
    inferred.language = infer_language(text)
    since, until = infer_time(text, now)
    inferred.scope = Scope(since=since, until=until, **fields)  # type: ignore[arg-type]
    return inferred
