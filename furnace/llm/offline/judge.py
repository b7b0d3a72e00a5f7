"""Offline JUDGE handler: scores an answer from checkable evidence, zh and en.

``request.inputs = {"persona": <elixir JSON>, "message": str, "answer": str,
"rubric": "fidelity" | "preference" | "tone"}``. Returns ``{"score", "reason"}``
where the reason names the evidence (terms found, register markers, length,
markdown, forbidden topics). Deterministic: no randomness is used.
"""

from __future__ import annotations

import random
import re
from typing import Any

from furnace.domain.text import CONCISE, EMOJI, FORMAT, LENGTH, LIVELY, MORE, TONE, read_preference, terms
from furnace.llm.seam import LLMRequest

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


def _fidelity(persona: dict[str, Any], answer: str, lang: str) -> tuple[float, str]:
    source = " ".join(persona.get("expertise", []) + persona.get("principles", []))
    wanted = _terms(source)
    found = sorted(wanted & _terms(answer))
    coverage = min(1.0, len(found) / max(1.0, min(6.0, 0.5 * len(wanted))))
    score = 0.3 + 0.7 * coverage
    notes = [f"{len(found)} persona terms present ({', '.join(found[:4]) or 'none'})"]
    constraints = persona.get("constraints", {}) or {}
    forbidden = [t for t in constraints.get("forbidden_topics", []) if t.casefold() in answer.casefold()]
    if forbidden:
        score *= 0.3
        notes.append(f"mentions forbidden {', '.join(forbidden)}")
    max_len = constraints.get("max_length")
    if max_len and len(answer) > max_len:
        score *= 0.7
        notes.append(f"over max_length ({len(answer)}>{max_len})")
    if constraints.get("must_use_markdown") and not _MARKDOWN.search(answer):
        score *= 0.8
        notes.append("no markdown")
    return score, "; ".join(notes)


def _tone(persona: dict[str, Any], answer: str, lang: str) -> tuple[float, str]:
    tone = persona.get("tone", {}) or {}
    formal, casual = _count(_FORMAL[lang], answer), _count(_CASUAL[lang], answer)
    measured_formality = (formal + 1) / (formal + casual + 2)
    limit = (persona.get("constraints", {}) or {}).get("max_length") or 800
    measured_conciseness = max(0.0, 1.0 - len(answer) / (2 * limit))
    d_form = abs(measured_formality - float(tone.get("formality", 0.5)))
    d_conc = abs(measured_conciseness - float(tone.get("conciseness", 0.5)))
    score = 1.0 - (d_form + d_conc) / 2
    return score, (
        f"{formal} formal / {casual} casual markers (formality {measured_formality:.2f} vs "
        f"{float(tone.get('formality', 0.5)):.2f}); length {len(answer)} (conciseness "
        f"{measured_conciseness:.2f} vs {float(tone.get('conciseness', 0.5)):.2f})"
    )


def _preference(persona: dict[str, Any], answer: str, lang: str) -> tuple[float, str]:
    prefs = persona.get("style_preferences", []) or []
    if not prefs:
        return 1.0, "no learned preferences to check"
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
    return score, f"{len(met)}/{len(prefs)} preferences followed" + (
        f" (missed {', '.join(missed[:3])})" if missed else ""
    )


_RUBRICS = {"fidelity": _fidelity, "tone": _tone, "preference": _preference}


def judge(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Score ``inputs.answer`` for ``inputs.rubric`` from checkable evidence."""
    inputs = request.inputs
    persona = inputs.get("persona") or {}
    answer = str(inputs.get("answer") or "")
    rubric = str(inputs.get("rubric") or "fidelity")
    lang = "zh" if persona.get("language") == "zh" else "en"
    if not answer.strip():
        parsed = {"score": 0.0, "reason": "empty answer" if lang == "en" else "回答为空"}
    else:
        score, reason = _RUBRICS.get(rubric, _fidelity)(persona, answer, lang)
        parsed = {"score": round(min(1.0, max(0.0, score)), 4), "reason": reason}
    import json

    return json.dumps(parsed, ensure_ascii=False), parsed
