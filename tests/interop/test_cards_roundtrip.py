"""Character card round trips: furnace → card → furnace, and foreign card → furnace → card."""

from __future__ import annotations

import copy
import json

import pytest
from cards_data import V2_CARD, V3_CARD, ZH_CARD, card
from conftest import make_agent

from furnace import resources
from furnace.domain.elixir import Elixir, edit
from furnace.domain.macros import served
from furnace.interop.card_format import decode_card_bytes
from furnace.interop.cards import (
    card_for,
    elixir_from_card,
    export_card_json,
    export_card_png,
    read_card_bytes,
)
from furnace.interop.png import text_chunks

FOREIGN = {"v2": V2_CARD, "v3": V3_CARD, "zh": ZH_CARD}


def _spec(c: dict) -> str:
    return "v3" if c["spec"] == "chara_card_v3" else "v2"


def _without_furnace(c: dict) -> dict:
    c = copy.deepcopy(c)
    c["data"]["extensions"].pop("furnace")
    return c


# --- furnace → card → furnace -------------------------------------------------


@pytest.mark.parametrize("spec", ["v2", "v3"])
def test_native_json_round_trip_keeps_content_hash(native: Elixir, spec: str) -> None:
    got = read_card_bytes(export_card_json(native, spec))
    assert got.origin == "furnace" and got.spec == spec
    assert got.elixir.content_hash == native.content_hash
    assert got.elixir.id == native.id
    assert got.elixir.extensions == {}


def test_native_png_round_trip_keeps_content_hash(native: Elixir) -> None:
    png = export_card_png(native)
    chunks = text_chunks(png)
    assert set(chunks) == {"ccv3", "chara"}
    got = read_card_bytes(png)
    assert got.container == "png" and got.spec == "v3"
    assert got.elixir.content_hash == native.content_hash
    # The V2 backfill alone also round-trips, and says it is a backfill.
    v2_only = decode_card_bytes(png).card  # ccv3 preferred
    assert v2_only["spec"] == "chara_card_v3"
    v2 = json.loads(__import__("base64").b64decode(chunks["chara"]))
    assert v2["data"]["creator_notes"].startswith("This character card is Character Card V3")
    assert elixir_from_card(v2).elixir.content_hash == native.content_hash


def test_native_card_is_readable_by_card_tools(native: Elixir) -> None:
    data = card_for(native, "v3")["data"]
    assert data["name"] == "Night Editor"
    assert data["description"] == native.identity
    assert data["tags"] == list(native.expertise)
    assert data["personality"].startswith("- Fix errors of fact")
    assert "<START>\n{{user}}: Is 'alot' a word?\n{{char}}: No: write 'a lot'." in data["mes_example"]
    assert "## Principles" in data["system_prompt"]  # the rendered persona for tools that only read it
    assert data["group_only_greetings"] == []
    furn = data["extensions"]["furnace"]
    assert furn["tone"]["humor"] == 0.15 and furn["priority"] == 140
    assert furn["constraints"]["forbidden_topics"] == ["politics"]
    assert furn["conflicts_with"] == ["chaos-poet"] and furn["tools"] == ["spellcheck", "style_guide.lookup"]
    assert furn["style_preferences"][0]["value"] == "concise"
    assert furn["language"] == "en" and furn["id"] == "night-editor"
    assert furn["content_hash"] == native.content_hash


def test_export_is_deterministic(native: Elixir) -> None:
    assert export_card_json(native) == export_card_json(native)
    assert export_card_png(native) == export_card_png(native)


def test_card_edited_in_another_tool_wins_over_exact_values(native: Elixir) -> None:
    c = card_for(native, "v3")
    c["data"]["description"] = "A calm night editor who loves semicolons."
    c["data"]["personality"] = "- Keep it short.\n- Check every name twice."
    c["data"]["tags"].append("fact checking")
    got = elixir_from_card(c).elixir
    assert got.identity == "A calm night editor who loves semicolons."
    assert got.principles == ("Keep it short.", "Check every name twice.")
    assert got.expertise[-1] == "fact checking"
    # Untouched fields keep their exact values; elixir-only fields come from the extension.
    assert got.few_shots == native.few_shots
    assert got.tone == native.tone and got.priority == 140 and got.id == native.id
    # A lorebook added in the other tool is kept for the next export.
    c2 = card_for(native, "v3")
    c2["data"]["character_book"] = {
        "entries": [
            {
                "keys": ["dash"],
                "content": "Use en dashes.",
                "extensions": {},
                "enabled": True,
                "insertion_order": 1,
                "use_regex": False,
            }
        ]
    }
    again = card_for(elixir_from_card(c2).elixir, "v3")
    assert again["data"]["character_book"] == c2["data"]["character_book"]


def test_agent_card_appends_lineage_to_source(native: Elixir) -> None:
    child = edit(native, identity="A faster night editor.")
    agent = make_agent(child, native)
    c = card_for(agent, "v3")
    assert c["data"]["source"][0] == f"furnace:lineage:{agent.lineage_hash}"
    assert f"furnace:parent:night-editor@1:{native.content_hash}" in c["data"]["source"]
    assert c["data"]["system_prompt"] == agent.system_prompt
    furn = c["data"]["extensions"]["furnace"]
    assert furn["lineage"]["lineage_hash"] == agent.lineage_hash and furn["agent_id"] == agent.id
    got = read_card_bytes(export_card_png(agent))
    assert got.elixir.content_hash == child.content_hash
    assert got.lineage == agent.lineage.model_dump(mode="json")


def test_agent_source_is_appended_after_foreign_sources(native: Elixir) -> None:
    parent = elixir_from_card(card(V3_CARD)).elixir
    agent = make_agent(parent, native)
    sources = card_for(agent, "v3")["data"]["source"]
    assert sources[:2] == V3_CARD["data"]["source"]
    assert sources[2] == f"furnace:lineage:{agent.lineage_hash}"
    # Exporting the re-imported card does not append the same entries twice.
    again = elixir_from_card(card_for(agent, "v3")).elixir
    assert card_for(make_agent(again, native), "v3")["data"]["source"] == sources


# --- foreign card → furnace → card -------------------------------------------


@pytest.mark.parametrize("which", sorted(FOREIGN))
def test_foreign_json_round_trip_keeps_every_field(which: str) -> None:
    original = card(FOREIGN[which])
    spec = _spec(original)
    imported = read_card_bytes(json.dumps(original, ensure_ascii=False).encode())
    assert imported.origin == "foreign"
    exported = json.loads(export_card_json(imported.elixir, spec))
    assert _without_furnace(exported) == original
    # ... and importing the export gives the identical elixir.
    assert read_card_bytes(export_card_json(imported.elixir, spec)).elixir.content_hash == imported.elixir.content_hash


@pytest.mark.parametrize("which", sorted(FOREIGN))
def test_foreign_png_round_trip_keeps_every_field(which: str) -> None:
    from furnace.interop.card_format import encode_chunk
    from furnace.interop.png import write_png

    original = card(FOREIGN[which])
    spec = _spec(original)
    keyword = "ccv3" if spec == "v3" else "chara"
    imported = read_card_bytes(write_png([("Title", "A card"), (keyword, encode_chunk(original))]))
    png = export_card_png(imported.elixir, spec)
    decoded = decode_card_bytes(png)
    assert _without_furnace(decoded.card) == original
    assert read_card_bytes(png).elixir.content_hash == imported.elixir.content_hash


def test_v3_lorebook_greetings_assets_and_unknown_extensions_survive() -> None:
    elixir = elixir_from_card(card(V3_CARD)).elixir
    data = card_for(elixir, "v3")["data"]
    book = data["character_book"]
    assert [e["keys"] for e in book["entries"]] == [["iron door", "forbidden wing"], ["/tide(s)?/i"]]
    assert book["entries"][0]["content"].startswith("@@depth 2")
    assert book["extensions"] == {"risu_fullWordMatching": True}
    assert data["alternate_greetings"] == V3_CARD["data"]["alternate_greetings"]
    assert data["group_only_greetings"] == ["Readers, please form an orderly queue."]
    assert data["assets"] == V3_CARD["data"]["assets"]
    assert data["extensions"]["some_tool"] == {"x": 1}
    assert data["extensions"]["depth_prompt"]["depth"] == 4
    assert data["creator_notes_multilingual"]["ja"] == "優しい司書ボット。"
    assert data["creation_date"] == 1700000000


def test_foreign_mapping() -> None:
    v3 = elixir_from_card(card(V3_CARD)).elixir
    assert v3.name == "Archivist Quill" and v3.id == "archivist-quill"
    assert v3.expertise == ("Fantasy", "Library", "Robot")
    assert v3.principles[:2] == ("You are {{char}}, keeper of the Endless Library.", "Always stay polite to {{user}}.")
    # macros are served expanded: {{char}} is the V3 card's nickname
    assert served(v3).principles[:2] == (
        "You are Quill, keeper of the Endless Library.",
        "Always stay polite to the user.",
    )
    assert "Never invent a book that is not in the catalogue." in v3.principles
    assert [s.input for s in v3.few_shots] == ["Do you have anything on tides?", "What's behind the iron door?"]
    v2 = elixir_from_card(card(V2_CARD)).elixir
    assert v2.identity.startswith("{{char}} is the weathered captain")  # kept as a macro
    assert served(v2).identity.startswith("Captain Mirela Voss is the weathered captain")  # expanded when served
    assert v2.expertise == ("Adventure", "Airship", "Female", "Steampunk")  # case-insensitive duplicate dropped
    assert v2.few_shots[1].output == "Outrun? No. Outsmart? Always.\nHold on to something."
    assert any(p.startswith("Embody this personality: gruff") for p in v2.principles)
    zh = elixir_from_card(card(ZH_CARD)).elixir
    assert zh.language == "zh" and zh.expertise == ("扮演茶馆掌柜老周",)
    assert zh.identity == "老周是成都一家百年茶馆的掌柜，见多识广，说话带着川味幽默。"


@pytest.mark.parametrize("which", ["v2", "v3"])
def test_cross_spec_export_round_trips_the_elixir(which: str) -> None:
    original = card(FOREIGN[which])
    other = "v2" if _spec(original) == "v3" else "v3"
    imported = elixir_from_card(original).elixir
    crossed = read_card_bytes(export_card_json(imported, other))  # type: ignore[arg-type]
    assert crossed.spec == other
    assert crossed.elixir.content_hash == imported.content_hash
    # Back in the original spec, the card is the original again.
    assert _without_furnace(card_for(crossed.elixir, _spec(original))) == original  # type: ignore[arg-type]


def test_v2_to_v3_keeps_fields_and_adds_group_greetings() -> None:
    data = card_for(elixir_from_card(card(V2_CARD)).elixir, "v3")["data"]
    assert data["group_only_greetings"] == []
    assert data["extensions"]["depth_prompt"]["prompt"] == "{{char}} never admits she is afraid."
    assert data["post_history_instructions"] == V2_CARD["data"]["post_history_instructions"]


def test_editing_an_imported_card_rewrites_only_what_changed() -> None:
    imported = elixir_from_card(card(V3_CARD)).elixir
    changed = edit(imported, identity="A brass owl who guards the Endless Library.", expertise=["Fantasy", "Owls"])
    c = card_for(changed, "v3")
    data = c["data"]
    assert data["description"] == "A brass owl who guards the Endless Library."
    assert data["tags"] == ["Fantasy", "Owls"]
    assert data["character_book"] == V3_CARD["data"]["character_book"]
    assert data["extensions"]["some_tool"] == {"x": 1}
    assert data["mes_example"] == V3_CARD["data"]["mes_example"]
    back = elixir_from_card(c).elixir
    assert back.content_hash == changed.content_hash


def test_nothing_in_extensions_for_native_elixirs_changes_their_hash(native: Elixir) -> None:
    # The kernel's extensions field is omitted when empty, so existing hashes are unchanged.
    assert "extensions" not in native.model_dump(mode="json")
    with_card = elixir_from_card(card(ZH_CARD)).elixir
    assert with_card.extensions["card"]["data"]["name"] == "茶馆掌柜老周"
    assert Elixir.model_validate_json(with_card.model_dump_json()).content_hash == with_card.content_hash


def test_v1_mirrors_follow_edits_and_public_api_is_complete() -> None:
    import furnace.interop as interop

    changed = edit(elixir_from_card(card(V2_CARD)).elixir, identity="A retired airship captain.")
    c = card_for(changed, "v2")
    assert c["description"] == c["data"]["description"] == "A retired airship captain."
    assert c["talkativeness"] == "0.5" and c["personality"] == V2_CARD["personality"]
    assert sorted(interop.__all__) == interop.__all__
    assert all(hasattr(interop, name) for name in interop.__all__)


def test_sample_library_round_trips_in_every_format() -> None:

    from furnace.interop.importers import load_elixir_file
    from furnace.interop.skill import skill_zip_bytes

    library = resources.LIBRARY_DIR
    elixirs = [e for path in sorted(library.glob("*.yaml")) for e in load_elixir_file(path)]
    if not elixirs:
        pytest.skip("sample library not present")
    for elixir in elixirs:
        for raw in (export_card_json(elixir, "v2"), export_card_json(elixir, "v3"), export_card_png(elixir)):
            assert read_card_bytes(raw).elixir.content_hash == elixir.content_hash, elixir.id
        assert skill_zip_bytes(elixir) == skill_zip_bytes(elixir)
