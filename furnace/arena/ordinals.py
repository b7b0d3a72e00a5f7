"""Roll-call numbers: find them in a reply and correct them in code.

A roll-call reply must contain its fixed ordinal and no other number. The
persona may colour the wording; the number is not the model's to choose. So
:func:`enforce_ordinal` rewrites every number it finds (``3``, ``三号``,
``number three``) to the ordinal in Arabic digits, and prefixes the ordinal
when the reply has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_EN_NUMS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_EN_WORDS = {w: i for i, w in enumerate(_EN_NUMS)}
_ARABIC = re.compile(r"(?<![A-Za-z0-9_.])(\d{1,3})(?![\d%]|\.\d)")
_ZH = re.compile(r"[零一二两三四五六七八九十]{1,3}")
_EN = re.compile(r"\b(" + "|".join(_EN_WORDS) + r")\b", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff]")
_ZH_BEFORE_OK = set("第是报为：:")
_ZH_AFTER_PUNCT = set("！!。，,、~～ \n\t")


@dataclass(frozen=True)
class NumberToken:
    start: int
    end: int
    value: int


def _zh_value(text: str) -> int | None:
    if "十" not in text:
        return _ZH_DIGITS.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    t = _ZH_DIGITS.get(tens) if tens else 1
    o = _ZH_DIGITS.get(ones) if ones else 0
    if t is None or o is None:
        return None
    return t * 10 + o


def _zh_tokens(text: str) -> list[NumberToken]:
    found = []
    for m in _ZH.finditer(text):
        value = _zh_value(m.group())
        if value is None:
            continue
        before = text[m.start() - 1] if m.start() > 0 else ""
        after = text[m.end()] if m.end() < len(text) else ""
        if (
            after == "号"
            or before == "第"
            or (
                (not before or not _CJK.match(before) or before in _ZH_BEFORE_OK)
                and (not after or after in _ZH_AFTER_PUNCT)
            )
        ):
            found.append(NumberToken(m.start(), m.end(), value))
    return found


def _en_tokens(text: str) -> list[NumberToken]:
    found = []
    for m in _EN.finditer(text):
        before = text[: m.start()].rstrip().casefold()
        after = text[m.end() :].lstrip()
        if (
            before.endswith(("number", "no.", "#"))
            or not before
            or before.endswith(("!", ".", "?", ":", "—", "-"))
            or not after
            or after[0] in "!.,;:—-"
        ):
            found.append(NumberToken(m.start(), m.end(), _EN_WORDS[m.group(1).casefold()]))
    return found


def find_numbers(text: str) -> list[NumberToken]:
    """Every number a roll-call reply states (Arabic, Chinese numerals, English words), in order."""
    tokens = [NumberToken(m.start(), m.end(), int(m.group(1))) for m in _ARABIC.finditer(text)]
    tokens += _zh_tokens(text) + _en_tokens(text)
    tokens.sort(key=lambda t: t.start)
    kept: list[NumberToken] = []
    for tok in tokens:  # drop overlaps
        if not kept or tok.start >= kept[-1].end:
            kept.append(tok)
    return kept


def enforce_ordinal(text: str, ordinal: int, language: str = "en") -> tuple[str, bool]:
    """``text`` with every stated number set to ``ordinal`` (in digits); returns (text, corrected).

    ``corrected`` is True when a number was wrong or missing (a Chinese or English
    numeral of the right value is only rewritten as digits).
    """
    tokens = find_numbers(text)
    corrected = any(t.value != ordinal for t in tokens)
    out, last = [], 0
    for tok in tokens:
        out.append(text[last : tok.start])
        out.append(str(ordinal))
        last = tok.end
    out.append(text[last:])
    result = "".join(out)
    if not tokens:
        corrected = True
        sep = "！" if language == "zh" else "! "
        result = f"{ordinal}{sep}{result}".rstrip()
    return result, corrected
