"""Offline JUDGE handler: scores an answer against the *target*, from checkable evidence, zh and en.

``request.inputs = {"message": str, "answer": str, "rubric": "fidelity" | "preference" | "tone",
"target": {...} | None, "reference": {...}, "subject": str}``: the probe, the answer and the rubric —
never the persona (``subject`` only scopes the response cache per persona; no rule reads it). The
target is the probe's brief plus its held-out rubric (``expertise``, ``expect``, ``avoid``, ``tone``,
``constraints``, ``language``); ``reference`` is the yardstick the scorer derives
when there is no target (the persona's declared tone and length limit, or its learned preferences for
the ``preference`` rubric). Returns ``{"score", "reason", "feedback"}``: the reason names the
evidence, the feedback names the gaps in the clause format of :mod:`furnace.scoring.feedback` — in
the judge's own words (``gap: does not say how serious each problem is``), never the rubric's.

Not circular and not quotable: fidelity counts the target's *concepts* expressed in the answer through
the judge's own lexicon (:mod:`furnace.llm.offline.lexicon`: synonyms and paraphrases per descriptor;
words repeated from the question and negated mentions do not count), and tone compares the answer's
measured register, length, humour and warmth (this module's own marker lists; it shares no phrase table
with the REPLY rules) with the target's tone. So offline fitness measures how well a search moves a
persona towards a hidden target on a synthetic landscape — not language quality. Without a target,
fidelity falls back to the message's own terms and tone to the reference (a consistency check).
Deterministic: no randomness is used.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from furnace.domain.text import CONCISE, EMOJI, FORMAT, LENGTH, LIVELY, MORE, TONE, read_preference, terms
from furnace.llm.offline.lexicon import concept, expressed, gap
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
_GAP = 0.2  # a tone dimension further than this from the target earns a feedback clause


def _unquoted(answer: str, message: str) -> str:
    """``answer`` without the words it repeats from the question (its opening sentence, or the start of it,
    quoted back): repeating the question says nothing about it."""
    text = answer
    first = re.split(r"[.?!。？！\n]", message.strip(), maxsplit=1)[0].strip()
    for piece in (message.strip(), first, " ".join(first.split()[:12]), first[:29]):
        if len(piece) >= 8:
            text = text.replace(piece.casefold(), " ")
    return text


def _fidelity(target: dict[str, Any] | None, answer: str, lang: str, message: str) -> tuple[float, str, list[str]]:
    """Target fit: the target's expertise and expected concepts expressed (:mod:`lexicon`: the judge's own
    synonyms and paraphrases, never the persona's words), avoided ones absent, the target's constraints
    kept. Feedback names each gap in the judge's words, never the rubric's. Without a target: the
    message's own terms only."""
    low = answer.casefold()
    if not target:
        wanted = sorted(_terms(message))
        found = [t for t in wanted if t in low]
        coverage = len(found) / len(wanted) if wanted else 1.0
        return 0.3 + 0.7 * coverage, f"no target given: {len(found)}/{len(wanted)} message terms answered", []
    said = _unquoted(low, message.casefold())
    concepts = [concept(d) for d in dict.fromkeys([*target.get("expertise", []), *target.get("expect", [])])]
    hit = [c for c in concepts if expressed(c, said)]
    gaps = [c for c in concepts if c not in hit]
    score = 0.2 + 0.8 * (len(hit) / len(concepts)) if concepts else 1.0
    notes = [f"{len(hit)}/{len(concepts)} target concepts expressed"] if concepts else ["target names no content"]
    feedback = [clause("gap", gap(c, lang)) for c in gaps[:3]]
    for item in target.get("avoid", []):
        avoided = concept(item)
        if expressed(avoided, said):
            score *= 0.6
            notes.append("contains something the target wants left out")
            feedback.append(clause("avoid", gap(avoided, lang)))
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
    persona = inputs.get("reference") or {}  # the yardstick without a target; never the persona's prompt
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
