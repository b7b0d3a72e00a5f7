"""A second, independent offline JUDGE (model ``furnace-offline-judge2-v1``): the same task, other evidence.

Two offline judges that shared their evidence would agree by construction, and
their agreement would say nothing. This one reads the same request inputs as
:mod:`furnace.llm.offline.judge` (``persona``, ``message``, ``answer``, ``rubric``,
``target``) and returns the same ``{"score", "reason", "feedback"}``, but shares
no marker list or phrase table with it or with the REPLY rules, and weighs
differently:

- **fidelity** — partial credit per descriptor (the share of its words whose
  stem, after stripping common suffixes, occurs in the answer; zh: the share of
  its characters), ``expect`` descriptors weighted twice the ``expertise`` ones;
  an avoided descriptor, an answer over the target's length and markdown against
  its wish each *subtract* a fixed amount (the first judge multiplies).
- **tone** — register read from structure (contractions, exclamations and
  emoji per sentence, sentence length; zh: 您 versus 你, sentence-final particles),
  length against 1.5 × the limit, humour and warmth from this module's own short
  lexicons; the gaps to the target are combined as a weighted root-mean-square
  (formality 0.35, conciseness 0.25, humour 0.2, warmth 0.2).
- **preference** — the persona's learned preferences, checked with word counts
  and this module's own patterns.

Offline, both judges are rules: their agreement exercises the agreement
statistics (docs/evaluation.md); it measures nothing about language quality.
Deterministic: no randomness is used.
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

from furnace.domain.text import CONCISE, EMOJI, FORMAT, LENGTH, LIVELY, MORE, TONE, read_preference
from furnace.llm.seam import LLMRequest

HUMOUR_WORDS = {
    "en": ("second look", "a touch of", "unless it's", "pun", "lol", "wink", "tongue-in-cheek"),
    "zh": ("多看一眼", "适度", "除非真的", "逗", "调侃", "幽默"),
}
WARMTH_WORDS = {
    "en": ("see why", "totally get", "this matters", "glad", "appreciate", "care about", "you're not alone"),
    "zh": ("这件事对", "为啥会问", "乐意", "感谢", "关心", "不容易"),
}
_WEIGHTS = {"formality": 0.35, "conciseness": 0.25, "humor": 0.2, "empathy": 0.2}
_SUFFIXES = ("ations", "ation", "ments", "ment", "ness", "ings", "ing", "ies", "ed", "es", "ly", "s")
_WORD = re.compile(r"[a-z][a-z0-9'’-]*")
_HANZI = re.compile(r"[\u4e00-\u9fff]")
_CONTRACTION = re.compile(r"[a-z](?:'|’)(?:s|re|ll|ve|d|m|t)\b")
_SENTENCE = re.compile(r"[.!?。！？]+")
_EXCLAIM = re.compile(r"[!！]")
_PICTOGRAPH = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")
_ZH_PARTICLE = re.compile(r"[吧呀啦哦嘛呢～](?=[。！？!?～\s]|$)")
_LIST_OR_HEADING = re.compile(r"^\s*(?:#+\s|[-*]\s|\d+[.)]\s)", re.M)
_BOLD = re.compile(r"\*\*\S")
_SKIP = frozenset({"the", "and", "for", "with", "that", "this", "are", "its", "into", "from", "your", "about"})
_AVOID_PENALTY, _LENGTH_PENALTY, _FORMAT_PENALTY = 0.25, 0.15, 0.1


def _stem(word: str) -> str:
    word = word.strip("'’-")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _credit(descriptor: str, answer_stems: set[str], answer_han: set[str]) -> float:
    """The share of ``descriptor`` present: its content words' stems (en) or its characters (zh)."""
    han = set(_HANZI.findall(descriptor))
    if han:
        return len(han & answer_han) / len(han)
    words = [w for w in _WORD.findall(descriptor.casefold()) if w not in _SKIP and len(w) > 2]
    if not words:
        return 0.0
    return sum(_stem(w) in answer_stems for w in words) / len(words)


def _markdown(answer: str) -> bool:
    return bool(_LIST_OR_HEADING.search(answer) or _BOLD.search(answer))


def _fidelity(
    persona: dict[str, Any], target: dict[str, Any] | None, answer: str, lang: str, message: str
) -> tuple[float, str, list[str]]:
    stems = {_stem(w) for w in _WORD.findall(answer.casefold())}
    han = set(_HANZI.findall(answer))
    if not target:
        asked = [w for w in _WORD.findall(message.casefold()) if len(w) > 4 and w not in _SKIP]
        share = sum(_stem(w) in stems for w in asked) / len(asked) if asked else 1.0
        return 0.25 + 0.75 * share, f"no target: {share:.0%} of the message's longer words taken up", []
    weighted = [(d, 1.0) for d in target.get("expertise", [])] + [(d, 2.0) for d in target.get("expect", [])]
    notes: list[str] = []
    feedback: list[str] = []
    if weighted:
        credits = [(d, w, _credit(str(d), stems, han)) for d, w in weighted]
        coverage = sum(w * c for _, w, c in credits) / sum(w for _, w, _ in credits)
        score = 0.1 + 0.9 * coverage
        notes.append(f"weighted coverage {coverage:.2f} of {len(credits)} descriptors")
        weak = [str(d) for d, _, c in sorted(credits, key=lambda x: (x[2], -x[1])) if c < 0.5]
        if weak:
            feedback.append("missing: " + ", ".join(weak[:3]))
    else:
        score = 1.0
        notes.append("the target names no content")
    for item in target.get("avoid", []):
        if _credit(str(item), stems, han) >= 0.5:
            score -= _AVOID_PENALTY
            notes.append(f"touches avoided {item!r}")
            feedback.append(f"avoid: {item}")
    constraints = target.get("constraints") or {}
    limit = constraints.get("max_length")
    if limit and len(answer) > limit:
        score -= _LENGTH_PENALTY * min(1.0, len(answer) / limit - 1.0 + 0.5)
        notes.append(f"{len(answer)} characters for a limit of {limit}")
        feedback.append(f"length: over {limit}")
    wants_markdown = constraints.get("must_use_markdown")
    if wants_markdown is not None and _markdown(answer) != wants_markdown:
        score -= _FORMAT_PENALTY
        notes.append("markdown against the target's wish")
        feedback.append("format: needs markdown" if wants_markdown else "format: no markdown")
    return score, "; ".join(notes), feedback


def _hits(words: tuple[str, ...], answer: str) -> int:
    low = answer.casefold()
    return sum(1 for w in words if w in low)


def _register(answer: str, lang: str) -> float:
    """Formality 0..1 read from structure, not from word lists."""
    sentences = max(1, len([s for s in _SENTENCE.split(answer) if s.strip()]))
    casual = len(_EXCLAIM.findall(answer)) + len(_PICTOGRAPH.findall(answer))
    if lang == "zh":
        casual += len(_ZH_PARTICLE.findall(answer))
        polite = 0.3 if "您" in answer else (-0.1 if "你" in answer else 0.0)
        return min(1.0, max(0.0, 0.6 + polite - 0.5 * min(1.0, casual / sentences)))
    casual += len(_CONTRACTION.findall(answer.casefold()))
    words_per_sentence = len(_WORD.findall(answer.casefold())) / sentences
    long_sentences = min(1.0, words_per_sentence / 20)
    return min(1.0, max(0.0, 0.55 + 0.45 * long_sentences - 0.5 * min(1.0, casual / sentences)))


def _measure(answer: str, lang: str, limit: int) -> dict[str, float]:
    return {
        "formality": _register(answer, lang),
        "conciseness": 1.0 - min(1.0, len(answer) / (1.5 * limit)),
        "humor": min(1.0, 0.15 + 0.35 * _hits(HUMOUR_WORDS[lang], answer)),
        "empathy": min(1.0, 0.15 + 0.35 * _hits(WARMTH_WORDS[lang], answer)),
    }


_CLAUSES = {  # dimension -> (measured above the target, below it)
    "formality": ("tone: too formal", "tone: too casual"),
    "conciseness": ("length: too short", "length: too long"),
    "humor": ("tone: less humour", "tone: needs humour"),
    "empathy": ("tone: less warmth", "tone: needs warmth"),
}


def _tone(
    persona: dict[str, Any], target: dict[str, Any] | None, answer: str, lang: str, message: str
) -> tuple[float, str, list[str]]:
    constraints = (target or {}).get("constraints") or persona.get("constraints") or {}
    measured = _measure(answer, lang, int(constraints.get("max_length") or 800))
    wanted = {d: float(v) for d, v in ((target or {}).get("tone") or {}).items() if d in _WEIGHTS}
    against = "target"
    if not wanted:
        own = persona.get("tone", {}) or {}
        wanted = {d: float(own.get(d, 0.5)) for d in ("formality", "conciseness")}
        against = "the persona's own tone"
    gaps = {d: measured[d] - v for d, v in sorted(wanted.items())}
    total = sum(_WEIGHTS[d] for d in gaps)
    score = 1.0 - math.sqrt(sum(_WEIGHTS[d] * g * g for d, g in gaps.items()) / total)
    reason = f"measured against {against}: " + ", ".join(f"{d} {measured[d]:.2f} for {wanted[d]:.2f}" for d in gaps)
    feedback = (
        [_CLAUSES[d][0 if g > 0 else 1] for d, g in sorted(gaps.items(), key=lambda kv: -abs(kv[1])) if abs(g) > 0.25]
        if against == "target"
        else []
    )
    return score, reason, feedback


def _preference(
    persona: dict[str, Any], target: dict[str, Any] | None, answer: str, lang: str, message: str
) -> tuple[float, str, list[str]]:
    prefs = persona.get("style_preferences", []) or []
    if not prefs:
        return 1.0, "the persona has learned no preferences", []
    size = len(_HANZI.findall(answer)) // 2 if lang == "zh" else len(_WORD.findall(answer.casefold()))
    kept: list[str] = []
    broken: list[str] = []
    for pref in prefs:
        known, wanted = read_preference(pref)
        name = f"{pref.get('dimension', '')}={pref.get('value', '')}"
        if known == EMOJI:
            ok = bool(_PICTOGRAPH.search(answer)) == (wanted == MORE)
        elif known == LENGTH:
            ok = size <= 70 if wanted == CONCISE else size >= 40
        elif known == FORMAT:
            ok = _markdown(answer) != (wanted == "plain")
        elif known == TONE:
            ok = (_register(answer, lang) < 0.5) == (wanted == LIVELY)
        else:
            ok = str(pref.get("value", "")).casefold()[:5] in answer.casefold()
        (kept if ok else broken).append(name)
    reason = f"kept {len(kept)} of {len(prefs)} learned preferences" + (f"; broke {broken[0]}" if broken else "")
    return len(kept) / len(prefs), reason, [f"user: preference {b} not followed" for b in broken[:2]]


_RUBRICS = {"tone": _tone, "preference": _preference}  # anything else: fidelity


def judge(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Score ``inputs.answer`` for ``inputs.rubric`` (see the module doc); the same reply shape as the
    first offline judge."""
    given = request.inputs
    persona, target = given.get("persona") or {}, given.get("target") or None
    answer = str(given.get("answer") or "")
    lang = "zh" if ((target or {}).get("language") or persona.get("language")) == "zh" else "en"
    parsed: dict[str, Any] = {"score": 0.0, "reason": "nothing to judge", "feedback": "length: too short"}
    if answer.strip():
        rubric = _RUBRICS.get(str(given.get("rubric")), _fidelity)
        score, reason, notes = rubric(persona, target, answer, lang, str(given.get("message") or ""))
        parsed = {"score": round(min(1.0, max(0.0, score)), 4), "reason": reason, "feedback": "; ".join(notes)}
    return json.dumps(parsed, ensure_ascii=False), parsed
