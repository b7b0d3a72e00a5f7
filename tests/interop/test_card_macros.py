"""SillyTavern macros and post_history_instructions: kept on import, served expanded, never lost."""

from __future__ import annotations

import json

import pytest
from cards_data import V2_CARD, V3_CARD, ZH_CARD, card

from furnace.arena.runner import Arena
from furnace.arena.store import InMemoryArenaStore
from furnace.domain.elixir import parse_elixir
from furnace.domain.macros import expand_macros, served
from furnace.domain.render import render_prompt
from furnace.interop.card_mapping import CHARS_PER_WORD, derive_constraints
from furnace.interop.cards import card_for, elixir_from_card, export_card_json, read_card_bytes
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import LLMRequest, Message, TaskKind
from furnace.storage.memory import MemoryStore


@pytest.mark.parametrize(
    "text, expected",
    [
        ("You are {{char}}.", "You are Mira."),
        ("You are {{Char}}; answer {{USER}}.", "You are Mira; answer the user."),
        ("{{charIfNotGroup}} speaks.", "Mira speaks."),
        ("{{original}}", ""),
        ("{{original}} Be brief.", "Be brief."),
        ("Be brief.{{// a note for the author}}", "Be brief."),
        ("Be {{noop}}brief{{trim}}.", "Be brief."),
        ("Line one{{newline}}line two", "Line one\nline two"),
        ("Wear a {{random::red::blue}} hat.", "Wear a red hat."),
        ("Wear a {{random:red,blue}} hat.", "Wear a red hat."),
        ("Wear a {{pick::green::blue}} hat.", "Wear a green hat."),
        ("Today is {{date}}, {{weekday}}.", "Today is,."),
        ("It is {{time}} ({{time_UTC+2}}) now", "It is () now"),
        ("Reply to {{lastMessage}} with care.", "Reply to with care."),
        ("Think of {{description}} and {{personality}}.", "Think of and."),
        ("Roll {{roll:d6}} and note {{getvar::mood}}.", "Roll and note."),
        ("code: {{ item.name }} and {{unknownThing}}", "code: {{ item.name }} and {{unknownThing}}"),
        ("    indented {{char}}\n        keeps its indentation", "indented Mira\n        keeps its indentation"),
        ("no macro at all  (two spaces)", "no macro at all  (two spaces)"),
    ],
)
def test_each_macro_is_expanded_or_dropped_as_documented(text: str, expected: str) -> None:
    assert expand_macros(text, char="Mira") == expected


def test_user_is_said_in_the_prompt_language() -> None:
    assert expand_macros("请耐心回答{{user}}。", char="老周", language="zh") == "请耐心回答用户。"


def test_a_renamed_persona_is_called_by_its_new_name() -> None:
    imported = elixir_from_card(card(V3_CARD)).elixir  # nickname "Quill"
    assert "You are Quill, keeper" in render_prompt(imported)
    renamed = imported.model_copy(update={"name": "Librarian Owl"})
    assert "You are Librarian Owl, keeper" in render_prompt(renamed)


def test_no_macro_reaches_a_served_prompt_of_a_card_full_of_them() -> None:
    c = card(V2_CARD)
    c["data"]["system_prompt"] = "{{original}}\n{{original}} Speak as {{char}} to {{user}} on {{date}}."
    c["data"]["mes_example"] = "<START>\n<USER>: Who are you?\n<BOT>: I am {{char}}, {{user}}."
    elixir = read_card_bytes(json.dumps(c).encode()).elixir
    assert elixir.few_shots[0].output == "I am {{char}}, {{user}}."  # the legacy markers read as macros
    prompt = render_prompt(elixir)
    assert "{{" not in prompt and "<BOT>" not in prompt
    assert "Speak as Captain Mirela Voss to the user on." in prompt
    assert "> I am Captain Mirela Voss, the user." in prompt


def test_the_arena_speaker_sends_the_persona_as_served() -> None:
    elixir = read_card_bytes(json.dumps(card(V2_CARD)).encode()).elixir
    store = MemoryStore()
    store.save_elixir(elixir)
    llm = FakeLLM(respond=lambda request: "Aye.")
    arena = Arena(InMemoryArenaStore(), store, llm)
    arena.say(arena.create_session([elixir.id]).id, "Hello?")
    [call] = llm.calls
    persona = {k: v for k, v in call.inputs["persona"].items() if k != "extensions"}  # the card stays as it came
    assert "{{" not in json.dumps(persona) and "{{" not in call.messages[0].content
    assert call.inputs["persona"]["identity"].startswith("Captain Mirela Voss is")


def test_an_elixir_without_macros_is_served_as_itself() -> None:
    elixir = parse_elixir(
        {
            "id": "plain",
            "name": "Plain",
            "language": "en",
            "identity": "A plain persona.",
            "expertise": ["plain things"],
            "principles": ["Be plain."],
        }
    )
    assert served(elixir) is elixir


# --- post_history_instructions ----------------------------------------------------------


def _with_phi(text: str, base: dict = V2_CARD) -> dict:
    c = card(base)
    c["data"]["post_history_instructions"] = text
    return c


def test_a_word_limit_becomes_max_length_and_stays_verbatim_in_the_prompt() -> None:
    elixir = elixir_from_card(_with_phi("Keep replies under 80 words.")).elixir
    assert elixir.constraints.max_length == 80 * CHARS_PER_WORD["en"]
    prompt = render_prompt(elixir)
    assert "Keep replies under 80 words." in prompt
    assert f"Keep every answer within {80 * CHARS_PER_WORD['en']} characters." in prompt


@pytest.mark.parametrize(
    "text, language, max_length",
    [
        ("Answer in no more than 300 characters.", "en", 300),
        ("Replies: 50 words or fewer, always.", "en", 50 * CHARS_PER_WORD["en"]),
        ("Keep replies under 200 chars, and no more than 40 words.", "en", 200),  # the tightest wins
        ("Give every ship a name of at most 12 characters.", "en", None),  # not about the reply
        ("Keep replies under 3 words.", "en", None),  # 18 characters: too short to be a reply limit
        ("回复不超过100字。", "zh", 100),
        ("每次回答控制在150字以内。", "zh", 150),
        ("Write {{char}}'s next reply in third person, 1-3 paragraphs.", "en", None),  # no length limit
        ("", "en", None),
    ],
)
def test_length_limits_in_post_history_instructions(text: str, language: str, max_length: int | None) -> None:
    assert derive_constraints({"post_history_instructions": text}, language).get("max_length") == max_length


def test_instructions_without_a_limit_are_kept_verbatim_as_a_principle() -> None:
    elixir = elixir_from_card(card(V2_CARD)).elixir  # "Write {{char}}'s next reply in third person, 1-3 paragraphs."
    assert V2_CARD["data"]["post_history_instructions"] in elixir.principles
    assert "Write Captain Mirela Voss's next reply in third person, 1-3 paragraphs." in render_prompt(elixir)
    assert elixir.constraints.max_length is None


def test_a_zh_card_limit_is_served_in_zh() -> None:
    elixir = elixir_from_card(_with_phi("回复不超过100字。", ZH_CARD)).elixir
    prompt = render_prompt(elixir)
    assert elixir.constraints.max_length == 100
    assert "回复不超过100字。" in prompt and "每次回答不超过 100 字。" in prompt


@pytest.mark.parametrize("spec", ["v2", "v3"])
def test_the_round_trip_keeps_post_history_instructions(spec: str) -> None:
    original = _with_phi("{{original}}\nKeep replies under 80 words.")
    imported = elixir_from_card(original).elixir
    exported = json.loads(export_card_json(imported, spec))  # type: ignore[arg-type]
    assert exported["data"]["post_history_instructions"] == "{{original}}\nKeep replies under 80 words."
    back = read_card_bytes(json.dumps(exported).encode()).elixir
    assert back.content_hash == imported.content_hash
    assert back.constraints.max_length == 80 * CHARS_PER_WORD["en"]


def test_furnace_constraints_carried_by_a_card_win_over_the_stated_limit() -> None:
    imported = elixir_from_card(_with_phi("Keep replies under 80 words.")).elixir
    tightened = imported.model_copy(update={"constraints": imported.constraints.model_copy(update={"max_length": 200})})
    back = elixir_from_card(card_for(tightened, "v3")).elixir
    assert back.constraints.max_length == 200


def test_the_offline_model_never_quotes_a_macro() -> None:
    c = card(V2_CARD)
    c["data"]["system_prompt"] = "{{original}} Always greet {{user}} as {{char}} of the Kestrel."
    elixir = read_card_bytes(json.dumps(c).encode()).elixir
    request = LLMRequest(
        task=TaskKind.REPLY,
        messages=(Message(role="system", content=render_prompt(elixir)), Message(role="user", content="Greetings!")),
        inputs={"persona": elixir.model_dump(mode="json"), "message": "How should I greet you?", "instruction": None},
    )
    text = OfflineEngine().complete(request).text
    assert text and "{{" not in text
