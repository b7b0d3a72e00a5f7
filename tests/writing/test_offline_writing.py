"""The offline writing handlers: deterministic, zh and en, edits that really happen."""

from __future__ import annotations

import random

import pytest

from furnace.domain.text import split_paragraphs
from furnace.llm.offline import OfflineEngine
from furnace.llm.offline.engine import estimate_tokens
from furnace.llm.offline.writing import compress, extract_preferences, generate, revise
from furnace.llm.offline.writing_text import count_emoji
from furnace.llm.seam import LLMRequest, Message, TaskKind

from .conftest import EN_PERSONA, ZH_PERSONA


def req(task: TaskKind, **inputs) -> LLMRequest:
    return LLMRequest(task=task, messages=(Message(role="user", content="-"),), inputs=inputs)


def gen(persona: dict, topic: str) -> dict:
    return generate(req(TaskKind.GENERATE, persona=persona, topic=topic), random.Random(0))[1]


def rev(piece: dict, *suggestions: str) -> dict:
    return revise(
        req(TaskKind.REVISE, title=piece["title"], body=piece["body"], suggestions=list(suggestions)), random.Random(0)
    )[1]


@pytest.mark.parametrize("persona,topic", [(ZH_PERSONA, "夏季防晒推荐"), (EN_PERSONA, "summer sunscreen")])
def test_generate_is_deterministic_titled_and_in_register(persona, topic):
    a, b = gen(persona, topic), gen(persona, topic)
    assert a == b and a["title"] and len(split_paragraphs(a["body"])) == 4
    assert topic in a["body"] or topic.capitalize() in a["body"]
    assert persona["expertise"][0] in a["body"] and persona["principles"][0] in a["body"]
    assert count_emoji(a["body"]) == 0 and "**" not in a["body"] and "- " not in a["body"]
    lively = gen({**persona, "tone": {"formality": 0.1}}, topic)
    assert lively["body"] != a["body"] and lively["title"] != a["title"]


def test_learned_preferences_shape_the_generated_piece():
    plain = gen(ZH_PERSONA, "夏季防晒推荐")
    prefs = [
        {"dimension": "tone", "value": "lively"},
        {"dimension": "emoji", "value": "more"},
        {"dimension": "length", "value": "concise"},
    ]
    learned = gen({**ZH_PERSONA, "style_preferences": prefs}, "夏季防晒推荐")
    assert count_emoji(learned["body"]) == 2 and "☀️" in learned["body"]
    assert "！" in learned["body"] and len(learned["body"]) < len(plain["body"])


def test_constraints_markdown_and_max_length():
    md = gen({**EN_PERSONA, "constraints": {"must_use_markdown": True}}, "sunscreen")
    assert "**skin care**" in md["body"] and "\n- State the skin type before recommending" in md["body"]
    short = gen({**EN_PERSONA, "constraints": {"max_length": 400}}, "sunscreen")
    assert len(short["body"]) <= 400 and short["body"]


@pytest.mark.parametrize(
    "persona,topic,lively,formal",
    [
        (ZH_PERSONA, "夏季防晒推荐", "太正式了，活泼点", "正式一点"),
        (EN_PERSONA, "summer sunscreen", "too formal, make it livelier", "more formal please"),
    ],
)
def test_register_change_both_ways_keeps_the_structure(persona, topic, lively, formal):
    piece = gen(persona, topic)
    up = rev(piece, lively)
    assert up["applied"] == ["lively"] and up["body"] != piece["body"]
    assert len(split_paragraphs(up["body"])) == len(split_paragraphs(piece["body"]))
    down = rev(up, formal)
    assert down["applied"] == ["formal"] and down["body"] != up["body"]
    assert "!" not in down["body"] and "！" not in down["body"]


def test_length_emoji_and_title_edits():
    piece = gen(EN_PERSONA, "summer sunscreen")
    paras = split_paragraphs(piece["body"])
    longer = rev(piece, "expand the second paragraph")
    lp = split_paragraphs(longer["body"])
    assert len(lp[1]) > len(paras[1]) and lp[0] == paras[0] and lp[2:] == paras[2:]
    whole = rev(piece, "make it shorter")
    assert all(len(a) <= len(b) for a, b in zip(split_paragraphs(whole["body"]), paras, strict=False))
    assert len(whole["body"]) < len(piece["body"])
    with_emoji = rev(piece, "add an emoji to the last paragraph")
    assert split_paragraphs(with_emoji["body"])[-1].endswith("☀️")
    without = rev(with_emoji, "remove the emoji")
    assert without["body"] == piece["body"]
    titled = rev(piece, 'change the title to "Sun Smart"')
    assert titled["title"] == "Sun Smart" and titled["body"] == piece["body"]
    assert rev(piece, "give it a new title")["title"] != piece["title"]


def test_unrecognised_or_impossible_edits_leave_the_text_and_say_so():
    piece = gen(ZH_PERSONA, "夏季防晒推荐")
    out = rev(piece, "随便改改")
    assert (out["title"], out["body"], out["applied"]) == (piece["title"], piece["body"], [])
    assert "原文保持不变" in out["note"] and "随便改改" in out["note"]
    missing = rev(piece, "第九段太长")
    assert missing["body"] == piece["body"] and "没有第 9 段" in missing["note"]
    assert "没有可去掉的 emoji" in rev(piece, "去掉 emoji")["note"]
    en = rev(gen(EN_PERSONA, "sunscreen"), "the ninth paragraph is too long")
    assert en["note"] == "Text left unchanged: paragraph 9 does not exist (the text has 4)."


def test_several_suggestions_apply_in_order():
    piece = gen(ZH_PERSONA, "夏季防晒推荐")
    out = rev(piece, "太正式了，活泼点", "第三段太长，缩短一点", "加一个 emoji")
    assert out["applied"] == ["lively", "shorten@3", "emoji_add"]
    assert split_paragraphs(out["body"])[2] != split_paragraphs(piece["body"])[2]
    assert count_emoji(out["body"]) == 1


def test_extract_preferences_maps_suggestions_checked_against_the_change():
    piece = gen(ZH_PERSONA, "夏季防晒推荐")
    after = rev(piece, "加一个 emoji", "第三段太长，缩短一点")
    _, parsed = extract_preferences(
        req(
            TaskKind.EXTRACT_PREFERENCES,
            suggestions=["加一个 emoji", "第三段太长，缩短一点"],
            before=piece,
            after=after,
        ),
        random.Random(0),
    )
    got = {p["dimension"]: (p["value"], p["weight"]) for p in parsed["preferences"]}
    assert got == {"emoji": ("more", 0.6), "length": ("concise", 0.6)}
    assert "emoji 0→1" in next(p["evidence"] for p in parsed["preferences"] if p["dimension"] == "emoji")
    # asked for but not applied: nothing is learned
    _, weak = extract_preferences(
        req(TaskKind.EXTRACT_PREFERENCES, suggestions=["add an emoji"], before=piece, after=piece), random.Random(0)
    )
    assert weak == {"preferences": []}
    _, none = extract_preferences(
        req(TaskKind.EXTRACT_PREFERENCES, suggestions=["change the title"], before=piece, after=piece), random.Random(0)
    )
    assert none == {"preferences": []}


def test_compress_is_extractive_and_within_target():
    turns = [
        {"role": "user", "content": "First point here. Details follow at length."},
        {"role": "assistant", "content": "我明白了。这里还有更多的细节。"},
    ]
    text, _ = compress(req(TaskKind.COMPRESS, turns=turns, target_tokens=200), random.Random(0))
    assert text == "user: First point here.\nassistant: 我明白了。"
    short, _ = compress(req(TaskKind.COMPRESS, turns=turns * 20, target_tokens=15), random.Random(0))
    assert estimate_tokens(short) <= 15 and short.endswith("我明白了。")


def test_engine_dispatches_every_writing_task():
    engine = OfflineEngine()
    done = engine.complete(req(TaskKind.GENERATE, persona=EN_PERSONA, topic="sunscreen"))
    assert done.parsed["title"] and done.text.startswith("{")


def test_markdown_lists_keep_their_lines_when_resized():
    md = gen({**EN_PERSONA, "constraints": {"must_use_markdown": True}}, "sunscreen")
    third = split_paragraphs(md["body"])[2]
    shorter = split_paragraphs(rev(md, "the third paragraph is too long")["body"])[2]
    assert len(shorter) < len(third) and shorter.split("\n")[0] == third.split("\n")[0]
    assert all(line in third.split("\n") for line in shorter.split("\n"))
