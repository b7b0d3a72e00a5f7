"""Card fidelity: V3 lorebooks carry ``use_regex``; SillyTavern macros stay macros, never principles."""

from __future__ import annotations

import json

from cards_data import V2_CARD, V3_CARD, card

from furnace.domain.macros import served
from furnace.domain.render import render_prompt
from furnace.interop.card_format import decode_card_bytes
from furnace.interop.cards import card_for, export_card_json, export_card_png, read_card_bytes


def _v2_with_book() -> dict:
    c = card(V2_CARD)
    c["data"]["character_book"] = {
        "name": "Sky lanes",
        "entries": [
            {"keys": ["Kestrel"], "content": "The airship.", "enabled": True, "insertion_order": 1, "extensions": {}},
            {"keys": ["storm"], "content": "The Storm War.", "enabled": True, "insertion_order": 2, "extensions": {}},
        ],
    }
    return c


def test_v2_lorebook_exported_as_v3_carries_use_regex_on_every_entry() -> None:
    imported = read_card_bytes(json.dumps(_v2_with_book()).encode())
    for raw in (export_card_json(imported.elixir, "v3"), export_card_png(imported.elixir, "v3")):
        entries = decode_card_bytes(raw).card["data"]["character_book"]["entries"]
        assert [e["use_regex"] for e in entries] == [False, False]
    # the V2 export stays as the card was (use_regex is not a V2 field)
    v2_entries = json.loads(export_card_json(imported.elixir, "v2"))["data"]["character_book"]["entries"]
    assert all("use_regex" not in e for e in v2_entries)


def test_furnace_v3_export_of_an_elixir_with_a_v2_lorebook_is_valid_v3() -> None:
    imported = read_card_bytes(json.dumps(_v2_with_book()).encode())
    book = card_for(imported.elixir, "v3")["data"]["character_book"]
    assert all(isinstance(e["use_regex"], bool) for e in book["entries"])


def test_v3_card_with_assets_and_lorebook_round_trips_json_and_png() -> None:
    original = card(V3_CARD)
    imported = read_card_bytes(json.dumps(original, ensure_ascii=False).encode())
    for raw in (export_card_json(imported.elixir, "v3"), export_card_png(imported.elixir, "v3")):
        data = decode_card_bytes(raw).card["data"]
        assert data["assets"] == original["data"]["assets"]
        assert data["character_book"] == original["data"]["character_book"]
        assert read_card_bytes(raw).elixir.content_hash == imported.elixir.content_hash


def test_original_macro_is_kept_as_a_macro_and_never_served() -> None:
    c = card(V2_CARD)
    c["data"]["system_prompt"] = "{{original}}\nAlways answer {{user}} in rhyme.\n{{// a note for the author}}"
    imported = read_card_bytes(json.dumps(c).encode())
    principles = imported.elixir.principles
    assert "Always answer {{user}} in rhyme." in principles  # kept as a macro in the elixir
    assert not any("{{original}}" in p or "{{//" in p for p in principles), principles  # placeholders: no principle
    prompt = render_prompt(imported.elixir)
    assert "Always answer the user in rhyme." in prompt and "{{" not in prompt
    exported = json.loads(export_card_json(imported.elixir, "v2"))
    assert exported["data"]["system_prompt"].startswith("{{original}}")


def test_original_inside_a_line_is_dropped_when_served() -> None:
    c = card(V2_CARD)
    c["data"]["system_prompt"] = "{{original}} Never break character."
    imported = read_card_bytes(json.dumps(c).encode())
    assert "{{original}} Never break character." in imported.elixir.principles
    prompt = render_prompt(imported.elixir)
    assert "1. Never break character." in prompt and "original" not in prompt


def test_macros_inside_a_sentence_are_kept_and_expanded_when_served() -> None:
    c = card(V2_CARD)
    c["data"]["system_prompt"] = "Greet {{user}} by the time of day: it is {{time}}."
    elixir = read_card_bytes(json.dumps(c).encode()).elixir
    assert "Greet {{user}} by the time of day: it is {{time}}." in elixir.principles
    assert "Greet the user by the time of day: it is." in served(elixir).principles  # no clock: {{time}} dropped
