"""The prompts are the product: snapshots of our part of the generate / revise / extract prompts.

(The persona's rendered prompt is the library's and has its own snapshots; ours
is what follows it.) Snapshots live in ``snapshots/*.txt``; rewrite them with
``UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest

from furnace.domain.elixir import parse_elixir
from furnace.domain.render import render_prompt
from furnace.writing.content import ContentVersion, RevisionRecord, build_generate_request
from furnace.writing.preferences import build_extract_request
from furnace.writing.revision import build_revise_request

from .conftest import EN_PERSONA, ZH_PERSONA

SNAPSHOTS = Path(__file__).parent / "snapshots"
T0 = datetime(2026, 1, 1)
TEXT = {
    "zh": ("防晒指南", "第一段。\n\n第二段。\n\n第三段很长。还有一句。"),
    "en": ("Sunscreen Guide", "First paragraph.\n\nSecond paragraph.\n\nThird one is long. Another sentence."),
}
ASK = {"zh": ["太正式了，活泼点", "加一个 emoji"], "en": ["too formal, make it livelier", "add an emoji"]}


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing snapshot {path.name}; run with UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("lang,data", [("zh", ZH_PERSONA), ("en", EN_PERSONA)])
def test_prompt_snapshots(lang, data):
    persona = parse_elixir(data)
    rendered = render_prompt(persona)
    gen = build_generate_request(persona, "夏季防晒推荐" if lang == "zh" else "summer sunscreen")
    assert gen.messages[0].content == rendered
    title, body = TEXT[lang]
    current = ContentVersion(content_id="c", version=2, title=title, body=body, word_count=1, created_at=T0)
    rev = build_revise_request(persona, current, ASK[lang])
    assert rev.messages[0].content.startswith(rendered)
    record = RevisionRecord(
        id="rev-c-v3",
        content_id="c",
        session_id="s",
        persona_id=persona.id,
        persona_version=1,
        suggestions=tuple(ASK[lang]),
        from_version=2,
        to_version=3,
        original_title=title,
        original_body=body,
        revised_title=title,
        revised_body=body + " ☀️",
        created_at=T0,
    )
    ext = build_extract_request(record, language=lang)
    parts = [
        "## generate: user",
        gen.messages[1].content,
        "## revise: system (after the persona's prompt)",
        rev.messages[0].content[len(rendered) :].strip(),
        "## revise: user",
        rev.messages[1].content,
        "## extract: system",
        ext.messages[0].content,
        "## extract: user",
        ext.messages[1].content,
    ]
    assert_snapshot(f"prompts_{lang}", "\n".join(parts) + "\n")


def test_the_revise_prompt_names_the_scope_when_every_suggestion_has_one():
    zh, en = parse_elixir(ZH_PERSONA), parse_elixir(EN_PERSONA)
    current = ContentVersion(
        content_id="cnt-x",
        version=1,
        title="T",
        body="a\n\nb",
        word_count=2,
        source="generate",
        created_at=datetime(2026, 1, 1),
    )
    scoped = build_revise_request(en, current, ["the intro is too long", 'change the title to "X"'])
    assert scoped.messages[1].content.endswith(
        "Change only paragraph 1, the title; everything else must stay exactly as it is."
    )
    assert "只修改：最后一段；" in build_revise_request(zh, current, ["结尾太长了"]).messages[1].content
    whole = build_revise_request(en, current, ["the intro is too long", "make it more formal"]).messages[1].content
    assert "Change only" not in whole
