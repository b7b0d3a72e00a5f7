"""Text rules shared by every part of furnace: language, terms, paragraphs and the preference vocabulary.

One rule each, pure Python and deterministic:

- :func:`detect_language` — ``zh`` when CJK characters make up at least a third of
  the text's units (CJK characters plus Latin words), else ``en``. A single Chinese
  name in an English paragraph stays ``en``; a Chinese sentence with an English
  product name stays ``zh``.
- :func:`terms` — the tokeniser used for overlap, similarity and keyword matching:
  casefolded Latin words (``c++``, ``don't`` and ``well-known`` are one word each)
  of at least ``min_len`` characters minus the caller's stopwords, plus the character bigrams of
  every CJK run (a one-character run counts as itself).
- :func:`split_paragraphs` — blocks separated by blank lines, stripped.
- The **preference vocabulary**: the dimensions (``tone``, ``emoji``, ``length``,
  ``format``) and values (``tone``: ``lively``/``formal``, ``emoji``: ``more``/``fewer``,
  ``length``: ``concise``/``detailed``, ``format``: ``markdown``/``plain``) of learned style preferences, each with its
  en and zh phrasings. Whatever writes text from a preference and whatever judges
  that text read a preference through :func:`read_preference`, so they agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

Language = Literal["zh", "en"]

_CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.'-]*[A-Za-z0-9+#]|[A-Za-z]")
_WORD = re.compile(r"[a-z0-9][a-z0-9+#]*(?:['’-][a-z0-9+#]+)*")
_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")

# --- language ---------------------------------------------------------------------


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains any CJK ideograph."""
    return _CJK.search(text) is not None


def detect_language(text: str) -> Language:
    """``zh`` when CJK characters are at least a third of (CJK characters + Latin words), else ``en``."""
    cjk = len(_CJK.findall(text))
    if not cjk:
        return "en"
    latin_words = len(_LATIN_WORD.findall(text))
    return "zh" if cjk >= (cjk + latin_words) / 3 else "en"


# --- terms ------------------------------------------------------------------------


def signed(value: float) -> str:
    """A signed figure as every face prints one: ``+0.012`` / ``-0.012`` to 3 places; a value that rounds
    to zero is ``+0.000``, never ``-0.000``."""
    return f"{value if round(value, 3) else 0.0:+.3f}"


_EN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")


def word_count(text: str, language: str) -> int:
    """A piece's length as its readers count it: zh, the characters that are not whitespace; en, words."""
    if language == "zh":
        return sum(1 for ch in text if not ch.isspace())
    return len(_EN_WORD.findall(text))


def words(text: str) -> list[str]:
    """The casefolded Latin words of ``text``, in order."""
    return _WORD.findall(text.casefold())


def cjk_bigrams(text: str) -> set[str]:
    """Character bigrams of every CJK run (a one-character run counts as itself)."""
    grams: set[str] = set()
    for run in _CJK_RUN.findall(text):
        grams.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return grams


def terms(text: str, *, min_len: int = 3, stop: Iterable[str] = ()) -> set[str]:
    """Keyword terms for overlap and similarity: words (``min_len``+, not in the caller's ``stop``) and CJK bigrams."""
    stopped = stop if isinstance(stop, (set, frozenset)) else frozenset(stop)
    found = {w for w in words(text) if len(w) >= min_len and w not in stopped}
    return found | cjk_bigrams(text)


# --- paragraphs -------------------------------------------------------------------


def split_paragraphs(text: str) -> list[str]:
    """Non-empty blocks of ``text`` separated by blank lines, stripped."""
    return [p.strip() for p in _PARAGRAPH_SPLIT.split(text.replace("\r\n", "\n").strip()) if p.strip()]


# --- preference vocabulary -------------------------------------------------------

TONE, EMOJI, LENGTH, FORMAT = "tone", "emoji", "length", "format"
LIVELY, FORMAL = "lively", "formal"
MORE, FEWER = "more", "fewer"
CONCISE, DETAILED = "concise", "detailed"

#: Each dimension with the en and zh words that name it.
DIMENSIONS: dict[str, tuple[str, ...]] = {
    TONE: ("tone", "register", "语气", "风格", "语体", "文风"),
    EMOJI: ("emoji", "表情"),
    LENGTH: ("length", "篇幅", "长度", "字数"),
    FORMAT: ("format", "markdown", "格式", "排版"),
}

#: Each value of a dimension with its en and zh phrasings (the first is the canonical word).
VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    TONE: {
        LIVELY: (
            "lively",
            "casual",
            "relaxed",
            "playful",
            "informal",
            "conversational",
            "fun",
            "friendly",
            "less formal",
            "not formal",
            "more casual",
            "活泼",
            "轻松",
            "口语",
            "随意",
            "俏皮",
            "有趣",
            "不要太正式",
            "别太正式",
        ),
        FORMAL: ("formal", "professional", "serious", "rigorous", "正式", "专业", "严谨", "书面", "严肃"),
    },
    EMOJI: {
        MORE: ("more", "use", "add", "some", "多", "加", "用"),
        FEWER: (
            "fewer",
            "less",
            "no",
            "none",
            "remove",
            "without",
            "no more",
            "少",
            "去掉",
            "不要",
            "别用",
            "删",
        ),
    },
    LENGTH: {
        CONCISE: ("concise", "short", "shorter", "brief", "简", "短", "精炼"),
        DETAILED: ("detailed", "detail", "long", "longer", "thorough", "详", "长", "展开"),
    },
    FORMAT: {
        "markdown": ("markdown", "headings", "bullets", "list", "标题", "列表"),
        "plain": ("plain", "plain text", "no markdown", "纯文本"),
    },
}


def _match(text: str, table: Mapping[str, tuple[str, ...]]) -> str | None:
    """The key whose phrasing matches ``text``: an exact phrasing first, else the longest one it contains."""
    low = text.casefold().strip()
    if not low:
        return None
    for key, phrasings in table.items():
        if low == key or low in phrasings:
            return key
    best: tuple[int, str] | None = None
    for key, phrasings in table.items():
        for phrase in phrasings:
            if phrase in low and (best is None or len(phrase) > best[0]):
                best = (len(phrase), key)
    return best[1] if best else None


def preference_dimension(dimension: str) -> str | None:
    """The vocabulary dimension ``dimension`` names (``"语气"`` → ``tone``), or None."""
    return _match(dimension, DIMENSIONS)


def preference_value(dimension: str, value: str) -> str | None:
    """The canonical value of ``value`` on a vocabulary ``dimension`` (``playful`` → ``lively``), or None."""
    return _match(value, VALUES.get(dimension, {}))


def read_preference(pref: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(dimension, value)`` of a learned preference in vocabulary terms; None where it is outside it."""
    dimension = preference_dimension(str(pref.get("dimension", "")))
    if dimension is None:
        return None, None
    return dimension, preference_value(dimension, str(pref.get("value", "")))


def preference(persona: Mapping[str, Any], dimension: str) -> str | None:
    """The canonical value of ``persona``'s learned preference on ``dimension`` (the first that names it)."""
    for pref in persona.get("style_preferences") or ():
        dim, value = read_preference(pref)
        if dim == dimension:
            return value
    return None
