"""Judge feedback text: short, structured notes on what an answer missed or got wrong.

A judge returns, with each score, ``feedback`` made of ``category: detail`` clauses
joined by ``"; "``, e.g. ``gap: does not say how serious each problem is; tone: too formal``.
A judge names *gaps* in its own words, never the rubric's (the feedback reaches the
operators, the rubric must not). Categories a rule engine can act on:

- ``gap: <what the answer fails to do>`` — a judge's paraphrase of a missing point;
- ``missing: a, b`` — items a *person* asked for by name (a revision suggestion: "mention a and b");
- ``avoid: x`` — something the answer should have left out (a judge's paraphrase, or a person's words);
- ``tone: too formal | too casual | needs warmth | less warmth | needs humour | less humour``;
- ``length: too long | too short | over N``;
- ``format: needs markdown | no markdown``.

Anything else (free text from a real judge, ``user: ...`` from a person, or
``piece: ...`` for a person's request about one part of one piece, such as its title)
is kept as is: a model can read it; the offline rules cannot and say so.

A *reflection brief* (what the reflective operator reads) is a few blocks, one per
weak probe, separated by blank lines::

    probe: churn-numbers (0.41)
    message: Our monthly churn went from 3% to 5%...
    gap: does not compare the figure with a simple reference point first
    tone: too formal

This module only formats and parses that text; it never decides an edit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

ACTIONABLE = ("gap", "missing", "avoid", "tone", "length", "format")
CONTEXT = ("probe", "message")
MAX_FEEDBACK = 300
MAX_BRIEF = 2000
_CLAUSE = re.compile(r"^\s*([a-z_]+)\s*:\s*(.+?)\s*$", re.S)


def clause(category: str, detail: str) -> str:
    """One ``category: detail`` clause (whitespace folded, separators removed from the detail)."""
    detail = " ".join(detail.replace(";", ",").split())
    return f"{category}: {detail}"


def join_clauses(clauses: Iterable[str]) -> str:
    """Clauses as one feedback text (at most :data:`MAX_FEEDBACK` characters, whole clauses)."""
    out = ""
    for c in clauses:
        candidate = f"{out}; {c}" if out else c
        if len(candidate) > MAX_FEEDBACK:
            break
        out = candidate
    return out


def split_items(detail: str) -> list[str]:
    """The items of a list detail (``a, b`` or ``a、b``)."""
    return [x.strip() for x in re.split(r"[,，、]", detail) if x.strip()]


@dataclass(frozen=True)
class Block:
    """Feedback on one probe: its context (probe id, message) and its clauses in order."""

    context: dict[str, str] = field(default_factory=dict)
    clauses: tuple[tuple[str, str], ...] = ()

    def actionable(self) -> list[tuple[str, str]]:
        return [(c, d) for c, d in self.clauses if c in ACTIONABLE]

    def other(self) -> list[str]:
        return [f"{c}: {d}" if c else d for c, d in self.clauses if c not in ACTIONABLE]


def parse_clauses(text: str) -> list[tuple[str, str]]:
    """``(category, detail)`` pairs of one feedback text; text without a category gets ``""``."""
    out = []
    for part in re.split(r";|\n", text):
        if not part.strip():
            continue
        m = _CLAUSE.match(part)
        out.append((m.group(1).casefold(), m.group(2)) if m else ("", part.strip()))
    return out


def parse_brief(text: str) -> list[Block]:
    """The blocks of a reflection brief (a text without blank lines is one block)."""
    blocks = []
    for chunk in re.split(r"\n\s*\n", text.strip()):
        context: dict[str, str] = {}
        clauses: list[tuple[str, str]] = []
        for line in chunk.splitlines():
            m = _CLAUSE.match(line)
            if m and m.group(1).casefold() in CONTEXT:
                context[m.group(1).casefold()] = m.group(2)
            elif line.strip():
                clauses.extend(parse_clauses(line))
        if context or clauses:
            blocks.append(Block(context, tuple(clauses)))
    return blocks


class FeedbackRow(Protocol):
    """A stored score row (``furnace.evolution.records.ScoreRow``)."""

    @property
    def probe(self) -> str: ...

    @property
    def scorer(self) -> str: ...

    @property
    def value(self) -> float: ...

    @property
    def feedback(self) -> str: ...


def reflection_brief(rows: Sequence[FeedbackRow], messages: Mapping[str, str], *, weakest: int = 2) -> str:
    """The reflection brief of one individual: the ``weakest`` probes (lowest mean score over
    the rows that carry feedback), each with its message and feedback clauses, in a fixed order."""
    by_probe: dict[str, list[FeedbackRow]] = {}
    for row in rows:
        if row.probe != "*":
            by_probe.setdefault(row.probe, []).append(row)
    ranked = sorted(
        (sum(r.value for r in rs) / len(rs), probe) for probe, rs in by_probe.items() if any(r.feedback for r in rs)
    )
    blocks = []
    for mean, probe in ranked[:weakest]:
        lines = [f"probe: {probe} ({mean:.2f})"]
        if probe in messages:
            lines.append(f"message: {' '.join(messages[probe].split())[:300]}")
        seen: set[str] = set()
        for row in sorted(by_probe[probe], key=lambda r: r.scorer):
            for category, detail in parse_clauses(row.feedback):
                text = clause(category, detail) if category else detail
                if text not in seen:
                    seen.add(text)
                    lines.append(text)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)[:MAX_BRIEF]


_REVISION_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"shorter|shorten|more concise|too long|trim|cut it|wordy|verbose|"
            r"简短|精简|短一点|缩短|太长|删减|啰嗦|冗长",
            re.I,
        ),
        "length: too long",
    ),
    (re.compile(r"longer|more detail|expand|too short|详细|展开|长一点|太短", re.I), "length: too short"),
    # "太正式了" (too formal) says the opposite of "更正式" (more formal): the zh patterns name the direction
    (
        re.compile(r"more formal|less casual|too casual|professional|更正式|正式一点|正式些|严谨|书面", re.I),
        "tone: too casual",
    ),
    (
        re.compile(r"less formal|too formal|more casual|relaxed|friendlier|livel|liven|太正式|轻松|活泼|口语", re.I),
        "tone: too formal",
    ),
    (re.compile(r"warmer|more empath|kinder|温暖|体贴|共情", re.I), "tone: needs warmth"),
    (re.compile(r"funnier|more humou?r|a joke|幽默|风趣|俏皮", re.I), "tone: needs humour"),
    (re.compile(r"no jokes|less humou?r|serious|别开玩笑|严肃", re.I), "tone: less humour"),
    # "headings" (plural) and "小标题" are a layout; "the title" / "标题" is one line of one piece (see _PIECE_PART)
    (re.compile(r"bullet|markdown|\bheadings\b|sub-?headings?|列表|要点|小标题|分点", re.I), "format: needs markdown"),
    (re.compile(r"plain text|no markdown|no bullets|纯文本|不要列表", re.I), "format: no markdown"),
)
_MENTION = re.compile(r"(?:mention|cover|talk about|include|add|提到|讲讲|加上|补充)\s*[:：]?\s*(.+)", re.I)
_AVOID = re.compile(
    r"(?:don't|do not|never|stop|no more)\s+(?:mention(?:ing)?|talk(?:ing)? about|bring(?:ing)? up|discuss(?:ing)?)"
    r"\s+(.+)|(?:不要|别|不许|不准)再?(?:提|聊|谈|讨论)(?:到|起|论)?(.+)",
    re.I,
)
# A part of one piece: a request naming it is about that piece's structure, not the persona's
_PIECE_PART = re.compile(
    r"paragraph|\btitle\b|headline|\bheading\b|\bintro(?:duction)?\b|opening|ending|conclusion|sentence|"
    r"第.{1,2}段|段落|这段|那段|(?<!小)标题|开头|结尾|结论|这句|第一句|最后一句",
    re.I,
)
# Words that make a request persona-wide ("always use bullet points", "以后都用列表")
_PERSONA_WIDE = re.compile(
    r"\balways\b|from now on|every (?:piece|post|answer|article|time)|all (?:your|future)|"
    r"以后|今后|总是|每次|一律|所有",
    re.I,
)
_TRAILING = " .。!！?？了吧啦呀"


def suggestion_clauses(suggestion: str) -> list[str]:
    """The clauses one revision suggestion states, in the brief's words: the categories a rule engine
    understands where the suggestion states one; else ``piece: ...`` when it names a part of the piece
    (a paragraph, the title) and nothing the rules read, else ``user: ...``. ``[]`` for an empty text."""
    text = " ".join(suggestion.split())
    if not text:
        return []
    stated = parse_clauses(text)
    if all(category in ACTIONABLE for category, _ in stated):  # already in the clause format
        return [clause(category, detail) for category, detail in stated]
    found = [c for pattern, c in _REVISION_RULES if pattern.search(text)]
    avoid = _AVOID.search(text)
    if avoid:
        found.append(clause("avoid", (avoid.group(1) or avoid.group(2)).strip(_TRAILING)))
    else:
        mention = _MENTION.search(text)
        item = mention.group(1).strip(_TRAILING)[:80] if mention else ""
        if item and not any(pattern.search(item) for pattern, _ in _REVISION_RULES):  # "add subheadings": a format
            found.append(clause("missing", item))
    if found:
        return list(dict.fromkeys(found))
    return [clause("piece" if piece_scoped(text) else "user", text[:200])]


def piece_scoped(suggestion: str) -> bool:
    """Whether a suggestion names one part of the piece (a paragraph, the title, the ending)
    and no word that makes it persona-wide ("always", "from now on", "以后")."""
    return bool(_PIECE_PART.search(suggestion)) and not persona_wide(suggestion)


def persona_wide(suggestion: str) -> bool:
    """Whether a suggestion says it holds beyond this piece ("always ...", "from now on", "以后都 ...")."""
    return bool(_PERSONA_WIDE.search(suggestion))


def revision_feedback(suggestions: Sequence[str]) -> str:
    """A reflection brief from a person's accepted revision suggestions (the revision chat) or
    hand-written clauses: :func:`suggestion_clauses` of each, in order."""
    lines = ["probe: user-revision", *(c for s in suggestions for c in suggestion_clauses(s))]
    return "\n".join(lines) if len(lines) > 1 else ""


# The persona field a clause asks to move, and which way (+1 up, -1 down, 0 either)
_SLOTS = {
    "tone: too formal": ("tone.formality", -1),
    "tone: too casual": ("tone.formality", 1),
    "tone: needs warmth": ("tone.empathy", 1),
    "tone: less warmth": ("tone.empathy", -1),
    "tone: needs humour": ("tone.humor", 1),
    "tone: needs humor": ("tone.humor", 1),
    "tone: less humour": ("tone.humor", -1),
    "tone: less humor": ("tone.humor", -1),
    "length: too long": ("tone.conciseness", 1),
    "length: too short": ("tone.conciseness", -1),
    "format: needs markdown": ("constraints.must_use_markdown", 1),
    "format: no markdown": ("constraints.must_use_markdown", -1),
}


def clause_slot(text: str) -> tuple[str, int] | None:
    """The persona field one clause (``category: detail``) asks to change and the direction
    (``None`` for a clause no rule reads): ``missing`` → ``principles``, ``avoid`` →
    ``constraints.forbidden_topics`` (or the principle that holds it), ``length: over N`` →
    ``constraints.max_length``."""
    category, _, detail = text.partition(":")
    category, detail = category.strip().casefold(), detail.strip().casefold()
    if category in ("gap", "missing"):
        return ("principles", 0)
    if category == "avoid":
        return ("constraints.forbidden_topics", 0)
    if category == "length" and re.fullmatch(r"over\s+\d+", detail):
        return ("constraints.max_length", 0)
    return _SLOTS.get(f"{category}: {detail}")
