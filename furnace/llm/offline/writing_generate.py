"""Offline GENERATE: a titled piece on a topic, written from the persona's structure.

Inputs (``request.inputs``): ``persona`` (an ``Elixir.model_dump(mode="json")``),
``topic`` (str), optional ``language`` (defaults to the persona's).
Output: ``{"title": str, "body": str}``.

The title and the opening name the topic; every paragraph names it once (as a
phrase that reads inside a sentence: "秋天喝什么茶" → "秋天喝茶", "how to start
X" → "starting X") and applies the persona's expertise and principles to it.

Register: lively when a learned ``tone`` preference says so (or the persona's
formality is below 0.5), formal otherwise. Four paragraphs; their length follows
``tone.conciseness`` and a learned ``length`` preference; ``constraints.max_length``
(characters) caps the body; markdown only when ``must_use_markdown``; emoji only
when a learned ``emoji`` preference asks for more.
"""

from __future__ import annotations

import random
import re
from typing import Any

from furnace.domain.text import CONCISE, DETAILED, EMOJI, FORMAL, LENGTH, LIVELY, MORE, TONE, preference
from furnace.llm.offline.paraphrase import gerund
from furnace.llm.offline.writing_text import join_paragraphs, join_sentences, split_sentences, topic_emoji
from furnace.llm.seam import LLMRequest

# Each paragraph is a list of sentences; {t}/{T} the topic as given (title, opening), {f}/{F} the topic as
# a phrase that fits inside a sentence, {e0}/{e1} expertise, {p0}/{p1} principles. Every paragraph names the
# topic once; the other sentences apply the persona's expertise and principles to it.
_TEMPLATES: dict[tuple[str, str], dict[str, Any]] = {
    ("zh", "formal"): {
        "title": "{t}：{e0}视角下的实用指南",
        "paragraphs": [
            [
                "{t}是许多读者关心的话题。",
                "本文将从{e0}的角度，对这个问题进行系统的说明。",
                "以下内容基于专业经验整理，供您参考。",
            ],
            [
                "谈到{f}，首先需要明确{e1}的基本原则。",
                "在实际操作中，应当结合自身情况进行判断。",
                "此外，{e0}与{e1}之间存在密切关联，不宜割裂看待。",
            ],
            [
                "其次，具体到{f}，建议遵循以下原则：{p0}。",
                "同时，{p1}。",
                "值得注意的是，不同人群的需求存在差异，因此需要因人而异地调整方案。",
                "在条件允许的情况下，建议咨询专业人士的意见。",
            ],
            ["综上所述，{f}并非一蹴而就的事情。", "希望本文能够为您提供有益的参考。"],
        ],
        "extra": "具体而言，这一环节往往决定了最终效果，值得投入更多关注。",
        "list_lead": "其次，具体到{f}，建议遵循以下原则：",
        "fallback_principle": "说明每条建议背后的理由",
        "fallback_expertise": "实践经验",
    },
    ("zh", "lively"): {
        "title": "{t}，看这篇就够啦！",
        "paragraphs": [
            ["聊到{t}，大家肯定都有话说！", "今天咱们就从{e0}的角度轻松聊一聊。", "都是实打实的经验，放心看～"],
            [
                "说到{f}，先说最基础的：{e1}的门道要摸清。",
                "平时多看看自己的情况，合适的才是最好的。",
                "还有哦，{e0}和{e1}关系可密切了，别分开看。",
            ],
            [
                "接下来是重点，关于{f}，记住这几条：{p0}。",
                "还有，{p1}。",
                "每个人情况不一样，所以要按自己的需要灵活调整。",
                "拿不准的时候，问问专业人士也完全没问题。",
            ],
            ["总之，{f}急不来。", "希望这篇对你有帮助！"],
        ],
        "extra": "说真的，这一步做好了，后面会省心很多。",
        "list_lead": "接下来是重点，关于{f}，记住这几条：",
        "fallback_principle": "把理由也讲清楚",
        "fallback_expertise": "实践经验",
    },
    ("en", "formal"): {
        "title": "{T}: A Practical Guide from {aE0} Perspective",
        "paragraphs": [
            [
                "{F} is a subject many readers care about.",
                "This article examines it from the perspective of {e0}.",
                "The following guidance is based on professional experience and is offered for your consideration.",
            ],
            [
                "When it comes to {f}, it is important to understand the fundamentals of {e1} first.",
                "In practice, each decision should be made in light of individual circumstances.",
                "Furthermore, {e0} and {e1} are closely related and should not be considered in isolation.",
            ],
            [
                "Second, for {f}, the following principles are recommended: {p0}.",
                "In addition, {p1}.",
                "It should be noted that needs differ from person to person, "
                "therefore the approach should be adjusted accordingly.",
                "Where possible, it is advisable to consult a qualified professional.",
            ],
            [
                "In conclusion, {f} is not something that can be achieved overnight.",
                "It is hoped that this article provides a useful reference.",
            ],
        ],
        "extra": "In particular, this step often determines the final result and deserves careful attention.",
        "list_lead": "Second, for {f}, the following principles are recommended:",
        "fallback_principle": "explain the reasoning behind each recommendation",
        "fallback_expertise": "practical experience",
    },
    ("en", "lively"): {
        "title": "{T}: Everything You Actually Need to Know!",
        "paragraphs": [
            [
                "Let's talk about {f}!",
                "Everyone has an opinion on it, so here's a friendly take from someone who loves {e0}.",
                "No jargon, just stuff that works.",
            ],
            [
                "First things first: for {f}, get the basics of {e1} right.",
                "Look at your own situation and go with what fits you.",
                "And hey, {e0} and {e1} go hand in hand, so keep both in mind.",
            ],
            [
                "Now for the good part, my golden rules for {f}: {p0}.",
                "Also, {p1}.",
                "Everyone's different, so tweak things until they feel right for you.",
                "And if you're unsure, just ask a pro, there's no shame in that.",
            ],
            ["That's a wrap: {f} takes a little patience.", "You've totally got this!"],
        ],
        "extra": "Honestly, getting this step right makes everything after it easier.",
        "list_lead": "Now for the good part, my golden rules for {f}:",
        "fallback_principle": "say why, not just what",
        "fallback_expertise": "practical experience",
    },
}

_ZH_QUESTION_WORDS = ("为什么", "怎么样", "怎么", "怎样", "如何", "什么", "哪些", "哪种", "哪个", "哪里", "吗", "呢")
_EN_HOW = re.compile(r"^how\s+(?:to|do\s+i|do\s+you|can\s+i|should\s+i|can\s+you)\s+(\w+)\s*(.*)$", re.I)
_EN_QUESTION = re.compile(r"^(?:what|which|why|when|where|who|whom|whose|should|can|could|is|are|do|does)\b", re.I)


def topic_phrase(topic: str, language: str) -> str:
    """The topic as a phrase that reads inside a sentence: zh without question words
    ("秋天喝什么茶" → "秋天喝茶"); en "how to start X" → "starting X", another question quoted."""
    if language == "zh":
        phrase = topic.rstrip("？?。")
        for word in _ZH_QUESTION_WORDS:
            phrase = phrase.replace(word, "")
        return phrase.strip() or topic
    text = topic.strip().rstrip("?")
    m = _EN_HOW.match(text)
    if m:
        return (gerund(m.group(1).lower()) + " " + m.group(2)).strip()
    if _EN_QUESTION.match(text):
        return f'the question "{text}"'
    return text


def register_of(persona: dict[str, Any]) -> str:
    """``lively`` or ``formal``: a learned tone preference wins over the tone sliders."""
    tone_pref = preference(persona, TONE)
    if tone_pref in (LIVELY, FORMAL):
        return tone_pref
    return "formal" if float((persona.get("tone") or {}).get("formality", 0.5)) >= 0.5 else "lively"


def _clean(item: str) -> str:
    return item.strip().rstrip("。.!！?？;；")


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def generate(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Write a titled, multi-paragraph piece on ``inputs.topic`` in the persona's voice."""
    persona: dict[str, Any] = request.inputs.get("persona") or {}
    topic = str(request.inputs.get("topic") or "").strip() or "this topic"
    language = request.inputs.get("language") or persona.get("language") or "en"
    register = register_of(persona)
    spec = _TEMPLATES[(language if language in ("zh", "en") else "en", register)]
    expertise = [_clean(e) for e in persona.get("expertise") or []] or [spec["fallback_expertise"]]
    principles = [_clean(p) for p in persona.get("principles") or []] or [spec["fallback_principle"]]
    e0 = expertise[0]
    e1 = expertise[1] if len(expertise) > 1 else e0
    focus = topic_phrase(topic, language)
    p0 = principles[0]
    p1 = principles[1] if len(principles) > 1 else spec["fallback_principle"]
    if language == "en":
        p1 = _lower_first(p1)
    values = {
        "t": topic,
        "T": topic[:1].upper() + topic[1:],
        "f": focus,
        "F": focus[:1].upper() + focus[1:],
        "e0": e0,
        "e1": e1,
        "E0": e0[:1].upper() + e0[1:],
        "aE0": ("an " if e0[:1].lower() in "aeiou" else "a ") + e0[:1].upper() + e0[1:],
        "p0": p0,
        "p1": p1,
    }

    conciseness = float((persona.get("tone") or {}).get("conciseness", 0.5))
    length_pref = preference(persona, LENGTH)
    concise = length_pref == CONCISE or (length_pref is None and conciseness >= 0.75)
    detailed = length_pref == DETAILED or (length_pref is None and conciseness <= 0.25)

    paragraphs: list[list[str]] = []
    for i, sentences in enumerate(spec["paragraphs"]):
        if e0 == e1:  # one field of expertise: no sentence relating it to itself
            sentences = [s for s in sentences if not ("{e0}" in s and "{e1}" in s)]
        filled = [_fill(s, values) for s in sentences]
        if concise and len(filled) > 2 and i != 2:
            filled = filled[:-1]
        elif concise and i == 2:
            filled = filled[:3]  # the third paragraph stays the longest, but shorter
        if detailed and i in (1, 2):
            filled.append(_fill(spec["extra"], values))
        paragraphs.append(filled)

    constraints = persona.get("constraints") or {}
    markdown = bool(constraints.get("must_use_markdown"))
    texts = [join_sentences(p, language) for p in paragraphs]
    if markdown:  # bold the lead expertise, principles as a bullet list
        texts[0] = texts[0].replace(e0, f"**{e0}**", 1)
        bullets = "\n".join(f"- {p}" for p in principles[:5])
        rest = join_sentences(paragraphs[2][2:], language)
        texts[2] = _fill(spec["list_lead"], values) + "\n" + bullets + ("\n" + rest if rest else "")

    if preference(persona, EMOJI) == MORE:
        mark = topic_emoji(topic)
        sep = "" if language == "zh" else " "
        texts[0] = texts[0] + sep + mark
        texts[-1] = texts[-1] + sep + mark

    max_length = constraints.get("max_length")
    if max_length:
        texts = _fit(texts, int(max_length), language)
    title = _fill(spec["title"], values)
    body = join_paragraphs(texts)
    return "", {"title": title, "body": body}


def _fit(texts: list[str], limit: int, language: str) -> list[str]:
    """Drop sentences from the longest paragraphs until the body fits ``limit`` characters."""
    sep = 2 * (len(texts) - 1)
    texts = list(texts)
    while sum(map(len, texts)) + sep > limit:
        i = max(range(len(texts)), key=lambda k: len(texts[k]))
        sentences = split_sentences(texts[i], language)
        if len(sentences) <= 1:
            if len(texts) > 1:
                texts.pop()
                sep = 2 * (len(texts) - 1)
                continue
            texts[0] = texts[0][: max(1, limit)]
            break
        texts[i] = join_sentences(sentences[:-1], language)
    return texts
