"""Offline REFLECT handler: map judge feedback categories to targeted persona edits, by rules.

``request.inputs = {"persona": <elixir JSON>, "feedback": <reflection brief>}`` (the
brief format of :mod:`furnace.scoring.feedback`: one block per weak probe, weakest
first). Returns ``{"edits": [...], "unused": [...], "reason": str}`` where each edit is
one of::

    {"kind": "add_principle", "text": ...}
    {"kind": "rewrite_principle", "index": i, "text": ...}
    {"kind": "drop_principle", "index": i}
    {"kind": "tone", "dimension": "formality|conciseness|humor|empathy", "delta": ±x}
    {"kind": "max_length", "value": n}
    {"kind": "markdown", "value": true|false}
    {"kind": "forbid_topic", "text": ...}

The rules, in order:

1. **Content** (the first block with a ``gap``, ``missing`` or ``avoid`` clause — the weakest
   probe's): each ``gap`` (a judge's words for what the answer failed to do, up to two) becomes a
   standing rule in the reflector's words, for every question ("does not say how serious each
   problem is" → "Always say how serious each problem is."); ``missing`` items (a person's
   words) the persona's principles do not mention yet become one
   new principle tied to that probe's message ("When asked about <keywords>, cover <items>.");
   if a principle already mentions them, that principle is rewritten the same way (so it
   ranks first for that message). An ``avoid`` item a principle contains drops that
   principle; otherwise it becomes a forbidden topic (a tightened constraint).
2. **Style** (every block, first clause per tone dimension / constraint wins): ``tone: too
   formal`` lowers formality by 0.2, ``too casual`` raises it; ``needs/less warmth`` and
   ``needs/less humour`` move empathy/humour by 0.25; ``length: too long/too short`` moves
   conciseness by 0.2; ``length: over N`` sets ``max_length`` to N; ``format`` sets markdown.
3. Anything else (free text, ``user: ...``) is listed under ``unused``. No edit at all →
   ``edits == []`` and the reason says why; the operator then refuses to copy the parent.

Deterministic: no randomness is used; the same persona and feedback give the same edits.
"""

from __future__ import annotations

import random
import re
from typing import Any

from furnace.llm.seam import LLMRequest
from furnace.scoring.feedback import Block, parse_brief, split_items

TONE_STEP = 0.2
SOFT_STEP = 0.25
_TONE = {
    "too formal": ("formality", -TONE_STEP),
    "too casual": ("formality", TONE_STEP),
    "needs warmth": ("empathy", SOFT_STEP),
    "less warmth": ("empathy", -SOFT_STEP),
    "needs humour": ("humor", SOFT_STEP),
    "needs humor": ("humor", SOFT_STEP),
    "less humour": ("humor", -SOFT_STEP),
    "less humor": ("humor", -SOFT_STEP),
}
_LENGTH = {"too long": ("conciseness", TONE_STEP), "too short": ("conciseness", -TONE_STEP)}
_OVER = re.compile(r"^over\s+(\d+)$")
_EN_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_STOP = frozenset(
    [
        "this",
        "that",
        "with",
        "from",
        "your",
        "have",
        "will",
        "when",
        "what",
        "into",
        "more",
        "about",
        "than",
        "them",
        "they",
        "their",
        "there",
        "which",
        "would",
        "could",
        "should",
        "does",
        "make",
        "write",
        "short",
    ]
)
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")


def _keywords(message: str, language: str) -> str:
    """Two content words (en) or the first Han phrase (zh) of the probe's message."""
    if language == "zh":
        runs = _HAN_RUN.findall(message)
        return max(runs, key=len)[:6] if runs else ""
    words = [w for w in _EN_WORD.findall(message.casefold()) if w not in _STOP]
    return " ".join(dict.fromkeys(words[:2]))


def _principle_text(items: list[str], keywords: str, language: str) -> str:
    if language == "zh":
        joined = "、".join(items)
        return f"谈到{keywords}时，一定讲到{joined}。" if keywords else f"始终讲到{joined}。"
    joined = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return f"When asked about {keywords}, cover {joined}." if keywords else f"Always cover {joined}."


MAX_GAPS = 2  # principles one reflection adds from a judge's gaps
_NEGATION_EN = re.compile(r"^(?:does not|doesn't|do not|don't|did not|fails to|never|is not|isn't)\s+", re.I)
_NEGATION_ZH = re.compile(r"^(?:没有|没|未|缺少|缺乏|不)")


def _general_principle(gap: str, language: str) -> str:
    """A judge's gap ("does not say how serious each problem is") as a standing rule in the reflector's own
    words ("Always say how serious each problem is."): what the answer failed to do becomes what the persona
    always does — a rule for every question, not an answer to one (the probe's words are not in it)."""
    text = " ".join(gap.split()).rstrip(" .。；;")
    if language == "zh":
        rest = _NEGATION_ZH.sub("", text, count=1)
        return f"始终要{rest}。" if rest and rest != text else ""
    rest = _NEGATION_EN.sub("", text, count=1)
    return f"Always {rest}." if rest and rest != text else ""


def _mentions(text: str, item: str) -> bool:
    return item.casefold().strip() in text.casefold()


def _content_edits(block: Block, persona: dict[str, Any], language: str) -> tuple[list[dict[str, Any]], list[str]]:
    principles = [str(p) for p in persona.get("principles") or []]
    edits: list[dict[str, Any]] = []
    notes: list[str] = []
    keywords = _keywords(block.context.get("message", ""), language)
    for category, detail in block.actionable():
        if category == "gap":
            text = _general_principle(detail, language)
            if not text or sum(e["kind"] == "add_principle" for e in edits) >= MAX_GAPS:
                continue
            if not any(p.casefold() == text.casefold() for p in principles):
                edits.append({"kind": "add_principle", "text": text})
                notes.append(f"gap {detail}")
        elif category == "missing":
            items = split_items(detail)[:3]
            if not items:
                continue
            known = [i for i, p in enumerate(principles) if any(_mentions(p, item) for item in items)]
            text = _principle_text(items, keywords, language)
            if known:
                edits.append({"kind": "rewrite_principle", "index": known[0], "text": text})
            else:
                edits.append({"kind": "add_principle", "text": text})
            notes.append(f"missing {', '.join(items)}")
        elif category == "avoid":
            item = detail.strip()
            holder = next((i for i, p in enumerate(principles) if _mentions(p, item)), None)
            if holder is not None and len(principles) > 1:
                edits.append({"kind": "drop_principle", "index": holder})
            else:
                edits.append({"kind": "forbid_topic", "text": item})
            notes.append(f"avoid {item}")
    return edits, notes


def _style_edit(category: str, detail: str) -> dict[str, Any] | None:
    detail = detail.casefold().strip()
    if category == "tone" and detail in _TONE:
        dim, delta = _TONE[detail]
        return {"kind": "tone", "dimension": dim, "delta": delta}
    if category == "length":
        if detail in _LENGTH:
            dim, delta = _LENGTH[detail]
            return {"kind": "tone", "dimension": dim, "delta": delta}
        over = _OVER.match(detail)
        if over:
            return {"kind": "max_length", "value": int(over.group(1))}
    if category == "format" and detail in ("needs markdown", "no markdown"):
        return {"kind": "markdown", "value": detail == "needs markdown"}
    return None


def propose(persona: dict[str, Any], feedback: str) -> dict[str, Any]:
    """The edits the rules derive from ``feedback`` for ``persona`` (see the module doc)."""
    language = "zh" if persona.get("language") == "zh" else "en"
    blocks = parse_brief(feedback)
    edits: list[dict[str, Any]] = []
    unused: list[str] = []
    reasons: list[str] = []
    content_done = False
    style_seen: set[str] = set()
    for block in blocks:
        if not content_done:
            content, notes = _content_edits(block, persona, language)
            if content:
                edits.extend(content)
                reasons.append(f"{block.context.get('probe', 'feedback')}: " + "; ".join(notes))
                content_done = True
        for category, detail in block.actionable():
            edit = _style_edit(category, detail)
            if edit is None:
                if category not in ("gap", "missing", "avoid"):
                    unused.append(f"{category}: {detail}")
                continue
            slot = edit.get("dimension") or edit["kind"]
            if slot not in style_seen:
                style_seen.add(slot)
                edits.append(edit)
                reasons.append(f"{category}: {detail}")
        unused.extend(block.other())
    if not edits:
        what = "; ".join(unused[:3]) or "empty feedback"
        return {"edits": [], "unused": unused, "reason": f"no feedback the rules can act on ({what})"}
    return {"edits": edits, "unused": unused, "reason": "; ".join(reasons)}


def reflect(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Edits for ``inputs.persona`` from ``inputs.feedback`` (``rng`` unused: rules are deterministic)."""
    inputs = request.inputs
    return "", propose(inputs.get("persona") or {}, str(inputs.get("feedback") or ""))
