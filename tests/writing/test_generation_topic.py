"""Generated pieces address their topic: a checker over personas × topics (zh and en, questions too).

- the title and the first paragraph name the topic;
- every paragraph carries a topic term (en: a content word of the topic; zh: a
  two-character run of it) — the persona's expertise is applied *to* the topic;
- no sentence repeats another, and no sentence carries the topic twice.
"""

from __future__ import annotations

import random
import re

import pytest

from furnace.domain.text import split_paragraphs
from furnace.llm.offline.writing import generate
from furnace.llm.offline.writing_generate import topic_phrase
from furnace.llm.offline.writing_text import split_sentences
from furnace.llm.seam import LLMRequest, Message, TaskKind

from .conftest import EN_PERSONA, ZH_PERSONA

_EN_STOP = {"how", "to", "what", "which", "why", "the", "a", "an", "in", "of", "for", "and", "do", "i", "is", "start"}


def topic_terms(topic: str, language: str) -> set[str]:
    if language == "zh":
        core = topic_phrase(topic, "zh")
        return {core[i : i + 2] for i in range(len(core) - 1)}
    return {w for w in re.findall(r"[a-z]+", topic.lower()) if w not in _EN_STOP and len(w) > 2}


def check_piece(title: str, body: str, topic: str, language: str) -> None:
    terms = topic_terms(topic, language)
    paragraphs = split_paragraphs(body)
    low = str.lower if language == "en" else str
    assert any(t in low(title) for t in terms), f"title does not name the topic: {title}"
    assert topic.lower() in low(paragraphs[0]) or topic_phrase(topic, language).lower() in low(paragraphs[0])
    for paragraph in paragraphs:
        assert any(t in low(paragraph) for t in terms), f"off topic: {paragraph}"
    sentences = [s.strip() for p in paragraphs for s in split_sentences(p, language)]
    assert len(sentences) == len(set(sentences)), "a sentence is repeated"
    phrase = topic_phrase(topic, language).lower()
    for sentence in sentences:
        assert low(sentence).count(phrase) <= 1 and low(sentence).count(topic.lower()) <= 1, sentence


def gen(persona: dict, topic: str) -> dict:
    request = LLMRequest(
        task=TaskKind.GENERATE,
        messages=(Message(role="user", content="-"),),
        inputs={"persona": persona, "topic": topic},
    )
    return generate(request, random.Random(0))[1]


LIVELY = {"tone": {"formality": 0.1}}
CASES = [
    (ZH_PERSONA, "秋天喝什么茶", "zh"),
    (ZH_PERSONA, "夏季防晒推荐", "zh"),
    ({**ZH_PERSONA, **LIVELY}, "怎么挑选防晒霜", "zh"),
    ({**ZH_PERSONA, "expertise": ["茶艺"]}, "秋天喝什么茶", "zh"),
    (EN_PERSONA, "winter birdwatching", "en"),
    (EN_PERSONA, "how to start birdwatching in winter", "en"),
    ({**EN_PERSONA, **LIVELY}, "what tea to drink in autumn", "en"),
    ({**EN_PERSONA, "expertise": [], "principles": []}, "summer sunscreen", "en"),
    ({**EN_PERSONA, "constraints": {"must_use_markdown": True}}, "sunscreen for kids", "en"),
]


@pytest.mark.parametrize("persona,topic,language", CASES, ids=[c[1] for c in CASES])
def test_generated_pieces_address_their_topic(persona, topic, language):
    piece = gen(persona, topic)
    check_piece(piece["title"], piece["body"], topic, language)


def test_the_checker_catches_an_off_topic_piece():
    piece = gen(EN_PERSONA, "winter birdwatching")
    off = piece["body"].replace("winter birdwatching", "the weather")
    with pytest.raises(AssertionError):
        check_piece(piece["title"], off, "winter birdwatching", "en")
    twice = piece["body"].replace("It is hoped", "Winter birdwatching and winter birdwatching: it is hoped")
    with pytest.raises(AssertionError):
        check_piece(piece["title"], twice, "winter birdwatching", "en")


@pytest.mark.parametrize(
    "topic,language,phrase",
    [
        ("秋天喝什么茶", "zh", "秋天喝茶"),
        ("怎么挑选防晒霜", "zh", "挑选防晒霜"),
        ("how to start birdwatching in winter", "en", "starting birdwatching in winter"),
        ("How do I choose a sunscreen?", "en", "choosing a sunscreen"),
        ("what tea to drink in autumn", "en", 'the question "what tea to drink in autumn"'),
        ("summer sunscreen", "en", "summer sunscreen"),
    ],
)
def test_topic_phrase_reads_inside_a_sentence(topic, language, phrase):
    assert topic_phrase(topic, language) == phrase
