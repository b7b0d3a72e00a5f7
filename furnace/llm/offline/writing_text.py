"""Text helpers shared by the offline writing handlers (generate, revise, extract, compress).

Paragraphs are blocks separated by blank lines; sentences end in ``。！？!?.…``
(zh) or ``.!?`` followed by a space (en). Emoji are detected by code-point ranges.
Everything here is pure and deterministic.
"""

from __future__ import annotations

import re

from furnace.domain.text import detect_language

_ZH_SENTENCE = re.compile(r"[^。！？!?…]+(?:[。！？!?…]+|$)")
_EN_SENTENCE = re.compile(r"(?<=[.!?])\s+")
EMOJI = re.compile("[\U0001f300-\U0001faff\U00002600-\U000027bf\U0001f000-\U0001f2ff\U0001f900-\U0001f9ff]\ufe0f?")

# Keyword → emoji that fits the topic; the first match wins.
_TOPIC_EMOJI = (
    (("防晒", "夏", "阳光", "sun", "summer", "beach"), "☀️"),
    (("美食", "菜", "做饭", "food", "cook", "recipe"), "🍜"),
    (("旅行", "旅游", "travel", "trip"), "✈️"),
    (("代码", "编程", "code", "program", "software"), "💻"),
    (("健康", "运动", "健身", "health", "fitness", "workout"), "💪"),
    (("学习", "读书", "study", "learn", "book"), "📚"),
)


def join_paragraphs(paragraphs: list[str]) -> str:
    """Paragraphs joined with one blank line."""
    return "\n\n".join(paragraphs)


def split_sentences(paragraph: str, language: str) -> list[str]:
    """Sentences with their end punctuation (and any trailing emoji) kept."""
    if language == "zh":
        parts = [m.group(0) for m in _ZH_SENTENCE.finditer(paragraph)]
        # Emoji or closing marks after the last punctuation stay with their sentence.
        out: list[str] = []
        for part in parts:
            if out and (EMOJI.fullmatch(part.strip()) or not part.strip(" ～~")):
                out[-1] += part
            else:
                out.append(part)
        return [s for s in out if s.strip()]
    return [s for s in _EN_SENTENCE.split(paragraph.strip()) if s.strip()]


def join_sentences(sentences: list[str], language: str) -> str:
    """Sentences back into one paragraph."""
    return ("" if language == "zh" else " ").join(s.strip() if language != "zh" else s for s in sentences).strip()


def count_emoji(text: str) -> int:
    """Number of emoji in ``text``."""
    return len(EMOJI.findall(text))


def strip_emoji(text: str) -> str:
    """``text`` without emoji (and without the spaces they leave behind)."""
    out = EMOJI.sub("", text)
    out = re.sub(r"[ \t]{2,}", " ", out)
    return re.sub(r"[ \t]+(\n|$)", r"\1", out).strip()


def topic_emoji(text: str) -> str:
    """An emoji fitting the subject of ``text`` (✨ when nothing specific fits)."""
    low = text.lower()
    for keys, emoji in _TOPIC_EMOJI:
        if any(k in low for k in keys):
            return emoji
    return "✨"


def first_sentence(text: str, language: str | None = None) -> str:
    """The first sentence of ``text`` (whole text when it has no sentence end)."""
    language = language or detect_language(text)
    flat = " ".join(text.split())
    sentences = split_sentences(flat, language)
    return sentences[0].strip() if sentences else flat


_SMALL_WORDS = {"a", "an", "and", "as", "at", "but", "by", "for", "in", "nor", "of", "on", "or", "the", "to", "vs"}


def title_case(title: str) -> str:
    """English title case: every word capitalised except short function words inside the title."""
    words = title.split(" ")
    out = []
    for i, word in enumerate(words):
        lead = i == 0 or words[i - 1].endswith((":", "—", "-"))
        if word.lower() in _SMALL_WORDS and not lead and i != len(words) - 1:
            out.append(word.lower())
        elif word[:1].isalpha() and not word.isupper():
            out.append(word[:1].upper() + word[1:])
        else:
            out.append(word)
    return " ".join(out)
