"""The field mapping between a card's visible fields and an elixir's.

``encode_visible`` writes an elixir's mapped fields the way a card tool shows
them; ``derive_fields`` reads them back from any card (furnace's or another
tool's) with forgiving rules, always producing values within the elixir
limits:

=====================  ============================================  ==============================
elixir                 card (``data.*``)                             derived from a foreign card
=====================  ============================================  ==============================
name                   ``name``                                      the name (cut to 120)
identity               ``description``                               first paragraph, cut at a sentence
principles             ``personality`` as ``- `` bullets             bullets / lines of ``system_prompt``
                       (+ ``system_prompt`` = the rendered prompt)   and ``personality``; prose becomes
                                                                     "Embody this personality: …" etc.
few_shots              ``mes_example`` (``<START>`` blocks)           ``{{user}}:`` / ``{{char}}:`` pairs
expertise              ``tags``                                      tags (fallback: role-play as NAME)
=====================  ============================================  ==============================

SillyTavern macros (``{{char}}``, ``{{user}}``, ``{{original}}``, ``{{date}}``,
``{{random::a::b}}``, ``{{// note}}`` ...) are kept as macros in the elixir (the
legacy ``<BOT>``/``<USER>`` are read as ``{{char}}``/``{{user}}``); they are
expanded or dropped when a prompt is served (:mod:`furnace.domain.macros`). A
line that holds nothing but macros is a placeholder, not a principle, and is left
out of the elixir; the card keeps it verbatim (export starts from the original
card).

``post_history_instructions`` (what SillyTavern sends after the chat history) is
never lost: its lines are principles, as written, right after the system
prompt's; a length limit in it ("Keep replies under 80 words.", "回复不超过100字")
also becomes ``constraints.max_length`` (:func:`derive_constraints`) unless the
card carries furnace's own constraints. The card keeps the field as it was.
"""

from __future__ import annotations

import re
from typing import Any

from furnace.domain.canonical import content_key
from furnace.domain.elixir import (
    MAX_FEW_SHOT_TEXT,
    MAX_FEW_SHOTS,
    MAX_IDENTITY,
    MAX_ITEM,
    MAX_LENGTH_LIMIT,
    MAX_LIST,
    MAX_NAME,
    Elixir,
)
from furnace.domain.text import detect_language, split_paragraphs

MAPPED = ("name", "identity", "principles", "few_shots", "expertise")
# The card fields each mapped elixir field is derived from (guards for exact values).
SOURCES: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "identity": ("name", "nickname", "description", "personality"),
    "principles": (
        "name",
        "nickname",
        "description",
        "personality",
        "scenario",
        "system_prompt",
        "post_history_instructions",
    ),
    "few_shots": ("name", "nickname", "mes_example"),
    "expertise": ("name", "nickname", "tags"),
}

_BOT = re.compile(r"<bot>", re.IGNORECASE)
_USER = re.compile(r"<user>", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")
_MACRO_ONLY = re.compile(r"^\s*(?:\{\{[^{}]*\}\}\s*)+$")  # e.g. "{{original}}" on its own line
_START = re.compile(r"^\s*<start>\s*$", re.IGNORECASE)
_TURN = re.compile(r"^\s*(\{\{user\}\}|<user>|\{\{char\}\}|<bot>)\s*:\s?(.*)$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")

_WORDS = {
    "en": {
        "personality": "Embody this personality: {}",
        "background": "Stay true to the character's background: {}",
        "scenario": "Keep to the scenario: {}",
        "default_principle": "Stay in character as {}.",
        "default_expertise": "role-play as {}",
    },
    "zh": {
        "personality": "保持这种性格：{}",
        "background": "忠于角色背景：{}",
        "scenario": "遵循场景设定：{}",
        "default_principle": "始终以{}的身份说话。",
        "default_expertise": "扮演{}",
    },
}


def guard(data: dict[str, Any], field: str) -> str:
    """A hash of the card fields ``field`` is derived from (detects later edits)."""
    return content_key({key: data.get(key) for key in SOURCES[field]})


def card_language(data: dict[str, Any]) -> str:
    """The language of a card's main text fields (see :func:`furnace.domain.text.detect_language`)."""
    return detect_language(
        " ".join(str(data.get(k) or "") for k in ("name", "description", "personality", "first_mes"))
    )


def _clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, at a sentence end or word boundary when possible."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.start() for m in _SENTENCE_END.finditer(head) if m.start() > limit // 3]
    if ends:
        return head[: ends[-1]].strip()
    cut = head[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def _legacy(text: str) -> str:
    """The legacy ``<BOT>``/``<USER>`` as the macros they stand for; every macro stays a macro."""
    if "<" not in text:
        return text
    return _USER.sub("{{user}}", _BOT.sub("{{char}}", text))


def _bullets(text: str) -> list[str] | None:
    """Items of a bullet list (``- a`` with two-space continuation lines), or None if not a list."""
    items: list[list[str]] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if _BULLET.match(line):
            items.append([_BULLET.sub("", line, count=1)])
        elif items and (line.startswith("  ") or not line.strip()):
            items[-1].append(line[2:])
        elif line.strip():
            return None
    return ["\n".join(item).strip() for item in items if "\n".join(item).strip()] or None


def _lines(text: str) -> list[str]:
    listed = _bullets(text)
    if listed is not None:
        return listed
    return [_BULLET.sub("", line).strip() for line in text.replace("\r\n", "\n").split("\n") if line.strip()]


def _add_unique(out: list[str], item: str, limit: int = MAX_LIST) -> None:
    item = _clip(item, MAX_ITEM)
    if item and len(out) < limit and item.casefold() not in {o.casefold() for o in out}:
        out.append(item)


def derive_identity(data: dict[str, Any], language: str) -> tuple[str, str]:
    """The identity sentence and the rest of the description (background)."""
    paras = split_paragraphs(_legacy(data.get("description") or ""))
    if paras:
        first = " ".join(paras[0].split())
        identity = _clip(first, MAX_IDENTITY)
        cut = len(identity) - 1 if identity.endswith("…") and not first.endswith("…") else len(identity)
        rest = "\n\n".join(p for p in [first[cut:].strip(), *paras[1:]] if p)
        return identity, rest
    personality = split_paragraphs(_legacy(data.get("personality") or ""))
    if personality:
        return _clip(personality[0], MAX_IDENTITY), ""
    return _clip(_legacy(str(data["name"])).strip() + ("。" if language == "zh" else "."), MAX_IDENTITY), ""


def derive_principles(data: dict[str, Any], language: str, *, generated_prompt: bool) -> list[str]:
    """Principles from the system prompt (unless furnace generated it), personality and background."""
    words = _WORDS[language]
    out: list[str] = []
    if not generated_prompt:
        for line in _lines(_legacy(data.get("system_prompt") or "")):
            if not _MACRO_ONLY.match(line):
                _add_unique(out, line)
    for line in _lines(_legacy(data.get("post_history_instructions") or "")):
        if not _MACRO_ONLY.match(line):
            _add_unique(out, line)
    personality = _legacy(data.get("personality") or "").strip()
    listed = _bullets(personality)
    if listed is not None:
        for item in listed:
            if not _MACRO_ONLY.match(item):
                _add_unique(out, item)
    elif personality:
        _add_unique(out, words["personality"].format(" ".join(personality.split())))
    _, background = derive_identity(data, language)
    if background:
        _add_unique(out, words["background"].format(" ".join(background.split())))
    scenario = _legacy(data.get("scenario") or "").strip()
    if scenario:
        _add_unique(out, words["scenario"].format(" ".join(scenario.split())))
    if not out:
        out.append(words["default_principle"].format(_legacy(str(data["name"])).strip()))
    return out


def derive_few_shots(data: dict[str, Any], language: str) -> list[dict[str, str]]:
    """``{{user}}:`` → ``{{char}}:`` pairs from the ``<START>`` blocks of ``mes_example``."""
    shots: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    blocks: list[list[tuple[str, list[str]]]] = [[]]
    for line in (data.get("mes_example") or "").replace("\r\n", "\n").split("\n"):
        if _START.match(line):
            blocks.append([])
            continue
        turn = _TURN.match(line)
        if turn:
            role = "user" if turn.group(1).lower() in ("{{user}}", "<user>") else "char"
            blocks[-1].append((role, [turn.group(2)]))
        elif blocks[-1]:
            blocks[-1][-1][1].append(line)
    for block in blocks:
        for (role, text), (next_role, next_text) in zip(block, block[1:], strict=False):
            if role != "user" or next_role != "char":
                continue
            shot = {"input": _legacy("\n".join(text)).strip(), "output": _legacy("\n".join(next_text)).strip()}
            key = (shot["input"].casefold(), shot["output"].casefold())
            if (
                shot["input"]
                and shot["output"]
                and key not in seen
                and len(shots) < MAX_FEW_SHOTS
                and max(len(shot["input"]), len(shot["output"])) <= MAX_FEW_SHOT_TEXT
            ):
                seen.add(key)
                shots.append(shot)
    return shots


def derive_expertise(data: dict[str, Any], language: str) -> list[str]:
    """The card's tags (de-duplicated), or "role-play as NAME" when it has none."""
    out: list[str] = []
    for tag in data.get("tags") or []:
        _add_unique(out, _legacy(tag))
    if not out:
        out.append(_WORDS[language]["default_expertise"].format(_legacy(str(data["name"])).strip()))
    return out


# max_length counts characters; a limit in words becomes characters at these rates (en: a word and
# its space average under 6 characters; zh: a word is one or two characters). The instruction itself
# is kept verbatim as a principle, so the model still reads the limit in words.
CHARS_PER_WORD = {"en": 6, "zh": 2}
_LIMIT_BEFORE = re.compile(
    r"\b(?:under|within|below|at most|no more than|not more than|fewer than|less than|up to|limit(?:ed)? to|"
    r"max(?:imum)?(?: of)?)\s+(\d{1,5})\s*(words?|characters?|chars?)\b",
    re.IGNORECASE,
)
_LIMIT_AFTER = re.compile(
    r"\b(\d{1,5})[\s-]*(words?|characters?|chars?)\s*(?:or (?:less|fewer)|max(?:imum)?|at most|limit)\b",
    re.IGNORECASE,
)
_LIMIT_ZH = re.compile(
    r"(?:不超过|不多于|不要超过|少于|最多|控制在)\s*(\d{1,5})\s*个?(字符|字|词)|(\d{1,5})\s*个?(字符|字|词)(?:以内|之内)"
)


def _limits(text: str) -> list[tuple[int, str]]:
    """``(number, unit)`` of each length limit stated in ``text``; unit ``chars`` or ``words``."""
    found = []
    for match in [*_LIMIT_BEFORE.finditer(text), *_LIMIT_AFTER.finditer(text)]:
        found.append((int(match.group(1)), "words" if match.group(2).lower().startswith("word") else "chars"))
    for match in _LIMIT_ZH.finditer(text):
        number, unit = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        found.append((int(number), "words" if unit == "词" else "chars"))
    return found


_REPLY_CUE = re.compile(
    r"repl|respon|answer|message|output|keep|limit|write|回复|回答|输出|每次|字数|篇幅", re.IGNORECASE
)
_SENTENCE = re.compile(r"(?<=[.!?。！？;；])\s*|\n+")
MIN_STATED_LENGTH = 20  # a shorter "limit" is about something else (a name, a title), not the reply


def derive_constraints(data: dict[str, Any], language: str) -> dict[str, Any]:
    """Constraints stated in ``post_history_instructions``: the tightest length limit on the reply as
    ``max_length`` (characters; words × :data:`CHARS_PER_WORD`), within the elixir's bounds.

    Only a sentence that speaks of the reply ("Keep replies under 80 words.", "回复不超过100字") counts,
    and a limit under :data:`MIN_STATED_LENGTH` characters is ignored. Empty when none is stated."""
    lengths = []
    for sentence in _SENTENCE.split(data.get("post_history_instructions") or ""):
        if _REPLY_CUE.search(sentence):
            lengths += [n * CHARS_PER_WORD[language] if unit == "words" else n for n, unit in _limits(sentence)]
    lengths = [n for n in lengths if n >= MIN_STATED_LENGTH]
    if not lengths:
        return {}
    return {"max_length": min(min(lengths), MAX_LENGTH_LIMIT)}


def derive_fields(data: dict[str, Any], language: str, *, generated_prompt: bool = False) -> dict[str, Any]:
    """Every mapped elixir field, derived from a card's ``data`` object."""
    return {
        "name": _clip(" ".join(str(data["name"]).split()), MAX_NAME),
        "identity": derive_identity(data, language)[0],
        "principles": derive_principles(data, language, generated_prompt=generated_prompt),
        "few_shots": derive_few_shots(data, language),
        "expertise": derive_expertise(data, language),
    }


def encode_principles(principles: list[str]) -> str:
    """Principles as ``- `` bullets; inner lines indented two spaces so they stay one item."""
    return "\n".join("- " + p.replace("\n", "\n  ") for p in principles)


def encode_few_shots(few_shots: list[dict[str, str]]) -> str:
    """Few-shots in the ``<START>`` / ``{{user}}:`` / ``{{char}}:`` example format."""
    return "\n".join(f"<START>\n{{{{user}}}}: {s['input']}\n{{{{char}}}}: {s['output']}" for s in few_shots)


def mapped_values(elixir: Elixir) -> dict[str, Any]:
    """The mapped fields of ``elixir`` as JSON data (comparable with :func:`derive_fields`)."""
    data = elixir.model_dump(mode="json", include=set(MAPPED))
    return {key: data[key] for key in MAPPED}


def encode_visible(values: dict[str, Any]) -> dict[str, Any]:
    """Card ``data`` fields for the mapped elixir values (``system_prompt`` is set by the caller)."""
    return {
        "name": values["name"],
        "description": values["identity"],
        "personality": encode_principles(values["principles"]),
        "mes_example": encode_few_shots(values["few_shots"]),
        "tags": list(values["expertise"]),
    }


# Which card fields each mapped value is written to.
WRITES: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "identity": ("description",),
    "principles": ("personality",),
    "few_shots": ("mes_example",),
    "expertise": ("tags",),
}
