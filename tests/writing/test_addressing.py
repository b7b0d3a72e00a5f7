"""Addressing: instructions as users write them → target and operations (zh and en).

The same table is printed in docs/revision.md. Each row: the phrasing, the
expected target (kind, paragraph index or quoted text) and the expected
operations (kind, plus the ratio or sentence count when one is said).
"""

from __future__ import annotations

import pytest

from furnace.writing.addressing import Target, instruction_language, parse_instruction, zh_number

P1, LAST = Target("paragraph", 1), Target("paragraph", -1)
WHOLE, TITLE = Target(), Target("title")


def para(n: int) -> Target:
    return Target("paragraph", n)


def sentence(quote: str) -> Target:
    return Target("sentence", quote=quote)


EN = [
    ("the intro is too long, cut it to one sentence", P1, [("shorten", 1)]),
    ("Intro's way too long", P1, ["shorten"]),
    ("shorten the opening paragraph", P1, ["shorten"]),
    ("can you trim the beginning a bit", P1, ["shorten"]),
    ("the first paragraph is too long, just one sentence please", P1, [("shorten", 1)]),
    ("the second paragraph is too long", para(2), ["shorten"]),
    ("paragraph 3 is wordy, cut it in half", para(3), [("shorten", 0.5)]),
    ("cut the 2nd para by a third", para(2), [("shorten", 1 / 3)]),
    ("make the last paragraph shorter", LAST, ["shorten"]),
    ("the conclusion rambles, keep two sentences", LAST, [("shorten", 2)]),
    ("make it shorter", WHOLE, ["shorten"]),
    ("too long overall, trim 30%", WHOLE, [("shorten", 0.3)]),
    ("tighten up the whole piece, half as long", WHOLE, [("shorten", 0.5)]),
    ("expand the second paragraph", para(2), ["expand"]),
    ("the ending feels too short", LAST, ["expand"]),
    ("can you flesh out paragraph 4?", para(4), ["expand"]),
    ("say more in the intro", P1, ["expand"]),
    ("make it more formal", WHOLE, ["formal"]),
    ("paragraph 2 is too casual", para(2), ["formal"]),
    ("make the fifth paragraph more professional", para(5), ["formal"]),
    ("sounds too stiff, make it more conversational", WHOLE, ["casual"]),
    ("less formal please", WHOLE, ["casual"]),
    ("make the intro livelier", P1, ["lively"]),
    ("the opening is boring", P1, ["lively"]),
    ("paragraph 2: more energy!", para(2), ["lively"]),
    ("too formal, make it livelier", WHOLE, ["lively"]),
    ("make it sound less like an ad", WHOLE, ["less_ad"]),
    ("too salesy", WHOLE, ["less_ad"]),
    ("the last paragraph reads like a sales pitch", LAST, ["less_ad"]),
    ("add an emoji", WHOLE, ["emoji_add"]),
    ("put an emoji in the title", TITLE, ["emoji_add"]),
    ("no emojis please", WHOLE, ["emoji_remove"]),
    ("remove the emoji from the conclusion", LAST, ["emoji_remove"]),
    ("turn the third paragraph into bullet points", para(3), ["to_bullets"]),
    ("make paragraph 2 a bulleted list", para(2), ["to_bullets"]),
    ("turn the list into prose", WHOLE, ["to_prose"]),
    ("no bullets in paragraph 3, write it as full sentences", para(3), ["to_prose"]),
    ('replace "sunscreen" with "sunblock"', WHOLE, [("fix_word", "sunscreen", "sunblock")]),
    ("fix the typo 'teh'", WHOLE, [("fix_word", "teh", "the")]),
    ('"colour" should be "color"', WHOLE, [("fix_word", "colour", "color")]),
    (
        'delete the sentence "No jargon, just stuff that works."',
        sentence("No jargon, just stuff that works."),
        ["delete"],
    ),
    (
        'the sentence "Everyone has an opinion on it" is too long',
        sentence("Everyone has an opinion on it"),
        ["shorten"],
    ),
    ('change the title to "Sun Smart"', TITLE, [("retitle", "Sun Smart")]),
    ("give it a new title", TITLE, ["retitle"]),
    ("the headline is too long", TITLE, ["shorten"]),
    ("drop the last paragraph", LAST, ["delete"]),
    ("make it more formal and shorter", WHOLE, ["formal", "shorten"]),
    ("don't make it so formal", WHOLE, ["casual"]),
]

ZH = [
    ("开头太长了，只留一句话", P1, [("shorten", 1)]),
    ("第二段太啰嗦，删掉一半", para(2), [("shorten", 0.5)]),
    ("第三段太长，缩短一点", para(3), ["shorten"]),
    ("开头精简一下", P1, ["shorten"]),
    ("结尾太长了", LAST, ["shorten"]),
    ("结尾段太长", LAST, ["shorten"]),
    ("最后一段压缩成两句", LAST, [("shorten", 2)]),
    ("全文太长了，砍掉三分之一", WHOLE, [("shorten", 1 / 3)]),
    ("整体短一点", WHOLE, ["shorten"]),
    ("第2段删掉30%", para(2), [("shorten", 0.3)]),
    ("第四段只保留第一句", para(4), [("shorten", 1)]),
    ("第一段太长了，砍掉一半", P1, [("shorten", 0.5)]),
    ("第十段太长", para(10), ["shorten"]),
    ("第二段太短了，展开说说", para(2), ["expand"]),
    ("结尾再多写一点", LAST, ["expand"]),
    ("开头可以再详细一些", P1, ["expand"]),
    ("第三段扩写一下", para(3), ["expand"]),
    ("正式一点", WHOLE, ["formal"]),
    ("第二段太口语了，改得正式一点", para(2), ["formal"]),
    ("第五段正式一点", para(5), ["formal"]),
    ("太正式了，活泼点", WHOLE, ["lively"]),
    ("别那么正式", WHOLE, ["casual"]),
    ("口语化一点", WHOLE, ["casual"]),
    ("开头活泼一点", P1, ["lively"]),
    ("结尾太枯燥了", LAST, ["lively"]),
    ("开篇有点无聊，写得生动些", P1, ["lively"]),
    ("别那么像广告", WHOLE, ["less_ad"]),
    ("广告味太重了", WHOLE, ["less_ad"]),
    ("第三段像软文，改一下", para(3), ["less_ad"]),
    ("加一个 emoji", WHOLE, ["emoji_add"]),
    ("标题加个表情", TITLE, ["emoji_add"]),
    ("去掉表情", WHOLE, ["emoji_remove"]),
    ("最后一段的 emoji 删掉", LAST, ["emoji_remove"]),
    ("第三段改成分点列出", para(3), ["to_bullets"]),
    ("第二段用列表的形式", para(2), ["to_bullets"]),
    ("把列表改成一段话", WHOLE, ["to_prose"]),
    ("第三段不要分点，连成一段", para(3), ["to_prose"]),
    ("把「防晒霜」改成「防晒产品」", WHOLE, [("fix_word", "防晒霜", "防晒产品")]),
    ("「再接再励」是错别字", WHOLE, [("fix_word", "再接再励", "再接再厉")]),
    ("删掉「都是实打实的经验，放心看～」这句", sentence("都是实打实的经验，放心看～"), ["delete"]),
    ("「今天咱们就从护肤的角度轻松聊一聊。」这句太长了", sentence("今天咱们就从护肤的角度轻松聊一聊。"), ["shorten"]),
    ("标题改成「周末厨房指南」", TITLE, [("retitle", "周末厨房指南")]),
    ("换个标题", TITLE, ["retitle"]),
    ("标题太长了", TITLE, ["shorten"]),
    ("删掉最后一段", LAST, ["delete"]),
]


def _expected(spec) -> tuple:
    if isinstance(spec, str):
        return (spec,)
    kind, *rest = spec
    if kind == "shorten":
        value = rest[0]
        return (kind, value) if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else (kind, value)
    return (kind, *rest)


def _got(op) -> tuple:
    if op.kind == "shorten":
        if op.sentences is not None:
            return ("shorten", op.sentences)
        if op.ratio is not None:
            return ("shorten", pytest.approx(op.ratio))
        return ("shorten",)
    if op.kind == "fix_word":
        return ("fix_word", op.word, op.replacement)
    if op.kind == "retitle" and op.text:
        return ("retitle", op.text)
    return (op.kind,)


def _check(text: str, language: str, target: Target, operations: list) -> None:
    parsed = parse_instruction(text, language)
    assert parsed.target == target, text
    assert [_got(op) for op in parsed.operations] == [_expected(s) for s in operations], text


@pytest.mark.parametrize("text,target,operations", EN, ids=[row[0] for row in EN])
def test_english_phrasings(text, target, operations):
    _check(text, "en", target, operations)


@pytest.mark.parametrize("text,target,operations", ZH, ids=[row[0] for row in ZH])
def test_chinese_phrasings(text, target, operations):
    _check(text, "zh", target, operations)


def test_the_tables_cover_every_operation_and_target_in_both_languages():
    assert len(EN) >= 40 and len(ZH) >= 40
    for table in (EN, ZH):
        kinds = {_expected(spec)[0] for _, _, ops in table for spec in ops}
        assert kinds >= {
            "shorten",
            "expand",
            "formal",
            "casual",
            "lively",
            "less_ad",
            "emoji_add",
            "emoji_remove",
            "to_bullets",
            "to_prose",
            "fix_word",
            "delete",
            "retitle",
        }
        targets = {t.kind for _, t, _ in table}
        assert targets == {"whole", "title", "paragraph", "sentence"}


@pytest.mark.parametrize(
    "text,language", [("make it sing like a whale", "en"), ("随便改改", "zh"), ("hmm", "en"), ("嗯……", "zh")]
)
def test_gibberish_is_not_understood(text, language):
    assert not parse_instruction(text, language).understood


def test_instruction_language_ignores_quoted_text():
    assert instruction_language("把「sunscreen」改成「防晒」") == "zh"
    assert instruction_language('replace "防晒霜" with "防晒产品"') == "en"
    assert instruction_language("第二段太长") == "zh"
    assert instruction_language("!!! 👍") is None


def test_chinese_numerals():
    assert [zh_number(t) for t in ("一", "两", "十", "十二", "二十", "二十三", "7")] == [1, 2, 10, 12, 20, 23, 7]
