"""The offline REPLY handler: voice, language, register, constraints, instruction."""

from __future__ import annotations

import random
import re

import pytest
import yaml

from furnace import resources
from furnace.domain.elixir import Elixir
from furnace.llm.offline import OfflineEngine
from furnace.llm.offline.reply import compose, mentions, voice_of
from furnace.llm.seam import TaskKind, system_user

LIBRARY = resources.LIBRARY_DIR
MARKDOWN = re.compile(r"(^\s{0,3}#{1,6}\s)|(^\s*[-*+]\s)|(^\s*\d+\.\s)|(\*\*[^*]+\*\*)", re.M)
CJK = re.compile(r"[\u4e00-\u9fff]")


def persona(**changes) -> dict:
    base = {
        "name": "Ada",
        "language": "en",
        "identity": "A careful test engineer.",
        "expertise": ["software testing", "continuous integration", "team coaching"],
        "principles": ["Name the smallest next step.", "Prefer **fast** feedback.", "Never discuss politics."],
        "tone": {"formality": 0.5, "conciseness": 0.5, "humor": 0.3, "empathy": 0.3},
        "constraints": {
            "max_length": None,
            "forbidden_topics": ["politics", "stock picks"],
            "must_use_markdown": False,
        },
    }
    for key, value in changes.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and key in base else value
    return Elixir.model_validate(base).model_dump(mode="json")


def zh_persona(**changes) -> dict:
    changes["constraints"] = {"forbidden_topics": ["政治"], **changes.get("constraints", {})}
    return persona(
        name="老王",
        language="zh",
        **{
            "expertise": ["川菜", "家常菜", "食品安全"],
            "principles": ["用料写清楚克数。", "按下锅顺序分步骤写。"],
            **changes,
        },
    )


def say(p: dict, message: str, instruction: str | None = None, seed: int = 0) -> str:
    return compose(p, message, instruction, random.Random(seed))


def test_answers_from_expertise_and_principles():
    text = say(persona(), "How do I speed up our continuous integration builds?")
    assert "continuous integration" in text  # the most related expertise leads
    assert "smallest next step" in text and "name the smallest next step" not in text.casefold()  # in its own words
    assert "politics" not in text.casefold()  # a principle naming a forbidden topic is not expressed
    assert not MARKDOWN.search(text) and "**" not in text  # markdown stripped from persona text


def test_register_follows_formality_en():
    formal = say(persona(tone={"formality": 0.9}), "How should I test a parser?")
    casual = say(persona(tone={"formality": 0.1}), "How should I test a parser?")
    assert "!" not in formal and re.search(r"\b(regarding|recommend|ensure|consider)\b", formal, re.I)
    assert casual.count("!") >= 2 and "regarding" not in casual.casefold()


def test_zh_persona_answers_in_chinese_with_register():
    formal = say(zh_persona(tone={"formality": 0.9}), "How do I cook mapo tofu?")
    casual = say(zh_persona(tone={"formality": 0.1}), "麻婆豆腐怎么做？")
    assert len(CJK.findall(formal)) > 20 and "您" in formal
    assert "您" not in casual and re.search("[吧呀啦！]", casual)
    assert "川菜" in casual and "克数" in casual and "用料写清楚克数" not in casual  # the engine's own words


@pytest.mark.parametrize("make", [persona, zh_persona])
@pytest.mark.parametrize("limit", [8, 25, 60, 120, 250, 600])
def test_max_length_is_characters_in_both_languages(make, limit):
    p = make(constraints={"max_length": limit}, tone={"conciseness": 0.1, "humor": 0.9, "empathy": 0.9})
    text = say(p, "How do I make the weekly plan work for a family of four people?")
    assert 0 < len(text) <= limit


def test_generous_limit_keeps_the_whole_answer():
    p = persona(constraints={"max_length": 5000})
    assert say(p, "How to test?") == say(persona(), "How to test?")


def test_markdown_only_when_required():
    message = "How should I review a test plan?"
    plain = say(persona(), message)
    marked = say(persona(constraints={"must_use_markdown": True}), message)
    assert not MARKDOWN.search(plain)
    assert MARKDOWN.search(marked) and marked.startswith("**") and "\n- " in marked
    zh_marked = say(zh_persona(constraints={"must_use_markdown": True}), "怎么做饭？")
    assert MARKDOWN.search(zh_marked)


@pytest.mark.parametrize(
    "message", ["What do you think about politics?", "Any POLITICS news?", "Give me your stock pick for today"]
)
def test_forbidden_topic_is_declined_without_naming_it(message):
    text = say(persona(tone={"formality": 0.9}), message)
    assert "sorry" in text.casefold()
    assert not any(mentions(text, t) for t in ("politics", "stock picks"))
    assert "software testing" in text  # offers its own expertise instead


def test_forbidden_topic_zh():
    text = say(zh_persona(), "你怎么看政治？")
    assert "政治" not in text and ("抱歉" in text or "不聊" in text)


def test_mentions_matching():
    assert mentions("Tell me about stock picks", "stock picks")
    assert mentions("any stock pick?", "stock picks")
    assert not mentions("restart the art gallery", "artistry")
    assert not mentions("I like stocks", "stock picks")


@pytest.mark.parametrize(
    ("make", "instruction"),
    [
        (persona, "Roll call: you are number 3 of 5. Answer with your number 3 in one short line."),
        (zh_persona, "报数：你是第2号（共3人）。只报出你的数字2，一句话；人设只能影响语气，不能改变数字。"),
    ],
)
def test_roll_call_instruction_is_fulfilled_first(make, instruction):
    number = "3" if "number 3" in instruction else "2"
    for p in (make(), make(constraints={"must_use_markdown": True}), make(tone={"formality": 0.95})):
        text = say(p, "@all sound off! 全体都有！报数！", instruction)
        assert text.startswith(number)
        assert re.findall(r"\d+", text) == [number]  # no other number sneaks in
        assert "\n" not in text and len(text) < 60


def test_instruction_steers_lead_and_length():
    message = "How do we get better at releases?"
    led = say(persona(), message, "Answer from your expertise in team coaching; be brief and concrete.")
    assert "team coaching" in led
    assert len(led) < len(say(persona(), message))


def test_few_shot_input_is_answered_with_its_output():
    p = persona(few_shots=[{"input": "What is a flaky test?", "output": "A test that fails without a code change."}])
    assert "A test that fails without a code change." in say(p, "what is a flaky test")


def test_emoji_preference_and_empty_message():
    p = persona(style_preferences=[{"dimension": "emoji", "value": "more"}])
    assert re.search("[\U0001f300-\U0001faff]", say(p, "Hi there"))
    assert "software testing" in say(persona(), "")


def test_voice_of_reads_tone_and_preferences():
    v = voice_of(persona(tone={"formality": 0.9, "conciseness": 0.8}))
    assert (v.language, v.register, v.length) == ("en", "formal", "short")
    lively = voice_of(persona(tone={"formality": 0.9}, style_preferences=[{"dimension": "tone", "value": "lively"}]))
    assert lively.register == "casual"


def library() -> list[dict]:
    found = []
    for path in sorted(LIBRARY.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for item in data if isinstance(data, list) else [data]:
            found.append(Elixir.model_validate(item).model_dump(mode="json"))
    return found


@pytest.mark.skipif(not LIBRARY.exists(), reason="sample library not present")
def test_every_library_persona_answers_within_its_constraints():
    engine = OfflineEngine()
    for p in library():
        message = "你会先做什么？" if p["language"] == "zh" else "What would you do first here?"
        for instruction in (None, "Add one different angle in a sentence or two."):
            inputs = {"persona": p, "message": message, "instruction": instruction}
            request = system_user(TaskKind.REPLY, "sys", message, inputs=inputs)
            text = engine.complete(request).text
            c = p["constraints"]
            assert text.strip(), p["id"]
            assert c["max_length"] is None or len(text) <= c["max_length"], p["id"]
            assert bool(MARKDOWN.search(text)) == c["must_use_markdown"], p["id"]
            assert not any(t.casefold() in text.casefold() for t in c["forbidden_topics"]), p["id"]
            assert (len(CJK.findall(text)) > 5) == (p["language"] == "zh"), p["id"]


def test_roll_call_prefers_the_explicit_ordinal():
    assert say(zh_persona(), "报数", "报数（共3人）：你是第2号。").startswith("2")
    assert say(persona(), "sound off", "Sound off (5 members): you are number 4.").startswith("4")


def test_few_shot_touching_a_forbidden_topic_is_not_repeated():
    p = persona(few_shots=[{"input": "Any news?", "output": "Only politics today."}])
    text = say(p, "Any news?")
    assert "politics" not in text.casefold() and "software testing" in text


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(" .。;；!！")


@pytest.mark.parametrize("path", sorted(LIBRARY.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_principle_is_expressed_never_quoted(path):
    """Every library persona, one principle at a time: the answer expresses it, never verbatim."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    p = Elixir.model_validate(data).model_dump(mode="json")
    for principle in p["principles"]:
        text = _plain(say({**p, "principles": [principle]}, "Could you help me with this?"))
        assert len(text) > 40
        assert _plain(principle) not in text, principle


def test_a_principle_on_one_topic_is_used_only_for_that_topic():
    p = persona(principles=["When asked about parsers, fuzz the grammar with random inputs.", "Prefer fast feedback."])
    assert "fuzz" in say(p, "How should I test my parser?")
    assert "fuzz" not in say(p, "How do I speed up our builds?")
    zh = zh_persona(principles=["谈到豆腐时，一定要先焯水。", "用料写清楚克数。"])
    assert "焯水" in say(zh, "麻婆豆腐怎么做？") and "焯水" not in say(zh, "回锅肉怎么做？")


@pytest.mark.parametrize(
    ("verb", "spelled"),
    [
        ("open", "opening"),  # stressed on its first syllable: no doubling ("openning" was printed)
        ("begin", "beginning"),  # stressed on its last: doubled ("begining" was printed)
        ("cut", "cutting"),
        ("split", "splitting"),
        ("omit", "omitting"),
        ("edit", "editing"),
        ("visit", "visiting"),
        ("read", "reading"),
        ("fix", "fixing"),
        ("use", "using"),
        ("lie", "lying"),
        ("agree", "agreeing"),
    ],
)
def test_the_engines_gerunds_are_spelled_as_english_spells_them(verb, spelled):
    from furnace.llm.offline.paraphrase import gerund

    assert gerund(verb) == spelled
    assert gerund(verb.capitalize()) == spelled.capitalize()


def test_no_reply_of_the_sample_library_misspells_a_gerund():
    from furnace.interop.importers import load_elixir_file

    library = [e for p in sorted(LIBRARY.glob("*.yaml")) for e in load_elixir_file(p)]
    for elixir in library:
        for message in ("@all hi", "hello", "How should I start?"):
            text = say(elixir.model_dump(mode="json"), message)
            assert not re.search(r"\b(openning|begining)\b", text), (elixir.id, text)
