"""Offline writing tasks: GENERATE, REVISE, EXTRACT_PREFERENCES, COMPRESS.

``generate`` and ``revise`` live in :mod:`writing_generate` and :mod:`writing_revise`
(re-exported here, where the engine's registry points). This module holds the
two small ones:

- ``extract_preferences`` — inputs ``suggestions`` (list of str), ``before`` and
  ``after`` (``{"title", "body"}``), optional ``language``. Maps each recognised
  suggestion whose change is observed in before/after to ``(dimension, value)``:
  lively/formal → ``tone``; add/remove emoji → ``emoji`` more/fewer;
  shorten/lengthen → ``length`` concise/detailed. A suggestion that asks several things
  ("Too formal, make it livelier and add an emoji") is read part by part, so each is learned. Output
  ``{"preferences": [{"dimension", "value", "evidence", "weight"}]}``.
- ``compress`` — inputs ``turns`` (``[{"role", "content"}]``), ``target_tokens``,
  optional ``previous_summary``. Extractive: the first sentence of each turn,
  cut to the target (engine token estimate). Output text is the summary.
"""

from __future__ import annotations

import random
import re
from typing import Any

from furnace.domain.text import detect_language, word_count
from furnace.llm.offline.engine import estimate_tokens
from furnace.llm.offline.writing_generate import generate
from furnace.llm.offline.writing_revise import revise
from furnace.llm.offline.writing_text import count_emoji, first_sentence
from furnace.llm.seam import LLMRequest
from furnace.writing.addressing import parse_instruction

__all__ = ["generate", "revise", "extract_preferences", "compress"]

_KIND = {
    "lively": "lively",
    "casual": "lively",
    "formal": "formal",
    "emoji_add": "emoji_add",
    "emoji_remove": "emoji_remove",
    "shorten": "shorten",
    "expand": "lengthen",
}
_DIMENSION = {
    "lively": ("tone", "lively"),
    "formal": ("tone", "formal"),
    "emoji_add": ("emoji", "more"),
    "emoji_remove": ("emoji", "fewer"),
    "shorten": ("length", "concise"),
    "lengthen": ("length", "detailed"),
}


def _observed(kind: str, before: dict[str, str], after: dict[str, str], zh: bool) -> tuple[bool, str]:
    """Whether the before/after change confirms the intent, and a short description."""
    b_text, a_text = before.get("title", "") + before.get("body", ""), after.get("title", "") + after.get("body", "")
    if kind.startswith("emoji"):
        b, a = count_emoji(b_text), count_emoji(a_text)
        return (a > b if kind == "emoji_add" else a < b), (f"emoji {b}→{a}")
    if kind in ("shorten", "lengthen"):  # counted as the piece's versions count their length
        language = "zh" if zh else "en"
        b, a = word_count(before.get("body", ""), language), word_count(after.get("body", ""), language)
        unit = "字" if zh else " words"
        return (a < b if kind == "shorten" else a > b), f"{b}→{a}{unit}"
    changed = b_text != a_text
    return changed, ("正文已改写" if zh else "text reworded") if changed else ("未改动" if zh else "unchanged")


# Where one suggestion asks several things ("too formal, make it livelier and add an emoji", "活泼点，再加个表情")
_PARTS = re.compile(r"[,，、;；。!！]+|\s+(?:and|also|then|plus)\s+|(?:然后|并且|同时|再)", re.I)


def _asked_kinds(suggestion: str, language: str) -> list[str]:
    """The preference kinds one suggestion asks for, in order and once each: the whole suggestion's
    operations, then each part's (the instruction parser reads one request per text)."""
    texts = [suggestion, *(p for p in _PARTS.split(suggestion) if p and p.strip())]
    kinds: dict[str, None] = {}
    for text in texts:
        for op in parse_instruction(text.strip(), language).operations:
            kind = _KIND.get(op.kind)
            if kind is not None:
                kinds[kind] = None
    return list(kinds)


def extract_preferences(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """(dimension, value) pairs from suggestions whose edit is visible in the before/after change.

    Only an applied edit teaches anything: a suggestion whose change is not observed
    in the before/after texts gives no preference.
    """
    suggestions = [str(s) for s in request.inputs.get("suggestions") or []]
    before = dict(request.inputs.get("before") or {})
    after = dict(request.inputs.get("after") or {})
    language = request.inputs.get("language") or detect_language(" ".join(suggestions) + after.get("body", ""))
    zh = language == "zh"
    found: dict[str, dict[str, Any]] = {}
    for suggestion in suggestions:
        for kind in _asked_kinds(suggestion, language):
            confirmed, observed = _observed(kind, before, after, zh)
            if not confirmed:
                continue
            dimension, value = _DIMENSION[kind]
            evidence = f"用户建议「{suggestion}」；{observed}" if zh else f'user asked "{suggestion}"; {observed}'
            found[dimension] = {"dimension": dimension, "value": value, "evidence": evidence, "weight": 0.6}
    return "", {"preferences": list(found.values())}


def compress(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Extractive summary: the first sentence of each turn, cut to ``target_tokens``."""
    turns = request.inputs.get("turns") or []
    target = max(1, int(request.inputs.get("target_tokens") or 200))
    lines: list[str] = []
    previous = str(request.inputs.get("previous_summary") or "").strip()
    if previous:
        lines.append(previous)
    for turn in turns:
        content = str(turn.get("content", "")).strip()
        if content:
            lines.append(f"{turn.get('role', 'user')}: {first_sentence(content)}")
    summary = "\n".join(lines)
    return cut_to_tokens(summary, target), None


def cut_to_tokens(text: str, target: int) -> str:
    """The newest part of ``text`` that fits ``target`` tokens: whole lines are
    dropped from the front (the oldest material) first, then characters."""
    if estimate_tokens(text) <= target:
        return text
    lines = text.split("\n")
    while len(lines) > 1 and estimate_tokens("\n".join(lines)) > target:
        lines.pop(0)
    out = "\n".join(lines)
    lo, hi = 0, len(out)
    while lo < hi:  # binary search on a suffix length that fits
        mid = (lo + hi + 1) // 2
        if estimate_tokens(out[len(out) - mid :]) <= target:
            lo = mid
        else:
            hi = mid - 1
    return out[len(out) - lo :]
