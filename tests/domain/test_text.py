"""The one text module: language, terms, paragraphs and the preference vocabulary."""

from __future__ import annotations

import random

import pytest

from furnace.domain.text import (
    CONCISE,
    DETAILED,
    EMOJI,
    FEWER,
    FORMAL,
    FORMAT,
    LENGTH,
    LIVELY,
    MORE,
    TONE,
    cjk_bigrams,
    detect_language,
    has_cjk,
    preference,
    read_preference,
    split_paragraphs,
    terms,
)
from furnace.llm.offline.judge import judge
from furnace.llm.offline.reply import voice_of
from furnace.llm.offline.writing_generate import generate, register_of
from furnace.llm.seam import LLMRequest, Message, TaskKind


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("请你扮演一位翻译。只回答译文。", "zh"),
        ("I want you to act as a translator.", "en"),
        ("", "en"),
        ("把这段 Python 代码 review 一下", "zh"),  # English product words in a Chinese sentence
        ("Our guide 老周 knows every tea house in Chengdu and tells their stories well.", "en"),  # one name
        ("繁體中文也算", "zh"),
        ("㐀㐁 rare extension-A characters", "zh"),
    ],
)
def test_detect_language(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_has_cjk() -> None:
    assert has_cjk("a 字 b") and not has_cjk("plain ascii, café")


def test_terms_words_and_bigrams() -> None:
    assert terms("Python data-analysis with C++ and Go", min_len=2) == {
        "python",
        "data-analysis",
        "with",
        "c++",
        "and",
        "go",
    }
    assert terms("Don't panic", min_len=3) == {"don't", "panic"}
    assert terms("the data and the model", stop={"the", "and"}) == {"data", "model"}
    assert terms("a b", min_len=2) == set()
    assert cjk_bigrams("防晒指南") == {"防晒", "晒指", "指南"}
    assert cjk_bigrams("A 茶 B") == {"茶"}  # a one-character run counts as itself
    assert terms("夏日防晒 tips") == {"夏日", "日防", "防晒", "tips"}


def test_split_paragraphs() -> None:
    assert split_paragraphs("  one\n\n two \r\n\r\nthree\n  \n") == ["one", "two", "three"]
    assert split_paragraphs("single line\nstill one") == ["single line\nstill one"]
    assert split_paragraphs("   ") == []


@pytest.mark.parametrize(
    ("dimension", "value", "expected"),
    [
        ("tone", "playful", (TONE, LIVELY)),
        ("Tone", "lively", (TONE, LIVELY)),
        ("语气", "活泼", (TONE, LIVELY)),
        ("register", "less formal", (TONE, LIVELY)),  # the longest phrasing wins over "formal"
        ("风格", "严谨", (TONE, FORMAL)),
        ("tone", "professional", (TONE, FORMAL)),
        ("emoji", "more", (EMOJI, MORE)),
        ("表情", "多一点", (EMOJI, MORE)),
        ("emoji", "no more", (EMOJI, FEWER)),
        ("emoji", "不要", (EMOJI, FEWER)),
        ("length", "short", (LENGTH, CONCISE)),
        ("篇幅", "详细", (LENGTH, DETAILED)),
        ("markdown", "plain text", (FORMAT, "plain")),
        ("tone", "mysterious", (TONE, None)),
        ("title", "questions", (None, None)),
    ],
)
def test_read_preference(dimension: str, value: str, expected: tuple[str | None, str | None]) -> None:
    assert read_preference({"dimension": dimension, "value": value}) == expected


def test_preference_reads_the_first_on_a_dimension() -> None:
    persona = {"style_preferences": [{"dimension": "title", "value": "x"}, {"dimension": "语气", "value": "轻松"}]}
    assert preference(persona, TONE) == LIVELY and preference(persona, EMOJI) is None
    assert preference({}, TONE) is None


PERSONA = {
    "id": "blogger",
    "name": "Blogger",
    "language": "en",
    "identity": "A lifestyle blogger.",
    "expertise": ["skin care", "summer travel"],
    "principles": ["Explain why, not just what.", "Keep advice practical."],
    "tone": {"formality": 0.8, "conciseness": 0.5, "humor": 0.5, "empathy": 0.5},
    "constraints": {},
}


def _request(task: TaskKind, **inputs: object) -> LLMRequest:
    return LLMRequest(task=task, messages=(Message(role="user", content="x"),), inputs=inputs)


@pytest.mark.parametrize(("value", "register"), [("playful", "lively"), ("casual", "lively"), ("serious", "formal")])
def test_writer_and_judge_agree_on_a_tone_preference(value: str, register: str) -> None:
    """A formal persona taught ``tone=<value>``: the generator writes that register and the judge
    scores the piece as following the preference (``playful`` used to be written lively and scored 0)."""
    persona = {**PERSONA, "style_preferences": [{"dimension": "tone", "value": value, "weight": 0.6}]}
    assert register_of(persona) == register
    assert voice_of(persona).register == ("casual" if register == "lively" else "formal")
    _, piece = generate(_request(TaskKind.GENERATE, persona=persona, topic="sunscreen"), random.Random(0))
    answer = piece["title"] + "\n\n" + piece["body"]
    _, verdict = judge(
        _request(TaskKind.JUDGE, reference=persona, answer=answer, rubric="preference"), random.Random(0)
    )
    assert verdict["score"] == 1.0, verdict


def test_writer_and_judge_agree_on_emoji() -> None:
    persona = {**PERSONA, "style_preferences": [{"dimension": "表情", "value": "多一点"}]}
    _, piece = generate(_request(TaskKind.GENERATE, persona=persona, topic="sunscreen"), random.Random(0))
    _, plain = generate(_request(TaskKind.GENERATE, persona=PERSONA, topic="sunscreen"), random.Random(0))
    assert piece["body"] != plain["body"]
    _, verdict = judge(
        _request(TaskKind.JUDGE, reference=persona, answer=piece["body"], rubric="preference"), random.Random(0)
    )
    assert verdict["score"] == 1.0, verdict
    _, verdict = judge(
        _request(TaskKind.JUDGE, reference=persona, answer=plain["body"], rubric="preference"), random.Random(0)
    )
    assert verdict["score"] == 0.0, verdict


def test_a_concise_preference_shortens_the_piece() -> None:
    persona = {**PERSONA, "style_preferences": [{"dimension": "篇幅", "value": "简短"}]}
    _, piece = generate(_request(TaskKind.GENERATE, persona=persona, topic="sunscreen"), random.Random(0))
    _, plain = generate(_request(TaskKind.GENERATE, persona=PERSONA, topic="sunscreen"), random.Random(0))
    assert len(piece["body"]) < len(plain["body"])
