"""Persona conflicts: hard ones refuse a fusion, soft ones are resolved with a note.

- **Hard**: a parent's ``conflicts_with`` names another parent's id or name
  (case-insensitive) → :class:`ConflictError` naming both; nothing is stored.
- **Soft**: different ``max_length`` (the strictest limit is kept), markdown vs
  no markdown (priority, tie → the model, told to prefer plain text), forbidden
  topics and ``conflicts_with`` (unioned, never dropped: a union too long to keep
  refuses the fusion), and contradictory principles (detected by
  :func:`contradiction`; resolved by the operators). Every resolution becomes a
  :class:`~furnace.domain.lineage.ResolutionNote`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from itertools import combinations
from typing import Any

from furnace.domain.elixir import MAX_LIST, Constraints, Elixir
from furnace.domain.errors import ConflictError, InputError
from furnace.domain.lineage import ResolutionNote

# (options, rule) -> (chosen index, reason); the operators back this with the ADJUDICATE task.
Adjudicator = Callable[[str, list[dict[str, Any]], str], tuple[int, str]]


def check_hard_conflicts(parents: Sequence[Elixir]) -> None:
    """Raise :class:`ConflictError` if any parent lists another in ``conflicts_with``."""
    for a, b in combinations(parents, 2):
        for x, y in ((a, b), (b, a)):
            banned = {c.strip().casefold() for c in x.conflicts_with}
            if y.id.casefold() in banned or y.name.casefold() in banned:
                raise ConflictError(
                    f"cannot fuse {x.name!r} ({x.id}) with {y.name!r} ({y.id}): {x.id} lists {y.id} in conflicts_with"
                )


# --- contradictory principles -------------------------------------------------

_NEGATIONS_EN = {"never", "not", "don't", "dont", "avoid", "no", "without", "stop", "refrain"}
_NEGATIONS_ZH = ("不要", "避免", "禁止", "别", "切勿", "不得", "不用", "勿")
# axis -> (terms meaning "+", terms meaning "-"); zh terms match as substrings.
_AXES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "length": (
        (
            "brief",
            "briefly",
            "short",
            "shorter",
            "concise",
            "concisely",
            "succinct",
            "terse",
            "简短",
            "简洁",
            "简明",
            "精炼",
        ),
        (
            "detailed",
            "detail",
            "thorough",
            "thoroughly",
            "long",
            "lengthy",
            "elaborate",
            "comprehensive",
            "in depth",
            "in-depth",
            "详细",
            "详尽",
            "深入",
        ),
    ),
    "formality": (
        ("formal", "formally", "professional", "正式", "严谨"),
        ("casual", "casually", "informal", "playful", "relaxed", "slang", "随意", "轻松", "口语"),
    ),
    "humour": (
        ("joke", "jokes", "humor", "humour", "humorous", "funny", "witty", "幽默", "玩笑", "笑话"),
        ("serious", "seriously", "严肃"),
    ),
    "markdown": (
        ("markdown", "headings", "bullet", "bullets", "bulleted", "tables", "标题", "列表"),
        ("plain text", "纯文本"),
    ),
    "emoji": (("emoji", "emojis", "表情"), ()),
}
_STOP = {
    "the",
    "a",
    "an",
    "to",
    "of",
    "and",
    "or",
    "in",
    "on",
    "for",
    "with",
    "your",
    "you",
    "be",
    "use",
    "always",
    "every",
    "each",
    "any",
    "all",
    "it",
    "is",
    "are",
    "that",
    "this",
    "when",
    "do",
}
_WORDS = re.compile(r"[a-z']+")


def _negated(text: str) -> bool:
    words = set(_WORDS.findall(text.casefold()))
    return bool(words & _NEGATIONS_EN) or any(n in text for n in _NEGATIONS_ZH)


def _has(text: str, words: set[str], term: str) -> bool:
    if " " in term or "-" in term or not term.isascii():
        return term in text
    return term in words


def _polarity(text: str, axis: str) -> int:
    low = text.casefold()
    words = set(_WORDS.findall(low))
    plus, minus = _AXES[axis]
    score = (1 if any(_has(low, words, t) for t in plus) else 0) - (1 if any(_has(low, words, t) for t in minus) else 0)
    return -score if _negated(low) else score


@lru_cache(maxsize=8192)
def _profile(text: str) -> tuple[tuple[int, ...], bool, frozenset[str]]:
    """Per-text facts the pairwise check needs: polarity per axis, negation, content words."""
    low = text.casefold()
    words = frozenset(_WORDS.findall(low)) - _STOP - _NEGATIONS_EN
    return tuple(_polarity(text, axis) for axis in _AXES), _negated(low), words


def contradiction(a: str, b: str) -> str | None:
    """The axis on which two principles contradict (``length``, ``formality``,
    ``humour``, ``markdown``, ``emoji`` or ``negation``), or None."""
    (pol_a, neg_a, wa), (pol_b, neg_b, wb) = _profile(a), _profile(b)
    for axis, pa, pb in zip(_AXES, pol_a, pol_b, strict=False):
        if pa and pb and pa != pb:
            return axis
    if neg_a != neg_b and wa and wb and len(wa & wb) / len(wa | wb) >= 0.5:
        return "negation"
    return None


# --- constraints ----------------------------------------------------------------


def resolve_constraints(parents: Sequence[Elixir], adjudicate: Adjudicator) -> tuple[Constraints, list[ResolutionNote]]:
    """Merge the parents' constraints (``parents`` highest priority first)."""
    notes: list[ResolutionNote] = []

    limits = [(p, p.constraints.max_length) for p in parents if p.constraints.max_length is not None]
    max_length = None
    if limits:  # a limit is a guardrail: the strictest one stands, whatever the priorities
        winner, max_length = min(limits, key=lambda pn: pn[1])
        if len({n for _, n in limits}) > 1 or len(limits) < len(parents):
            others = ", ".join(f"{p.name}: {p.constraints.max_length or 'none'}" for p in parents if p is not winner)
            notes.append(
                ResolutionNote(
                    field="constraints.max_length",
                    chose=f"{max_length} ({winner.name})",
                    reason=f"the strictest limit is kept (others: {others})",
                )
            )

    flags = {p.constraints.must_use_markdown for p in parents}
    markdown = parents[0].constraints.must_use_markdown
    if len(flags) > 1:
        best = {
            flag: max(p.priority for p in parents if p.constraints.must_use_markdown == flag) for flag in (True, False)
        }
        if best[True] != best[False]:
            markdown = best[True] > best[False]
            source = next(p for p in parents if p.constraints.must_use_markdown == markdown)
            reason = f"{source.name} has the higher priority ({best[markdown]} > {best[not markdown]})"
        else:
            options = [
                {
                    "label": "must use markdown" if flag else "no markdown (plain text)",
                    "value": flag,
                    "priority": best[flag],
                    "source": next(p.name for p in parents if p.constraints.must_use_markdown == flag),
                }
                for flag in (True, False)
            ]
            index, why = adjudicate("constraints.must_use_markdown", options, "plain_text")
            markdown = bool(options[index]["value"])
            reason = f"priorities tie ({best[True]}); adjudicated: {why}"
        notes.append(
            ResolutionNote(
                field="constraints.must_use_markdown", chose="markdown" if markdown else "no markdown", reason=reason
            )
        )

    topics = guardrail_union((p.constraints.forbidden_topics for p in parents), "forbidden_topics")
    return Constraints(max_length=max_length, forbidden_topics=topics, must_use_markdown=markdown), notes


def guardrail_union(lists: Iterable[Sequence[str]], field: str) -> tuple[str, ...]:
    """Every item of every list, once (case-insensitive), in order. A guardrail is never dropped: when
    the union does not fit the elixir's list limit the fusion is refused instead of cutting it."""
    out: list[str] = []
    seen: set[str] = set()
    for items in lists:
        for item in items:
            if item.casefold() not in seen:
                seen.add(item.casefold())
                out.append(item)
    if len(out) > MAX_LIST:
        raise InputError(
            f"the parents' {field} together have {len(out)} entries, more than a persona can keep ({MAX_LIST}); "
            "fusing them would drop a guardrail",
            field=field,
        )
    return tuple(out)
