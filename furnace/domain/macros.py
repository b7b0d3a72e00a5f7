"""SillyTavern macros in persona text: kept as written in an elixir, expanded when a prompt is served.

A character card's text (and so an imported elixir's) may hold macros such as
``{{char}}`` or ``{{original}}``. The elixir keeps them as macros (a renamed or
fused persona still says its own name); :func:`expand_macros` turns them into
what a model should read, and :func:`served` does it for every text field of an
elixir (what :func:`furnace.domain.render.render_prompt` renders, and what the
arena's speakers send as the persona). Deterministic: no clock, no chance.

=============================================  ==============================================
macro (names are case-insensitive)             when a prompt is served
=============================================  ==============================================
``{{char}}``, ``{{charIfNotGroup}}``           the persona's name (a V3 card's ``nickname``
                                               while the persona keeps the card's name)
``{{user}}``                                   "the user" (zh: "用户")
``{{original}}``                               dropped: there is no other prompt it could stand for
``{{// note}}``, ``{{noop}}``, ``{{trim}}``    dropped
``{{newline}}``                                a line break (a space in one-line fields)
``{{random::a::b}}``, ``{{random:a,b}}``,      the first option (the same persona always renders
``{{pick::a::b}}``                             the same prompt)
``{{date}}``, ``{{time}}``, ``{{weekday}}``,   dropped: a served prompt has no clock
``{{isodate}}``, ``{{isotime}}``,
``{{datetimeformat …}}``, ``{{time_UTC±N}}``,
``{{idle_duration}}``
chat state: ``{{input}}``, ``{{lastMessage}}``,  dropped: the chat history is sent as messages
``{{lastUserMessage}}``, ``{{lastCharMessage}}``,
``{{lastMessageId}}``, ``{{group}}``, …
card fields: ``{{description}}``,              dropped: the prompt already carries them as
``{{personality}}``, ``{{scenario}}``,          sections
``{{persona}}``, ``{{mesExamples}}``, …
variables and dice: ``{{getvar::x}}``,          dropped
``{{setvar::x::v}}``, ``{{roll:d6}}``, …
anything else in ``{{…}}``                      left as written (``{{ x }}`` is also ordinary
                                               template syntax, e.g. in a code example)
=============================================  ==============================================

The legacy ``<BOT>`` and ``<USER>`` are read as ``{{char}}`` and ``{{user}}`` when a
card is imported (:mod:`furnace.interop.card_mapping`), not here: in other text
they are markup.
"""

from __future__ import annotations

import re

from furnace.domain.elixir import Elixir

USER_WORDS = {"en": "the user", "zh": "用户"}

_MACRO = re.compile(r"\{\{(?P<body>[^{}]*)\}\}")
_NAME = re.compile(r"^\s*(?P<name>//|[A-Za-z_][A-Za-z0-9_]*)(?P<rest>.*)$", re.DOTALL)
_DROPPED = frozenset(
    name.casefold()
    for name in [
        "original",
        "noop",
        "trim",
        "date",
        "time",
        "weekday",
        "isodate",
        "isotime",
        "datetimeformat",
        "idle_duration",
        "input",
        "lastMessage",
        "lastUserMessage",
        "lastCharMessage",
        "lastMessageId",
        "firstIncludedMessageId",
        "currentSwipeId",
        "lastSwipeId",
        "lastGenerationType",
        "group",
        "groupNotMuted",
        "notChar",
        "description",
        "personality",
        "scenario",
        "persona",
        "mesExamples",
        "mesExamplesRaw",
        "charPrompt",
        "charInstruction",
        "charJailbreak",
        "charDepthPrompt",
        "charVersion",
        "char_version",
        "model",
        "maxPrompt",
        "exampleSeparator",
        "chatSeparator",
        "chatStart",
        "systemPrompt",
        "defaultSystemPrompt",
        "instructSystem",
        "getvar",
        "setvar",
        "addvar",
        "incvar",
        "decvar",
        "getglobalvar",
        "setglobalvar",
        "addglobalvar",
        "incglobalvar",
        "decglobalvar",
        "roll",
        "banned",
        "reverse",
        "outlet",
    ]
)
_CHOICES = frozenset({"random", "pick"})
_GONE = "\x00"  # where a dropped macro was, until the spaces around it are tidied
_GONE_BEFORE_PUNCT = re.compile(r"[ \t]*\x00+[ \t]*(?=[.,;:!?。，；：！？])")
_GONE_BETWEEN = re.compile(r"[ \t]+\x00+[ \t]+")


def _choice(rest: str) -> str:
    """The first option of ``random``/``pick``: ``::a::b`` or ``:a,b`` (or `` a,b``)."""
    if rest.startswith("::"):
        return rest[2:].split("::")[0]
    return rest.lstrip(": ").split(",")[0].strip()


def _one(match: re.Match[str], char: str, user: str) -> str:
    body = match.group("body")
    head = _NAME.match(body)
    if head is None:
        return match.group(0)
    name, rest = head.group("name").casefold(), head.group("rest")
    if name == "//":
        return _GONE
    if rest.strip() == "" and name in ("char", "charifnotgroup"):
        return char
    if rest.strip() == "" and name == "user":
        return user
    if rest.strip() == "" and name == "newline":
        return "\n"
    if name in _CHOICES and rest.strip():
        return _choice(rest)
    if name in _DROPPED or name.startswith("time_utc"):
        return _GONE
    return match.group(0)


def expand_macros(text: str, *, char: str, language: str = "en") -> str:
    """``text`` with its SillyTavern macros expanded or dropped (the table above); other text unchanged.

    Where a dropped macro leaves a double space or a space before punctuation, that is tidied (other
    spacing, e.g. a code example's indentation, is kept)."""
    if "{{" not in text:
        return text
    user = USER_WORDS.get(language, USER_WORDS["en"])
    out = _MACRO.sub(lambda m: _one(m, char, user), text)
    if out == text:
        return text
    out = _GONE_BETWEEN.sub(" ", _GONE_BEFORE_PUNCT.sub("", out)).replace(_GONE, "")
    return out.strip()


def char_name(elixir: Elixir) -> str:
    """What ``{{char}}`` stands for: the persona's name, or the nickname of the card it was imported from
    (Character Card V3: ``{{char}}`` is the nickname when there is one) while it still has the card's name."""
    card = elixir.extensions.get("card")
    data = card.get("data") if isinstance(card, dict) else None
    if isinstance(data, dict) and data.get("name") == elixir.name:
        nickname = data.get("nickname")
        if isinstance(nickname, str) and nickname.strip():
            return nickname.strip()
    return elixir.name


def has_macros(elixir: Elixir) -> bool:
    """Whether any text field of ``elixir`` may hold a macro."""
    texts = [elixir.identity, elixir.style_notes, *elixir.expertise, *elixir.principles]
    texts += [t for shot in elixir.few_shots for t in (shot.input, shot.output)]
    texts += list(elixir.constraints.forbidden_topics)
    return any("{{" in t for t in texts)


def served(elixir: Elixir, language: str | None = None) -> Elixir:
    """``elixir`` as a model is shown it: macros expanded in every text field (``language`` picks the
    word for ``{{user}}``; default the elixir's). An item that is nothing but dropped macros is left
    out (a list keeps its items as written rather than end empty). Without macros: ``elixir`` itself."""
    if not has_macros(elixir):
        return elixir
    lang, char = language or elixir.language, char_name(elixir)

    def one(text: str) -> str:
        return expand_macros(text, char=char, language=lang)

    def items(values: tuple[str, ...]) -> tuple[str, ...]:
        kept = tuple(x for x in (one(v) for v in values) if x.strip())
        return kept or values

    shots = tuple(
        shot.model_copy(update={"input": one(shot.input) or shot.input, "output": one(shot.output) or shot.output})
        for shot in elixir.few_shots
    )
    constraints = elixir.constraints.model_copy(
        update={"forbidden_topics": tuple(x for x in map(one, elixir.constraints.forbidden_topics) if x.strip())}
    )
    return elixir.model_copy(
        update={
            "identity": one(elixir.identity) or elixir.identity,
            "expertise": items(elixir.expertise),
            "principles": items(elixir.principles),
            "few_shots": shots,
            "style_notes": one(elixir.style_notes),
            "constraints": constraints,
        }
    )
