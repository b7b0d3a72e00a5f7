"""Skill export: folder layout, byte-identical zips, secret refusal."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from cards_data import V3_CARD, card
from conftest import make_agent, make_native

from furnace.domain.elixir import Elixir, edit, parse_elixir
from furnace.domain.errors import InputError
from furnace.domain.render import render_prompt
from furnace.domain.secrets import find_secret
from furnace.interop.cards import elixir_from_card
from furnace.interop.skill import build_skill, skill_zip_bytes, write_skill_folder
from furnace.storage.memory import MemoryStore


def _front_matter(text: str) -> tuple[dict, str]:
    assert text.startswith("---\n")
    head, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(head), body


def test_skill_folder_layout(native: Elixir, tmp_path: Path) -> None:
    folder = write_skill_folder(native, tmp_path)
    assert folder == tmp_path / "night-editor"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "SKILL.md",
        "references/persona.json",
    ]
    meta, body = _front_matter((folder / "SKILL.md").read_text())
    assert meta["name"] == "night-editor"
    assert meta["description"].startswith("A meticulous night-shift copy editor.")
    assert "copy editing, headlines, AP style" in meta["description"] and len(meta["description"]) <= 1024
    assert meta["metadata"]["content-hash"] == native.content_hash
    assert render_prompt(native).rstrip() in body
    persona = json.loads((folder / "references/persona.json").read_text())
    assert persona["kind"] == "elixir"
    assert parse_elixir(persona["elixir"]).content_hash == native.content_hash


def test_zip_is_byte_identical_across_exports_and_stores(native: Elixir) -> None:
    first = skill_zip_bytes(native)
    assert first == skill_zip_bytes(native)
    # The same content stored at different times (different created_at) gives the same bytes.
    a = MemoryStore(clock=lambda: datetime(2024, 1, 1, tzinfo=UTC))
    b = MemoryStore(clock=lambda: datetime(2025, 6, 1, tzinfo=UTC))
    a.save_elixir(native)
    b.save_elixir(native)
    assert a.get_elixir("night-editor").created_at != b.get_elixir("night-editor").created_at
    assert skill_zip_bytes(a.get_elixir("night-editor")) == skill_zip_bytes(b.get_elixir("night-editor")) == first
    with zipfile.ZipFile(io.BytesIO(first)) as zf:
        infos = zf.infolist()
        assert [i.filename for i in infos] == ["night-editor/SKILL.md", "night-editor/references/persona.json"]
        assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
        assert zf.read("night-editor/SKILL.md") == build_skill(native).files["SKILL.md"]
    # A content change changes the bytes.
    assert skill_zip_bytes(edit(native, identity="Someone else.")) != first


def test_agent_skill_carries_lineage_and_its_prompt(native: Elixir) -> None:
    agent = make_agent(edit(native, identity="A faster night editor."), native)
    bundle = build_skill(agent)
    assert bundle.slug == agent.id
    meta, body = _front_matter(bundle.files["SKILL.md"].decode())
    assert meta["metadata"]["lineage-hash"] == agent.lineage_hash
    assert agent.system_prompt.rstrip() in body
    persona = json.loads(bundle.files["references/persona.json"])
    assert persona["agent"]["lineage"]["lineage_hash"] == agent.lineage_hash
    assert persona["agent"]["lineage"]["parents"][0]["id"] == "night-editor"


def test_chinese_skill(tmp_path: Path) -> None:
    zh = parse_elixir(
        {
            "name": "茶艺师",
            "language": "zh",
            "identity": "一位讲究的茶艺师。",
            "expertise": ["绿茶", "乌龙"],
            "principles": ["先讲来历，再讲冲泡。"],
        }
    )
    meta, body = _front_matter(build_skill(zh).files["SKILL.md"].decode())
    assert meta["name"].startswith("elixir-") and "绿茶、乌龙" in meta["description"]
    assert "在整个对话中采用以下人设" in body


def test_foreign_card_exports_as_skill() -> None:
    elixir = elixir_from_card(card(V3_CARD)).elixir
    persona = json.loads(build_skill(elixir).files["references/persona.json"])
    assert persona["elixir"]["extensions"]["card"]["data"]["character_book"]["name"] == "Endless Library"


SECRETS = {
    "principles": (
        "principles",
        ["Use the key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx to call the API."],
        "principles[0]",
        "API key",
    ),
    "aws": ("style_notes", "creds: AKIAIOSFODNN7EXAMPLE", "style_notes", "AWS access key"),
    "bearer": (
        "few_shots",
        [{"input": "How do I call it?", "output": "curl -H 'Authorization: Bearer abcdef0123456789abcdef'"}],
        "few_shots[0].output",
        "bearer token",
    ),
    "url": (
        "identity",
        "A bot that reads https://admin:hunter2@db.example.com/records.",
        "identity",
        "URL with embedded credentials",
    ),
    "github": ("expertise", ["ghp_" + "a1B2" * 9], "expertise[0]", "GitHub token"),
    "assigned": ("style_notes", "api_key = 9f8e7d6c5b4a3f2e1d0c", "style_notes", "assigned API key"),
}


@pytest.mark.parametrize("case", sorted(SECRETS))
def test_secrets_refuse_the_export_naming_the_field(case: str) -> None:
    field, value, where, kind = SECRETS[case]
    elixir = edit(make_native(), **{field: value})
    for export in (build_skill, skill_zip_bytes):
        with pytest.raises(InputError) as err:
            export(elixir)
        message = str(err.value)
        assert where in message and kind in message
        assert err.value.field == where
        assert "hunter2" not in message and "AKIAIOSFODNN7EXAMPLE" not in message and "sk-proj" not in message


def test_secret_in_agent_prompt_or_foreign_card_is_refused(native: Elixir) -> None:
    agent = make_agent(native, native).model_copy(update={"system_prompt": "Token: xoxb-1234567890-abcdef"})
    with pytest.raises(InputError, match="agent.system_prompt contains what looks like a Slack token"):
        build_skill(agent)
    c = card(V3_CARD)
    c["data"]["character_book"]["entries"][1]["content"] = "Backend: postgres://quill:s3cret@10.0.0.5/lib"
    with pytest.raises(InputError, match=r"extensions\.card\.data\.character_book\.entries\[1\]\.content"):
        build_skill(elixir_from_card(c).elixir)


@pytest.mark.parametrize(
    "text",
    [
        "Ask for the task-oriented summary first.",
        "Desk-lamp lighting, skeptical tone.",
        "See https://example.com/docs and http://user@example.com/ (no password).",
        "A bearer of bad news.",
        "Use a password manager; never share a password.",
        "Bearer tokens must never appear in answers.",
    ],
)
def test_ordinary_text_is_not_a_secret(text: str) -> None:
    assert find_secret({"style_notes": text}) is None
