"""Offline JUDGE handler: scores an answer against the *target*, from checkable evidence, zh and en.

``request.inputs = {"persona": <elixir JSON>, "message": str, "answer": str,
"rubric": "fidelity" | "preference" | "tone", "target": {...} | None}`` where the
target is the probe's brief plus its held-out rubric (``expertise``, ``expect``,
``avoid``, ``tone``, ``constraints``, ``language``). Returns ``{"score", "reason",
"feedback"}``: the reason names the evidence, the feedback says what was missing or
wrong in the clause format of :mod:`furnace.scoring.feedback`.

Not circular: fidelity counts the *target's* descriptors in the answer, never words
taken from the persona under test, and tone compares the answer's measured register,
length, humour and warmth (this module's own marker lists; it shares no phrase table
with the REPLY rules) with the target's tone. So offline fitness measures how well a
search moves a persona towards a hidden target on a synthetic landscape — not language
quality. Without a target, fidelity falls back to the message's own terms and tone to
the persona's own settings (a consistency check). Deterministic: no randomness is used.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from furnace.domain.text import CONCISE, EMOJI, FORMAT, LENGTH, LIVELY, MORE, TONE, read_preference, terms
from furnace.llm.seam import LLMRequest
from furnace.scoring.feedback import clause, join_clauses

_FORMAL = {
    "en": ("therefore", "however", "recommend", "please", "furthermore", "regarding", "consider", "ensure"),
    "zh": ("您", "建议", "因此", "此外", "请", "应当", "综上", "务必"),
}
_CASUAL = {
    "en": ("!", "hey", "let's", "awesome", "great", "cool", "fun", "you'll", "it's", "😊", "🙂"),
    "zh": ("！", "哈", "吧", "呀", "啦", "咱", "嘿", "哦", "😊"),
}
_EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")
_MARKDOWN = re.compile(r"(^\s{0,3}#{1,6}\s)|(^\s*[-*+]\s)|(^\s*\d+\.\s)|(\*\*[^*]+\*\*)", re.M)
_STOP = {
    "with",
    "that",
    "this",
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
}


def _terms(text: str) -> set[str]:
    return terms(text, min_len=4, stop=_STOP)


def _count(markers: tuple[str, ...], text: str) -> int:
    lowered = text.casefold()
    return sum(lowered.count(m) for m in markers)


_WARMTH = {
    "en": ("understand", "get why", "matters to you", "sorry", "i hear you", "feel"),
    "zh": ("理解", "明白", "懂你", "很重要", "辛苦", "抱歉"),
}
_HUMOUR = {
    "en": ("levity", "remember:", "rocket science", "joke", "haha", "funny"),
    "zh": ("轻松", "火箭", "别忘了", "哈哈", "玩笑"),
}
_HAN = re.compile(r"[\u4e00-\u9fff]")
_EN_WORD = re.compile(r"[a-z0-9][a-z0-9'-]{2,}")
_EN_STOP = _STOP | {"the", "and", "for", "are", "how", "why", "who", "its", "one", "any"}
_GAP = 0.2  # a tone dimension further than this from the target earns a feedback clause


def _present(descriptor: str, answer: str) -> bool:
    """Whether ``answer`` (casefolded) contains ``descriptor``: en — every content word's stem
    (first five letters) starts a word of the answer; zh — at least 60% of its character bigrams."""
    d = descriptor.casefold().strip()
    if not d:
        return False
    if _HAN.search(d):
        han = "".join(re.findall(r"[\u4e00-\u9fff]+", d))
        grams = {han[i : i + 2] for i in range(max(1, len(han) - 1))}
        return sum(g in answer for g in grams) >= 0.6 * len(grams)
    words = [w for w in _EN_WORD.findall(d) if w not in _EN_STOP] or _EN_WORD.findall(d)
    return bool(words) and all(re.search(r"\b" + re.escape(w[:5]), answer) for w in words)


def _fidelity(target: dict[str, Any] | None, answer: str, lang: str, message: str) -> tuple[float, str, list[str]]:
    """Target fit: the target's expertise and expected descriptors present, avoided ones absent,
    the target's constraints kept. Without a target: the message's own terms only."""
    low = answer.casefold()
    if not target:
        wanted = sorted(_terms(message))
        found = [t for t in wanted if t in low]
        coverage = len(found) / len(wanted) if wanted else 1.0
        return 0.3 + 0.7 * coverage, f"no target given: {len(found)}/{len(wanted)} message terms answered", []
    wanted = list(dict.fromkeys([*target.get("expertise", []), *target.get("expect", [])]))
    found = [d for d in wanted if _present(d, low)]
    missing = [d for d in wanted if d not in found]
    score = 0.2 + 0.8 * (len(found) / len(wanted)) if wanted else 1.0
    notes = [f"{len(found)}/{len(wanted)} target descriptors present"] if wanted else ["target names no content"]
    feedback = [clause("missing", ", ".join(missing[:3]))] if missing else []
    for item in target.get("avoid", []):
        if _present(item, low):
            score *= 0.6
            notes.append(f"contains avoided {item!r}")
            feedback.append(clause("avoid", item))
    constraints = target.get("constraints") or {}
    limit = constraints.get("max_length")
    if limit and len(answer) > limit:
        score *= 0.8
        notes.append(f"over the target length ({len(answer)}>{limit})")
        feedback.append(clause("length", f"over {limit}"))
    markdown = constraints.get("must_use_markdown")
    if markdown is not None and bool(_MARKDOWN.search(answer)) != markdown:
        score *= 0.85
        notes.append("markdown missing" if markdown else "markdown not wanted")
        feedback.append(clause("format", "needs markdown" if markdown else "no markdown"))
    return score, "; ".join(notes), feedback


def _measured_tone(answer: str, lang: str, limit: int) -> dict[str, float]:
    """Tone dimensions read off the answer with the judge's own marker lists."""
    formal, casual = _count(_FORMAL[lang], answer), _count(_CASUAL[lang], answer)
    return {
        "formality": (formal + 1) / (formal + casual + 2),
        "conciseness": max(0.0, 1.0 - len(answer) / (2 * limit)),
        "humor": 0.8 if _count(_HUMOUR[lang], answer) else 0.2,
        "empathy": 0.8 if _count(_WARMTH[lang], answer) else 0.2,
    }


_TONE_CLAUSES = {  # dimension -> (clause when measured above target, clause when below)
    "formality": (("tone", "too formal"), ("tone", "too casual")),
    "conciseness": (("length", "too short"), ("length", "too long")),
    "humor": (("tone", "less humour"), ("tone", "needs humour")),
    "empathy": (("tone", "less warmth"), ("tone", "needs warmth")),
}


def _tone(
    persona: dict[str, Any], target: dict[str, Any] | None, answer: str, lang: str
) -> tuple[float, str, list[str]]:
    """Distance between the answer's measured tone and the target's tone (each dimension the target
    sets). Without a target tone: formality and conciseness against the persona's own settings
    (a consistency check, not a search objective)."""
    constraints = (target or {}).get("constraints") or persona.get("constraints") or {}
    limit = constraints.get("max_length") or 800
    measured = _measured_tone(answer, lang, limit)
    wanted = dict((target or {}).get("tone") or {})
    source = "target"
    if not wanted:
        tone = persona.get("tone", {}) or {}
        wanted = {d: float(tone.get(d, 0.5)) for d in ("formality", "conciseness")}
        source = "persona's own settings"
    gaps = {d: measured[d] - float(v) for d, v in sorted(wanted.items())}
    score = 1.0 - sum(abs(g) for g in gaps.values()) / len(gaps)
    reason = f"vs {source}: " + ", ".join(f"{d} {measured[d]:.2f}/{float(wanted[d]):.2f}" for d in gaps)
    feedback = [
        clause(*_TONE_CLAUSES[d][0 if g > 0 else 1])
        for d, g in sorted(gaps.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
        if round(abs(g), 6) > _GAP and source == "target"  # measured 0.8 vs 0.6 is within the gap
    ]
    return score, reason, feedback


def _preference(persona: dict[str, Any], answer: str, lang: str) -> tuple[float, str, list[str]]:
    """The persona's learned style preferences (what its user taught it) followed."""
    prefs = persona.get("style_preferences", []) or []
    if not prefs:
        return 1.0, "no learned preferences to check", []
    met: list[str] = []
    missed: list[str] = []
    for pref in prefs:
        dim, value = str(pref.get("dimension", "")).casefold(), str(pref.get("value", "")).casefold()
        known, wanted = read_preference(pref)
        if known == EMOJI:
            ok = (len(_EMOJI.findall(answer)) > 0) == (wanted == MORE)
        elif known == LENGTH:
            ok = len(answer) <= 400 if wanted == CONCISE else len(answer) > 200
        elif known == FORMAT:
            ok = bool(_MARKDOWN.search(answer)) != (wanted == "plain")
        elif known == TONE:
            casual = _count(_CASUAL[lang], answer) > _count(_FORMAL[lang], answer)
            ok = casual == (wanted == LIVELY)
        else:
            ok = value[:6] in answer.casefold()
        (met if ok else missed).append(f"{dim}={value}")
    score = len(met) / len(prefs)
    reason = f"{len(met)}/{len(prefs)} preferences followed" + (f" (missed {', '.join(missed[:3])})" if missed else "")
    return score, reason, [clause("user", f"preference {m} not followed") for m in missed[:2]]


def judge(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Score ``inputs.answer`` for ``inputs.rubric`` against ``inputs.target`` (see the module doc)."""
    inputs = request.inputs
    persona = inputs.get("persona") or {}
    target = inputs.get("target") or None
    answer = str(inputs.get("answer") or "")
    rubric = str(inputs.get("rubric") or "fidelity")
    language = (target or {}).get("language") or persona.get("language")
    lang = "zh" if language == "zh" else "en"
    if not answer.strip():
        reason = "empty answer" if lang == "en" else "回答为空"
        parsed = {"score": 0.0, "reason": reason, "feedback": "length: too short"}
    else:
        if rubric == "tone":
            score, reason, feedback = _tone(persona, target, answer, lang)
        elif rubric == "preference":
            score, reason, feedback = _preference(persona, answer, lang)
        else:
            score, reason, feedback = _fidelity(target, answer, lang, str(inputs.get("message") or ""))
        parsed = {
            "score": round(min(1.0, max(0.0, score)), 4),
            "reason": reason,
            "feedback": join_clauses(feedback),
        }
    return json.dumps(parsed, ensure_ascii=False), parsed
