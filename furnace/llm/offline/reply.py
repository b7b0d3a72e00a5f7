"""Offline REPLY handler: a persona answers a probe or a chat turn, by rules.

``request.inputs = {"persona": <Elixir JSON>, "message": str, "instruction": str | None}``
(and ``"question"``: the message without its @mentions, answered instead when given)
→ ``(text, None)``. What it does, in order:

1. **Voice** from the persona: language (``zh``/``en``; the persona's, never the
   message's), register from ``tone.formality`` (≥0.6 formal, ≤0.4 casual,
   neutral between), length from ``tone.conciseness`` (≥0.7 short, ≤0.3 long),
   a light line when ``tone.humor`` ≥0.7, an acknowledgement when
   ``tone.empathy`` ≥0.7. Learned ``style_preferences`` override: tone →
   lively/formal, length → concise/detailed, emoji → more/fewer.
2. **Instruction first.** A roll call (the instruction mentions 报数/点名/roll
   call/sound off/count off and a number) is answered with one short line
   starting with that number and containing no other digit. Other instructions
   steer the answer: a named expertise leads, "brief"/"简短" shortens,
   "different angle"/"不同的角度" picks another expertise.
3. **Forbidden topics.** A message about one is declined politely, without
   naming the topic, with an offer to help within the persona's expertise.
   Any sentence that would mention a forbidden topic is dropped.
4. **Answer** built from the expertise most related to the message (word overlap
   for en, character bigrams for zh), up to three principles put in the engine's
   own words (:mod:`furnace.llm.offline.paraphrase`: never quoted; a principle
   "When asked about <topic>, …" only for a message on that topic (all its
   words; zh: most of its character pairs), and first
   then), and a greeting and closing in the register. A message equal
   to a few-shot input is answered with that example's output.
5. **Format and length.** Markdown (a bold heading and bullets) only when
   ``constraints.must_use_markdown``; otherwise plain text with Markdown marks
   removed from quoted persona text. ``constraints.max_length`` counts
   **characters in both languages** (as the rendered prompt, the pipeline's
   validator and the judge do): optional sentences are dropped, least important
   first, and a last resort cuts the text with "…".

Deterministic: phrasing variants are picked with the engine's seeded ``rng``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.domain.macros import served
from furnace.domain.text import CONCISE, EMOJI, LENGTH, LIVELY, MORE, TONE, has_cjk, read_preference, terms
from furnace.llm.offline.paraphrase import condition, express
from furnace.llm.offline.reply_phrases import PHRASES
from furnace.llm.seam import LLMRequest

_MENTION = re.compile(r"@\S+")
_SENTENCE_END = {"en": re.compile(r"[.?!\n]"), "zh": re.compile(r"[。？！?!\n]")}
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "you",
        "your",
        "with",
        "that",
        "this",
        "what",
        "how",
        "are",
        "can",
        "about",
        "from",
        "have",
        "does",
        "should",
        "would",
        "could",
        "into",
        "will",
        "there",
        "their",
        "they",
        "them",
        "when",
        "where",
        "which",
        "who",
        "why",
        "is",
        "it",
        "its",
    ]
)
_ROLL = re.compile(r"报数|点名|报到|roll[\s-]*call|sound\s*off|count\s*off|number\s*off", re.I)
_ORDINALS = (re.compile(r"第\s*(\d+)\s*[号位个]"), re.compile(r"number\s+(\d+)", re.I), re.compile(r"(\d+)"))
_BRIEF = re.compile(r"brief|short|concise|one sentence|简短|简洁|一两句|一句话", re.I)
_ANGLE = re.compile(r"different angle|another angle|other angle|不同的角度|另一个角度", re.I)
_MD_MARKS = re.compile(r"[*`#]")
# optional parts, least important first: dropped in this order to fit max_length
_DROP_ORDER = ("humor", "more", "empathy", "greet", "close", "emoji", "principles", "offer")


@dataclass(frozen=True)
class Voice:
    """How a persona sounds, derived from its tone, constraints and preferences."""

    language: str
    register: str  # formal | neutral | casual
    length: str  # short | normal | long
    humor: bool
    empathy: bool
    markdown: bool
    emoji: bool
    max_length: int | None
    forbidden: tuple[str, ...]


def voice_of(persona: dict[str, Any]) -> Voice:
    """The voice of ``persona`` (an elixir as JSON; missing fields take defaults)."""
    tone = persona.get("tone") or {}
    constraints = persona.get("constraints") or {}
    formality = float(tone.get("formality", 0.5))
    conciseness = float(tone.get("conciseness", 0.5))
    register = "formal" if formality >= 0.6 else "casual" if formality <= 0.4 else "neutral"
    length = "short" if conciseness >= 0.7 else "long" if conciseness <= 0.3 else "normal"
    emoji = False
    for pref in persona.get("style_preferences") or []:
        dim, value = read_preference(pref)
        if dim == EMOJI:
            emoji = value == MORE
        elif dim == TONE and value:
            register = "casual" if value == LIVELY else "formal"
        elif dim == LENGTH and value:
            length = "short" if value == CONCISE else "long"
    max_length = constraints.get("max_length")
    return Voice(
        language="zh" if persona.get("language") == "zh" else "en",
        register=register,
        length=length,
        humor=float(tone.get("humor", 0.5)) >= 0.7,
        empathy=float(tone.get("empathy", 0.5)) >= 0.7,
        markdown=bool(constraints.get("must_use_markdown")),
        emoji=emoji,
        max_length=int(max_length) if max_length else None,
        forbidden=tuple(str(t) for t in constraints.get("forbidden_topics") or () if str(t).strip()),
    )


def mentions(text: str, topic: str) -> bool:
    """Whether ``text`` is about ``topic``: the phrase, or (en) every word of it as a word stem."""
    low, needle = text.casefold(), topic.casefold().strip()
    if not needle:
        return False
    if needle in low:
        return True
    words = [w for w in re.findall(r"[a-z0-9]+", needle) if w not in _STOP]
    if not words or has_cjk(needle):
        return False
    stems = [w[:-1] if len(w) > 4 and w.endswith("s") else w for w in words]
    return all(re.search(r"\b" + re.escape(stem), low) for stem in stems)


def _terms(text: str) -> set[str]:
    return terms(text, min_len=3, stop=_STOP)


def _rank(items: list[str], text: str) -> list[str]:
    """``items`` by overlap with ``text`` (ties keep the persona's order)."""
    wanted = _terms(text)
    scored = [(-len(_terms(item) & wanted), i, item) for i, item in enumerate(items)]
    return [item for _, _, item in sorted(scored)]


def _clean(text: str, voice: Voice, *, strip_end: bool = False) -> str:
    line = " ".join(str(text).split())
    if not voice.markdown:
        line = _MD_MARKS.sub("", line).strip()
    if strip_end:
        line = line.rstrip("。.！!；;，, ")
    return line


def _topic(message: str, voice: Voice) -> str:
    text = " ".join(_MENTION.sub(" ", message).split())
    first = _SENTENCE_END[voice.language].split(text, maxsplit=1)[0].strip(" ,，:：")
    if voice.language == "zh":
        return first if len(first) <= 30 else first[:29] + "…"
    words = first.split()
    return " ".join(words) if len(words) <= 12 else " ".join(words[:12]) + "…"


def _principle(text: str, voice: Voice) -> str:
    """A principle in the engine's own words (:mod:`paraphrase`), never quoted."""
    return _clean(express(_clean(text, voice), voice.language), voice, strip_end=True)


def _applies(topic: str, message: str, language: str) -> bool:
    """Whether a principle's topic ("When asked about <topic>, …") is the message's: every content word
    of the topic in the message (en, by stem) or most of its character pairs (zh, 60 %)."""
    if language == "zh" or has_cjk(topic):
        han = "".join(re.findall(r"[\u4e00-\u9fff]+", topic))
        pairs = {han[i : i + 2] for i in range(len(han) - 1)}
        return bool(pairs) and sum(p in message for p in pairs) >= 0.6 * len(pairs)
    stems = {t[:5] for t in _terms(topic)}
    return bool(stems) and stems <= {t[:5] for t in _terms(message)}


def _applicable(principles: list[str], message: str, voice: Voice) -> list[str]:
    """The principles that apply to ``message`` in the order they are used: those whose topic is the
    message's first, then the unconditional ones by overlap with the message (ties in the persona's
    order); a principle about another topic is left out."""
    wanted = _terms(message)
    ranked = []
    for i, text in enumerate(principles):
        topic, instruction = condition(text)
        if topic is not None and not _applies(topic, message, voice.language):
            continue
        ranked.append((topic is None, -len(_terms(instruction) & wanted), i, text))
    return [text for *_, text in sorted(ranked)]


def _join(items: list[str], voice: Voice, *, rules: bool = False) -> str:
    if voice.language == "zh":
        return ("；" if rules else "、").join(items)
    if rules:
        return "; ".join(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _roll_call(instruction: str) -> int | None:
    if not _ROLL.search(instruction):
        return None
    for pattern in _ORDINALS:  # the explicit forms first: "第2号（共3人）" is 2, not 3
        found = pattern.search(instruction)
        if found:
            return int(found.group(1))
    return None


def _shot(persona: dict[str, Any], message: str) -> str | None:
    key = re.sub(r"\W+", "", message.casefold())
    for shot in persona.get("few_shots") or []:
        if key and re.sub(r"\W+", "", str(shot.get("input", "")).casefold()) == key:
            return str(shot.get("output", ""))
    return None


def _pick(rng: random.Random, voice: Voice, part: str, **fields: str) -> str:
    options = PHRASES[voice.language][part][voice.register]
    return rng.choice(options).format(**fields)


def _parts(
    persona: dict[str, Any], message: str, instruction: str, voice: Voice, rng: random.Random
) -> tuple[list[tuple[str, str]], str]:
    """The reply as (kind, sentence) pairs in reading order, and the lead expertise."""

    def safe(text: str) -> bool:
        return not any(mentions(text, t) for t in voice.forbidden)

    expertise = [_clean(x, voice, strip_end=True) for x in persona.get("expertise") or [] if safe(str(x))]
    default_lead = "我的专业领域" if voice.language == "zh" else "my field"

    parts: list[tuple[str, str]]
    ordinal = _roll_call(instruction) if instruction else None
    if ordinal is not None:
        parts = [("core", _pick(rng, voice, "roll", n=str(ordinal)))]
        return parts + ([("emoji", _pick(rng, voice, "emoji"))] if voice.emoji else []), default_lead

    if any(mentions(message, t) for t in voice.forbidden) or any(mentions(instruction, t) for t in voice.forbidden):
        parts = [("core", _pick(rng, voice, "decline"))]
        if expertise:
            parts.append(("offer", _pick(rng, voice, "offer", lead=expertise[0])))
        return parts, expertise[0] if expertise else default_lead

    length = "short" if instruction and _BRIEF.search(instruction) else voice.length
    ranked = _rank(expertise, message) if expertise else []
    named = [x for x in expertise if instruction and x.casefold() in instruction.casefold()]
    if named:
        ranked = named + [x for x in ranked if x not in named]
    elif instruction and _ANGLE.search(instruction) and len(ranked) > 1:
        ranked = ranked[1:] + ranked[:1]
    lead = ranked[0] if ranked else default_lead

    parts = []
    if length != "short":
        parts.append(("greet", _pick(rng, voice, "greet")))
    if voice.empathy:
        parts.append(("empathy", _pick(rng, voice, "empathy")))
    shot = _shot(persona, message)
    topic = _clean(_topic(message, voice), voice)
    if shot is not None:
        parts.append(("core", _clean(shot, voice)))
    elif topic:
        tight = length == "short" or (voice.max_length is not None and voice.max_length < 200)
        parts.append(("core", _pick(rng, voice, "core_short" if tight else "core", lead=lead, topic=topic)))
    else:
        parts.append(("core", _pick(rng, voice, "core_no_topic", lead=lead)))
    principles = [_principle(p, voice) for p in _applicable(list(persona.get("principles") or []), message, voice)]
    principles = [p for p in principles if p and safe(p)][: {"short": 1, "normal": 2, "long": 3}[length]]
    if principles and shot is None:
        parts.append(("principles", _pick(rng, voice, "principles", items=_join(principles, voice, rules=True))))
    others = ranked[1:3]
    if length == "long" and others:
        parts.append(("more", _pick(rng, voice, "more", items=_join(others, voice))))
    if voice.humor:
        parts.append(("humor", _pick(rng, voice, "humor")))
    parts.append(("close", _pick(rng, voice, "close")))
    if voice.emoji:
        parts.append(("emoji", _pick(rng, voice, "emoji")))
    if not safe(dict(parts)["core"]):  # e.g. a few-shot answer touching a forbidden topic
        parts = [(k, _pick(rng, voice, "core_no_topic", lead=lead) if k == "core" else t) for k, t in parts]
    return [(kind, text) for kind, text in parts if kind == "core" or safe(text)], lead


def _render(parts: list[tuple[str, str]], voice: Voice, heading: str) -> str:
    texts = [text for kind, text in parts if kind != "emoji"]
    emoji = "".join(text for kind, text in parts if kind == "emoji")
    if voice.markdown and len(texts) > 1:
        *body, last = texts
        text = f"**{heading}**\n\n" + "\n".join(f"- {line}" for line in body) + f"\n\n{last}"
    elif voice.markdown:
        text = f"**{heading}**\n\n{texts[0] if texts else ''}"
    else:
        text = ("" if voice.language == "zh" else " ").join(texts)
    return (text + (emoji if voice.language == "zh" else f" {emoji}" if emoji else "")).strip()


def _cut(text: str, limit: int, voice: Voice) -> str:
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    cut = text[: limit - 1]
    if voice.language == "en" and " " in cut and cut.rfind(" ") > limit // 2:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:，；：、") + "…"


def compose(persona: dict[str, Any], message: str, instruction: str | None, rng: random.Random) -> str:
    """The reply text (see the module docstring for the rules)."""
    voice = voice_of(persona)
    instruction = instruction or ""
    if _roll_call(instruction) is not None:
        voice = replace(voice, markdown=False)  # a roll call is one plain line
    parts, heading = _parts(persona, message, instruction, voice, rng)
    text = _render(parts, voice, heading)
    if voice.max_length:
        for kind in _DROP_ORDER:
            if len(text) <= voice.max_length:
                break
            parts = [p for p in parts if p[0] != kind]
            text = _render(parts, voice, heading)
        text = _cut(text, voice.max_length, voice)
    return text


def _as_served(persona: dict[str, Any]) -> dict[str, Any]:
    """The persona as its rendered prompt shows it: SillyTavern macros an imported card left in its text
    expanded or dropped (:func:`furnace.domain.macros.served`), so no answer quotes ``{{char}}``."""
    shots = [
        t for s in persona.get("few_shots") or [] if isinstance(s, dict) for t in (s.get("input"), s.get("output"))
    ]
    texts = [persona.get("identity"), *(persona.get("principles") or []), *(persona.get("expertise") or []), *shots]
    if not any(isinstance(t, str) and "{{" in t for t in texts):
        return persona
    try:
        return served(Elixir.model_validate(persona)).model_dump(mode="json")
    except ValueError:  # not a whole elixir (a test's sketch of one): answered as given
        return persona


def reply(request: LLMRequest, rng: random.Random) -> tuple[str, None]:
    """Answer ``inputs.message`` in ``inputs.persona``'s voice (fulfilling ``inputs.instruction`` first)."""
    inputs = request.inputs
    persona = _as_served(inputs.get("persona") or {})
    # "question": the message without the @mentions the arena recognised ("@Quant Trader what's…" → "what's…")
    message = str(inputs.get("question") or inputs.get("message") or "")
    instruction = inputs.get("instruction")
    return compose(persona, message, str(instruction) if instruction else None, rng), None
