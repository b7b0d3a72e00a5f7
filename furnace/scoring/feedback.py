"""Judge feedback text: short, structured notes on what an answer missed or got wrong.

A judge returns, with each score, ``feedback`` made of ``category: detail`` clauses
joined by ``"; "``, e.g. ``missing: statistics, habit building; tone: too formal``.
Categories a rule engine can act on:

- ``missing: a, b`` — target descriptors the answer does not contain;
- ``avoid: x`` — a descriptor the target wants left out but the answer contains;
- ``tone: too formal | too casual | needs warmth | less warmth | needs humour | less humour``;
- ``length: too long | too short | over N``;
- ``format: needs markdown | no markdown``.

Anything else (free text from a real judge, or ``user: ...`` from a person) is kept
as is: a model can read it; the offline rules cannot and say so.

A *reflection brief* (what the reflective operator reads) is a few blocks, one per
weak probe, separated by blank lines::

    probe: churn-numbers (0.41)
    message: Our monthly churn went from 3% to 5%...
    missing: statistics
    tone: too formal

This module only formats and parses that text; it never decides an edit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

ACTIONABLE = ("missing", "avoid", "tone", "length", "format")
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
        re.compile(r"shorter|shorten|more concise|too long|trim|cut it|简短|精简|短一点|缩短|太长|删减", re.I),
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
    (re.compile(r"bullet|markdown|headings?|列表|要点|标题", re.I), "format: needs markdown"),
    (re.compile(r"plain text|no markdown|no bullets|纯文本|不要列表", re.I), "format: no markdown"),
)
_MENTION = re.compile(r"(?:mention|cover|talk about|include|add|提到|讲讲|加上|补充)\s*[:：]?\s*(.+)", re.I)
_AVOID = re.compile(
    r"(?:don't|do not|never|stop)\s+(?:mention|talk about|bring up)\s+(.+)|(?:不要|别)(?:提|再提)(.+)", re.I
)


def revision_feedback(suggestions: Sequence[str]) -> str:
    """A reflection brief from a person's accepted revision suggestions (the revision chat) or
    hand-written clauses: the categories a rule engine understands where a suggestion states
    one, else ``user: ...``."""
    lines: list[str] = ["probe: user-revision"]
    for suggestion in suggestions:
        text = " ".join(suggestion.split())
        if not text:
            continue
        stated = parse_clauses(text)
        if all(category in ACTIONABLE for category, _ in stated):  # already in the clause format
            lines.extend(clause(category, detail) for category, detail in stated)
            continue
        found = [c for pattern, c in _REVISION_RULES if pattern.search(text)]
        avoid = _AVOID.search(text)
        if avoid:
            found.append(clause("avoid", (avoid.group(1) or avoid.group(2)).strip(" .。！!")))
        else:
            mention = _MENTION.search(text)
            if mention:
                found.append(clause("missing", mention.group(1).strip(" .。！!")[:80]))
        lines.extend(dict.fromkeys(found) or [clause("user", text[:200])])
    return "\n".join(lines) if len(lines) > 1 else ""
