"""Mentions take the longest member name, and a mentioned member answers the question, not the name."""

from __future__ import annotations

import pytest

from furnace.arena.directives import DirectiveKind, MemberName, classify, find_mentions, strip_mentions
from furnace.arena.runner import Arena
from furnace.arena.store import InMemoryArenaStore
from furnace.domain.elixir import Elixir
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import TaskKind
from furnace.storage.memory import MemoryStore

ROOM = [
    MemberName(id="m1", name="Quant"),
    MemberName(id="m2", name="Quant Trader"),
    MemberName(id="m3", name="小周"),
    MemberName(id="m4", name="Dr. Who"),
    MemberName(id="m5", name="Ann"),
    MemberName(id="m6", name="José Ruiz"),
]


@pytest.mark.parametrize(
    "message, mentions",
    [
        ("@Quant Trader what's the spread?", ("m2",)),
        ("@quant trader what's the spread?", ("m2",)),  # Latin names: any case
        ("@QUANT  TRADER what's the spread?", ("m2",)),  # two spaces where the name has one
        ("@Quant what's the spread?", ("m1",)),
        ("@Quant Trader and @Quant, both of you", ("m1", "m2")),
        ("@小周你好", ("m3",)),  # zh: no space after the name
        ("＠小周 你好", ("m3",)),  # a full-width @
        ("@Dr. Who? are you there", ("m4",)),
        ("@Anna hello", ()),  # "@Ann" does not run on into a longer name
        ("@Annè hello", ()),  # nor into a longer non-ASCII one
        ("@josé ruiz hola", ("m6",)),
    ],
)
def test_a_mention_is_the_longest_member_name(message: str, mentions: tuple[str, ...]) -> None:
    assert find_mentions(message, ROOM) == mentions


@pytest.mark.parametrize(
    "message, question",
    [
        ("@Quant Trader what's the spread?", "what's the spread?"),
        ("@QUANT  TRADER, what's the spread?", "what's the spread?"),
        ("@小周，今天喝什么茶？", "今天喝什么茶？"),
        ("Hi @Ann and @nobody, one question", "Hi and @nobody, one question"),  # only members' handles go
        ("no mention at all", "no mention at all"),
    ],
)
def test_strip_mentions_leaves_the_question(message: str, question: str) -> None:
    assert strip_mentions(message, ROOM) == question


def test_a_two_word_name_mention_is_a_mention_of_that_member_only() -> None:
    directive = classify("@Quant  Trader what's the spread?", ROOM)
    assert (directive.kind, directive.mentions) == (DirectiveKind.MENTION, ("m2",))


def _store() -> MemoryStore:
    store = MemoryStore()
    for data in (
        dict(
            id="quant",
            name="Quant Trader",
            language="en",
            identity="A quantitative trader.",
            expertise=["options pricing", "market risk"],
            principles=["Size positions by risk."],
        ),
        dict(
            id="chef",
            name="Chef",
            language="en",
            identity="A home chef.",
            expertise=["cooking"],
            principles=["Taste as you go."],
        ),
    ):
        store.save_elixir(Elixir.model_validate(data))
    return store


def test_the_offline_reply_quotes_the_question_not_the_second_word_of_the_name() -> None:
    arena = Arena(InMemoryArenaStore(), _store(), OfflineEngine())
    session = arena.create_session(["chef", "quant"])
    outcome = arena.say(session.id, "@Quant Trader what's the best way to hedge a stock position?")
    [reply] = outcome.replies
    assert reply.member_id == "quant"
    assert "what's the best way to hedge" in reply.text
    assert "Trader what" not in reply.text


def test_the_model_sees_the_message_as_written_and_the_question_as_an_input() -> None:
    llm = FakeLLM(respond=lambda request: "ok")
    arena = Arena(InMemoryArenaStore(), _store(), llm)
    session = arena.create_session(["chef", "quant"])
    arena.say(session.id, "@Quant Trader what's the spread?")
    [call] = [c for c in llm.calls if c.task is TaskKind.REPLY]
    assert call.inputs["question"] == "what's the spread?"
    assert "@Quant Trader what's the spread?" in call.messages[-1].content
    arena.say(session.id, "@all hello")  # nothing stripped: no question input, the request as before
    assert all("question" not in c.inputs for c in llm.calls[1:])
