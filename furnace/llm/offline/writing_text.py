"""Text helpers shared by the offline writing handlers (generate, revise, extract, compress).

Paragraphs are blocks separated by blank lines; sentences end in ``。！？!?.…``
(zh) or ``.!?`` followed by a space (en). Emoji are detected by code-point ranges.
Everything here is pure and deterministic.
"""

from __future__ import annotations

import re

PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")
_ZH_SENTENCE = re.compile(r"[^。！？!?…]+(?:[。！？!?…]+|$)")
_EN_SENTENCE = re.compile(r"(?<=[.!?])\s+")
EMOJI = re.compile("[\U0001f300-\U0001faff\U00002600-\U000027bf\U0001f000-\U0001f2ff\U0001f900-\U0001f9ff]\ufe0f?")
_CJK = re.compile(r"[\u4e00-\u9fff]")

_ZH_NUMERALS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_EN_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}
_ZH_PARAGRAPH = re.compile(r"第\s*([一二两三四五六七八九十]|\d+)\s*段|(最后一段|末段)")
_EN_PARAGRAPH = re.compile(
    r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|\d+(?:st|nd|rd|th))\s+paragraph\b"
    r"|\bparagraph\s+(\d+)\b",
    re.IGNORECASE,
)

# Keyword → emoji that fits the topic; the first match wins.
_TOPIC_EMOJI = (
    (("防晒", "夏", "阳光", "sun", "summer", "beach"), "☀️"),
    (("美食", "菜", "做饭", "food", "cook", "recipe"), "🍜"),
    (("旅行", "旅游", "travel", "trip"), "✈️"),
    (("代码", "编程", "code", "program", "software"), "💻"),
    (("健康", "运动", "健身", "health", "fitness", "workout"), "💪"),
    (("学习", "读书", "study", "learn", "book"), "📚"),
)


def detect_language(text: str) -> str:
    """``zh`` when the text has CJK characters, else ``en``."""
    return "zh" if _CJK.search(text) else "en"


def split_paragraphs(body: str) -> list[str]:
    """Non-empty paragraphs of ``body``, stripped."""
    return [p.strip() for p in PARAGRAPH_SPLIT.split(body.strip()) if p.strip()]


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


def paragraph_ref(text: str) -> int | None:
    """The paragraph a suggestion names: 1-based, ``-1`` for the last, None when none."""
    m = _ZH_PARAGRAPH.search(text)
    if m:
        if m.group(2):
            return -1
        token = m.group(1)
        return int(token) if token.isdigit() else _ZH_NUMERALS[token]
    m = _EN_PARAGRAPH.search(text)
    if m:
        token = (m.group(1) or m.group(2)).lower()
        if token == "last":
            return -1
        if token in _EN_ORDINALS:
            return _EN_ORDINALS[token]
        return int(re.sub(r"\D", "", token))
    return None


def first_sentence(text: str, language: str | None = None) -> str:
    """The first sentence of ``text`` (whole text when it has no sentence end)."""
    language = language or detect_language(text)
    flat = " ".join(text.split())
    sentences = split_sentences(flat, language)
    return sentences[0].strip() if sentences else flat


def shorten_sentences(sentences: list[str], language: str) -> list[str]:
    """Fewer or shorter sentences: keep the first half (at least one); a single
    sentence is cut to its first clauses."""
    if len(sentences) >= 2:
        return sentences[: max(1, (len(sentences) + 1) // 2) if len(sentences) > 2 else 1]
    if not sentences:
        return sentences
    only = sentences[0].strip()
    end = "。" if language == "zh" else "."
    clauses = re.split(r"[，,；;：:]", only.rstrip("。！？!?.…"))
    if len(clauses) >= 2:
        keep = clauses[: max(1, len(clauses) // 2)]
        return [("，" if language == "zh" else ", ").join(c.strip() for c in keep) + end]
    if language == "zh":
        core = only.rstrip("。！？!?…")
        return [core[: max(1, int(len(core) * 0.6))] + end]
    words = only.rstrip(".!?").split()
    return [" ".join(words[: max(1, int(len(words) * 0.6))]) + end]
