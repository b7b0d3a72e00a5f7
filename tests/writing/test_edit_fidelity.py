"""Fidelity: the revision chat never reports an edit that was not made.

Every edit is checked against its instruction's postcondition before it is saved
(:mod:`furnace.writing.postconditions`), whoever wrote it; a failed check is "not done",
no version, exit 1. Replace requests work in every quoting style and without quotes, and
the editor's common requests (a question title, a call to action, split/merge, …) are
understood — carried out offline, or refused with the reason.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from furnace.domain.elixir import parse_elixir
from furnace.domain.text import split_paragraphs
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import Completion, TaskKind
from furnace.writing.addressing import parse_instruction
from furnace.writing.content import generate_content
from furnace.writing.postconditions import is_question, unmet
from furnace.writing.revision import revise

from .conftest import EN_PERSONA, ZH_PERSONA

EN_TOPIC, ZH_TOPIC = "why crows are so smart", "夏季防晒推荐"


def _piece(store, contents, engine, clock, language="en"):
    persona = "skin-advisor" if language == "zh" else "skin-advisor-en"
    topic = ZH_TOPIC if language == "zh" else EN_TOPIC
    return generate_content(store, contents, engine, persona_id=persona, topic=topic, clock=clock)


# --- the reported cases, from the CLI --------------------------------------------------------


@pytest.fixture()
def cli(settings):
    from furnace.cli import cli as group
    from furnace.runtime import Runtime

    runtime = Runtime(settings)
    runtime.store.save_elixir(parse_elixir(ZH_PERSONA))
    runtime.store.save_elixir(parse_elixir(EN_PERSONA))
    runtime.close()
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> str:
        result = runner.invoke(group, ["--home", str(settings.home), *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    return invoke


def _new(cli, persona: str, topic: str) -> dict:
    return json.loads(cli("content", "new", "--persona", persona, "--topic", topic, "--json"))


def _revise(cli, cid: str, suggestion: str, *flags: str, code: int = 0) -> dict:
    return json.loads(cli("revise", cid, suggestion, "--json", *flags, code=code))


def test_the_reported_english_cases_from_the_cli(cli):
    created = _new(cli, "skin-advisor-en", EN_TOPIC)
    cid, body = created["content"]["id"], created["version"]["body"]
    title = _revise(cli, cid, "make the title a question")["version"]["title"]
    assert title == "Why Are Crows So Smart?" and is_question(title)
    assert "fundamentals" in body
    done = _revise(cli, cid, "replace 'fundamentals' with 'basics'")
    assert "don't know the right spelling" not in done["reply"]
    assert done["version"]["body"] == body.replace("fundamentals", "basics")
    done = _revise(cli, cid, "replace basics with essentials")  # no quotes at all
    assert done["version"]["body"] == body.replace("fundamentals", "essentials")
    # Pending suggestions are one edit: the offline engine can do one and not the other, so none is saved.
    _revise(cli, cid, "replace 'zebra' with 'horse'", "--no-regenerate")
    out = _revise(cli, cid, "make it shorter", code=1)
    assert out["status"] == "failed" and out["version"] is None
    assert out["reply"].startswith("Not done:") and '"zebra" does not appear' in out["reply"]
    assert json.loads(cli("content", "show", cid, "--json"))["version"] == done["version"]["version"]


def test_the_reported_chinese_cases_from_the_cli(cli):
    created = _new(cli, "skin-advisor", ZH_TOPIC)
    cid, before = created["content"]["id"], created["version"]
    title = _revise(cli, cid, "标题改成疑问句")["version"]["title"]
    assert title.endswith("？") and "你需要知道的事" not in title
    done = _revise(cli, cid, "把结尾改得更有号召力")
    assert "没看懂" not in done["reply"]
    old, new = split_paragraphs(before["body"]), split_paragraphs(done["version"]["body"])
    assert new[:-1] == old[:-1] and new[-1].startswith(old[-1]) and len(new[-1]) > len(old[-1])


def test_a_failed_postcondition_is_not_done_and_exits_1_from_the_cli(settings, engine):
    """A model that answers "make the title a question" with a statement: nothing is saved, exit 1."""
    from furnace.cli.content_cmd import revise_cmd
    from furnace.runtime import Runtime

    runtime = Runtime(settings)
    runtime.store.save_elixir(parse_elixir(EN_PERSONA))
    content, v1 = generate_content(
        runtime.store, runtime.content_store, engine, persona_id="skin-advisor-en", topic="x"
    )

    def statement(request):
        if request.task == TaskKind.REVISE:
            parsed = {"title": "What You Need to Know About Crows", "body": request.inputs["body"]}
            return Completion(text=json.dumps(parsed), parsed=parsed, model="m")
        return engine.complete(request)

    runtime.__dict__["llm"] = FakeLLM(respond=statement)
    result = CliRunner().invoke(revise_cmd, [content.id, "make the title a question", "--json"], obj=runtime)
    runtime.close()
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["status"] == "failed" and data["version"] is None and data["learned"] == []
    assert data["reply"].startswith("Not done: the title is not a question")


# --- quoting styles -------------------------------------------------------------------------

EN_REPLACE = [
    'replace "fundamentals" with "basics"',
    "replace 'fundamentals' with 'basics'",
    "replace ‘fundamentals’ with ‘basics’",
    "replace “fundamentals” with “basics”",
    "replace 「fundamentals」 with 「basics」",
    "replace fundamentals with basics",
    "Replace fundamentals with basics.",
    "please replace the word 'fundamentals' with 'basics'",
    "swap ‘fundamentals’ for ‘basics’",
    "change 「fundamentals」 to 「basics」",
    "rename 'fundamentals' to 'basics'",
    "‘fundamentals’ should be ‘basics’",
    "use 'basics' instead of 'fundamentals'",
    "replace fundamentals with basics in the second paragraph",
]
ZH_REPLACE = [
    "把「基本原则」改成「核心原则」",
    "把“基本原则”改成“核心原则”",
    "把‘基本原则’改成‘核心原则’",
    '把"基本原则"改成"核心原则"',
    "把'基本原则'改成'核心原则'",
    "把『基本原则』换成『核心原则』",
    "把基本原则改成核心原则",
    "基本原则换成核心原则",
    "将基本原则替换为核心原则",
    "用「核心原则」代替「基本原则」",
]


@pytest.mark.parametrize("suggestion", EN_REPLACE)
def test_english_replace_in_every_quoting_style(suggestion, store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    out = revise(store, contents, engine, content.id, suggestion, learn=False, clock=clock)
    assert out.status == "revised", out.reply.content
    assert out.version.body == v1.body.replace("fundamentals", "basics") and out.version.title == v1.title


@pytest.mark.parametrize("suggestion", ZH_REPLACE)
def test_chinese_replace_in_every_quoting_style(suggestion, store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock, "zh")
    assert "基本原则" in v1.body
    out = revise(store, contents, engine, content.id, suggestion, learn=False, clock=clock)
    assert out.status == "revised", out.reply.content
    assert out.version.body == v1.body.replace("基本原则", "核心原则")


@pytest.mark.parametrize(
    "suggestion,language,title",
    [
        ("change the title to ‘Sun Smart’", "en", "Sun Smart"),
        ("rename the title to 'Sun Smart'", "en", "Sun Smart"),
        ("change the title to “Sun Smart”", "en", "Sun Smart"),
        ("标题改成“周末厨房指南”", "zh", "周末厨房指南"),
        ("标题改成‘周末厨房指南’", "zh", "周末厨房指南"),
        ("标题改成'周末厨房指南'", "zh", "周末厨房指南"),
        ("change the title to Sun Smart", "en", "Sun Smart"),  # no quotes at all
        ("rename the headline to Sun Smart", "en", "Sun Smart"),
        ("标题改成周末厨房指南", "zh", "周末厨房指南"),
    ],
)
def test_rename_in_every_quoting_style(suggestion, language, title, store, contents, engine, clock):
    content, _ = _piece(store, contents, engine, clock, language)
    out = revise(store, contents, engine, content.id, suggestion, learn=False, clock=clock)
    assert out.status == "revised" and out.version.title == title


def test_apostrophes_are_not_quotes():
    parsed = parse_instruction("don’t make it so formal, it’s too stiff", "en")
    assert [op.kind for op in parsed.operations] == ["casual"] and parsed.target.kind == "whole"


# --- new requests: understood, done offline and checked, or refused with the reason ----------

EN_NEW = [
    ("make the title a question", "title", "question"),
    ("turn the headline into a question", "title", "question"),
    ("make the ending a question", -1, "question"),
    ("end with a question to the reader", -1, "question"),
    ("stronger call to action", -1, "call_to_action"),
    ("the conclusion needs a clearer call to action", -1, "call_to_action"),
    ("shorter intro", 1, "shorten"),
    ("make the title punchier", "title", "punchy"),
    ("the headline is bland, make it catchier", "title", "punchy"),
    ("add a subheading", "whole", "subheading"),
    ("add a subheading before paragraph 3", 3, "subheading"),
    ("remove the exclamation marks", "whole", "no_exclaim"),
    ("too many exclamation points in paragraph 2", 2, "no_exclaim"),
    ("add more concrete examples", "whole", "example"),
    ("split the third paragraph in two", 3, "split"),
    ("break up the long paragraph", "whole", "split"),
    ("merge paragraphs 2 and 3", 2, "merge"),
    ("combine the second and third paragraphs", 2, "merge"),
    ("merge the last two paragraphs", -2, "merge"),
    ("write it in the second person", "whole", "second_person"),
    ('address the reader as "you"', "whole", "second_person"),
    ("write it in the first person", "whole", "first_person"),
    ("start the intro with a hook", 1, "hook"),
    ("less jargon please", "whole", "plain"),
    ("use plainer language in paragraph 3", 3, "plain"),
    ("capitalize the title", "title", "title_case"),
    ("remove the hashtags", "whole", "no_hashtags"),
    ("use shorter sentences", "whole", "short_sentences"),
    ("add a summary at the end", "whole", "summary"),
]
ZH_NEW = [
    ("标题改成疑问句", "title", "question"),
    ("标题用问句", "title", "question"),
    ("结尾改成问句", -1, "question"),
    ("把结尾改得更有号召力", -1, "call_to_action"),
    ("结尾加一句号召读者行动的话", -1, "call_to_action"),
    ("开头短一点", 1, "shorten"),
    ("标题更抓人一点", "title", "punchy"),
    ("标题太平淡了，吸引人一点", "title", "punchy"),
    ("加个小标题", "whole", "subheading"),
    ("第三段前面加个小标题", 3, "subheading"),
    ("去掉感叹号", "whole", "no_exclaim"),
    ("多举几个具体例子", "whole", "example"),
    ("第三段太长了，拆成两段", 3, "split"),
    ("把第二段和第三段合并", 2, "merge"),
    ("第二、三段合并", 2, "merge"),
    ("合并最后两段", -2, "merge"),
    ("改成第二人称", "whole", "second_person"),
    ("用第一人称写", "whole", "first_person"),
    ("开头加一句引子", 1, "hook"),
    ("用词通俗一点", "whole", "plain"),
    ("去掉话题标签", "whole", "no_hashtags"),
    ("句子太长了，短一点", "whole", "short_sentences"),
    ("结尾加个总结", "whole", "summary"),
    ("去掉表情", "whole", "emoji_remove"),
]
REFUSED = [
    ("translate it into French", "en", "translating is not an edit"),
    ("rewrite it from scratch", "en", "a rewrite from scratch is a new piece"),
    ("add a picture of a crow", "en", "a piece is text only"),
    ("add sources and statistics", "en", "cannot check facts"),
    ("merge paragraphs 2 and 4", "en", "neighbouring paragraphs"),
    ("翻译成英文", "zh", "翻译不是修改"),
    ("完全重写", "zh", "完全重写就是一篇新文章"),
    ("加几张配图", "zh", "文章只有文字"),
    ("补充数据来源", "zh", "不能核实事实"),
]


def _where(target) -> object:
    if target.kind == "paragraph":
        return target.index
    return target.kind


@pytest.mark.parametrize("text,where,kind", EN_NEW, ids=[r[0] for r in EN_NEW])
def test_english_editor_requests_are_understood(text, where, kind):
    parsed = parse_instruction(text, "en")
    assert ([op.kind for op in parsed.operations], _where(parsed.target)) == ([kind], where)


@pytest.mark.parametrize("text,where,kind", ZH_NEW, ids=[r[0] for r in ZH_NEW])
def test_chinese_editor_requests_are_understood(text, where, kind):
    parsed = parse_instruction(text, "zh")
    assert ([op.kind for op in parsed.operations], _where(parsed.target)) == ([kind], where)


def test_at_least_twenty_new_kinds_of_request_in_both_languages():
    for table in (EN_NEW, ZH_NEW):
        kinds = {kind for _, _, kind in table} - {"shorten", "emoji_remove"}
        assert len(kinds) >= 15  # with the refusals below: more than 20 new kinds of request
    assert len(EN_NEW) >= 21 and len(ZH_NEW) >= 21
    assert len({r[2] for r in REFUSED}) >= 9


@pytest.mark.parametrize("text,language,why", REFUSED, ids=[r[0] for r in REFUSED])
def test_requests_that_are_not_edits_are_refused_with_the_reason_and_no_model_call(
    text, language, why, store, contents, engine, clock
):
    content, v1 = _piece(store, contents, engine, clock, language)
    llm = FakeLLM()  # any model call would fail the test: nothing is queued
    out = revise(store, contents, llm, content.id, text, learn=False, clock=clock)
    assert out.status == "failed" and why in out.reply.content and not llm.calls
    assert contents.versions(content.id) == [v1]


# A generated piece has no hashtags, no emoji, no exclamation marks and a title-cased title (offline):
# those requests are tried on a piece that has them, below.
_NOT_ON_A_FRESH_PIECE = ("example", "no_hashtags", "title_case", "emoji_remove", "no_exclaim")
OFFLINE_DONE = [(t, "en") for t, _, k in EN_NEW if k not in _NOT_ON_A_FRESH_PIECE] + [
    (t, "zh") for t, _, k in ZH_NEW if k not in _NOT_ON_A_FRESH_PIECE
]


@pytest.mark.parametrize("text,language", OFFLINE_DONE, ids=[t for t, _ in OFFLINE_DONE])
def test_the_offline_engine_carries_out_each_request_and_its_check_holds(
    text, language, store, contents, engine, clock
):
    content, v1 = _piece(store, contents, engine, clock, language)
    out = revise(store, contents, engine, content.id, text, learn=False, clock=clock)
    assert out.status == "revised", out.reply.content
    instruction = parse_instruction(text, language)
    assert unmet([instruction], (v1.title, v1.body), (out.version.title, out.version.body)) == []
    assert (out.version.title, out.version.body) != (v1.title, v1.body)


@pytest.mark.parametrize(
    "first,then,language",
    [
        ("make it livelier", "remove the exclamation marks", "en"),
        ("太正式了，活泼点", "去掉感叹号", "zh"),
        ("add an emoji", "去掉表情", "zh"),
        ("add an emoji", "no emojis please", "en"),
    ],
)
def test_removals_on_a_piece_that_has_something_to_remove(first, then, language, store, contents, engine, clock):
    content, _ = _piece(store, contents, engine, clock, language)
    if language == "zh" and first == "add an emoji":
        first = "加一个 emoji"
    middle = revise(store, contents, engine, content.id, first, learn=False, clock=clock).version
    out = revise(store, contents, engine, content.id, then, learn=False, clock=clock)
    assert out.status == "revised", out.reply.content
    instruction = parse_instruction(then, language)
    assert unmet([instruction], (middle.title, middle.body), (out.version.title, out.version.body)) == []


@pytest.mark.parametrize(
    "text,language,why",
    [
        ("add more concrete examples", "en", "needs a real model"),
        ("多举几个具体例子", "zh", "需要真实模型"),
        ("remove the hashtags", "en", "has no hashtags"),
        ("标题首字母大写", "zh", "中文没有大小写"),
    ],
)
def test_the_offline_engine_refuses_what_it_cannot_do_honestly(text, language, why, store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock, language)
    out = revise(store, contents, engine, content.id, text, learn=False, clock=clock)
    assert out.status == "failed" and why in out.reply.content
    assert contents.versions(content.id) == [v1]


def test_a_real_question_title_in_both_languages():
    from furnace.llm.offline.writing_edits import question_title

    assert question_title("Why crows are so smart: A Practical Guide", "en") == "Why Are Crows So Smart?"
    assert question_title("How to start birdwatching in winter", "en") == "How Do You Start Birdwatching in Winter?"
    assert question_title("Summer sunscreen picks", "en") == "What Should You Know About Summer Sunscreen Picks?"
    assert question_title("夏季防晒推荐：护肤视角下的实用指南", "zh") == "夏季防晒推荐，你真的了解吗？"
    assert question_title("秋天喝什么茶", "zh") == "秋天喝什么茶？"


# --- postconditions hold for a real model too -----------------------------------------------


def _answering(engine, edit):
    """A model that answers REVISE with ``edit(title, body)`` and everything else like the offline engine."""

    def respond(request):
        if request.task == TaskKind.REVISE:
            title, body = edit(request.inputs["title"], request.inputs["body"])
            parsed = {"title": title, "body": body}
            return Completion(text=json.dumps(parsed), parsed=parsed, model="real-ish")
        return engine.complete(request)

    return FakeLLM(respond=respond)


def _swap(body: str, i: int, text: str) -> str:
    paragraphs = split_paragraphs(body)
    paragraphs[i] = text
    return "\n\n".join(paragraphs)


CARELESS = [
    ("make the title a question", lambda t, b: ("What You Need to Know About Crows", b), "the title is not a question"),
    (
        "replace 'fundamentals' with 'basics'",
        lambda t, b: (t, b.replace("fundamentals", "basics").replace("Second", "Next")),
        'the edit changed more than "fundamentals"',
    ),
    (
        "replace 'fundamentals' with 'basics'",
        lambda t, b: (t, b.replace("fundamentals", "basic ideas")),
        '"basics" is not in the whole piece',
    ),
    (
        "shorten the second paragraph",
        lambda t, b: (t, _swap(b, 1, split_paragraphs(b)[1] + " And one more thing to add here.")),
        "paragraph 2 is not shorter",
    ),
    (
        "split the third paragraph in two",
        lambda t, b: (t, _swap(b, 2, "Second, a first half.\n\nAnd a second half that drops sentences.")),
        "paragraph 3 was not split into two paragraphs with the same sentences",
    ),
    ("add an emoji to the title", lambda t, b: (t + "!", b), "the title has no new emoji"),
    ("change the title to 'Sun Smart'", lambda t, b: ("Sun Smarts", b), 'the title is "Sun Smarts", not "Sun Smart"'),
    (
        "stronger call to action",
        lambda t, b: (t, _swap(b, -1, split_paragraphs(b)[-1] + " The end is near.")),
        "the last paragraph has no new call to action",
    ),
    (
        "make the ending a question",
        lambda t, b: (t, _swap(b, -1, split_paragraphs(b)[-1] + " That is all.")),
        "the last paragraph does not end with a question",
    ),
    (
        "cut the intro to one sentence",
        lambda t, b: (t, _swap(b, 0, split_paragraphs(b)[0][:-1] + "; nothing else. Two. Three.")),
        "paragraph 1 has",
    ),
]


@pytest.mark.parametrize("text,edit,why", CARELESS, ids=[f"{r[0]} / {r[2]}" for r in CARELESS])
def test_a_model_edit_that_fails_its_postcondition_is_not_done(text, edit, why, store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    out = revise(store, contents, _answering(engine, edit), content.id, text, clock=clock)
    assert out.status == "failed" and out.version is None and out.revision is None and out.learned is None
    assert out.reply.content.startswith("Not done: ") and why in out.reply.content, out.reply.content
    assert contents.versions(content.id) == [v1]
    assert contents.revisions(content.id) == []
    assert store.get_elixir("skin-advisor-en").version == 1


def test_a_model_edit_that_meets_the_postcondition_is_saved(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    out = revise(
        store,
        contents,
        _answering(engine, lambda t, b: ("Why Are Crows So Clever?", b)),
        content.id,
        "make the title a question",
        learn=False,
        clock=clock,
    )
    assert out.status == "revised" and out.version.title == "Why Are Crows So Clever?"


def test_unmet_on_text_alone():
    before = ("Sun Tips", "One. Two. Three.\n\nFour fundamentals. Five.")
    shorten = parse_instruction("shorten the second paragraph", "en")
    assert unmet([shorten], before, ("Sun Tips", "One. Two. Three.\n\nFour fundamentals.")) == []
    assert unmet([shorten], before, before) == ["paragraph 2 is not shorter"]
    fix = parse_instruction("replace fundamentals with basics", "en")
    assert unmet([fix], before, ("Sun Tips", "One. Two. Three.\n\nFour basics. Five.")) == []
    assert unmet([fix], before, ("Sun Tips", "One. Two. Three.\n\nFour basics. Six.")) == [
        'the edit changed more than "fundamentals"'
    ]
    merge = parse_instruction("merge paragraphs 1 and 2", "en")
    assert unmet([merge], before, ("Sun Tips", "One. Two. Three. Four fundamentals. Five.")) == []
    assert unmet([merge], before, ("Sun Tips", "One. Two. Four fundamentals. Five.")) != []
    no_bang = parse_instruction("remove the exclamation marks", "en")
    assert unmet([no_bang], ("Hi!", "Go!"), ("Hi", "Go.")) == []
    assert unmet([no_bang], ("Hi!", "Go!"), ("Hi", "Go!")) == ["the whole piece still has exclamation marks"]
    zh_question = parse_instruction("标题改成疑问句", "zh")
    assert unmet([zh_question], ("夏季防晒", "正文。"), ("夏季防晒，你了解吗？", "正文。")) == []
    assert unmet([zh_question], ("夏季防晒", "正文。"), ("关于夏季防晒，你需要知道的事", "正文。")) == [
        "标题不是疑问句：关于夏季防晒，你需要知道的事"
    ]


@pytest.mark.parametrize(
    "text,language",
    [
        ("第二段有问题，改一下", "zh"),
        ("the link between paragraph 2 and 3 is weak", "en"),
        ("the picture in paragraph 2 is vague", "en"),
    ],
)
def test_words_that_only_look_like_a_request_are_not_misread(text, language):
    """The words 有问题 ("has a problem"), a link or a picture named in passing are not requests."""
    parsed = parse_instruction(text, language)
    assert not parsed.operations and parsed.refusal is None


@pytest.mark.parametrize(
    "text,kind",
    [
        ("make it livelier!!", "lively"),
        ("end with a call to action to join the conversation", "call_to_action"),
        ("for instance, the second paragraph is too long", "shorten"),
    ],
)
def test_a_new_keyword_in_passing_keeps_the_reading(text, kind):
    assert [op.kind for op in parse_instruction(text, "en").operations] == [kind]


def test_unmet_counts_sentences_per_paragraph_for_the_whole_piece():
    keep_two = parse_instruction("make it shorter, two sentences per paragraph", "en")
    before = ("Sun Tips", "One. Two. Three.\n\nFour. Five. Six.")
    assert unmet([keep_two], before, ("Sun Tips", "One. Two.\n\nFour. Five.")) == []
    assert unmet([keep_two], before, ("Sun Tips", "One. Two.\n\nFour. Five. Six.")) == [
        "the whole piece has 3 sentences, not at most 2"
    ]


def test_a_replace_that_keeps_a_capitalised_occurrence_is_not_done():
    fix = parse_instruction("replace fundamentals with basics", "en")
    before = ("Tips", "Fundamentals first. The fundamentals matter.")
    assert unmet([fix], before, ("Tips", "Basics first. The basics matter.")) == []
    assert unmet([fix], before, ("Tips", "Fundamentals first. The basics matter.")) == [
        '"fundamentals" is still in the whole piece'
    ]


def test_a_real_model_is_told_a_merge_may_change_both_paragraphs(store, contents, engine, clock):
    from furnace.writing.revision import build_revise_request

    content, v1 = _piece(store, contents, engine, clock)
    request = build_revise_request(store.get_elixir("skin-advisor-en"), v1, ["merge paragraphs 2 and 3"])
    assert "Change only paragraph 2 and the next paragraph;" in request.messages[-1].content


@pytest.mark.parametrize(
    "text,language", [("Too formal, make it livelier and add an emoji", "en"), ("太正式了，活泼点，再加个表情", "zh")]
)
def test_an_emoji_and_another_edit_in_one_suggestion_are_both_made(text, language, store, contents, engine, clock):
    """The emoji was the only edit read from such a suggestion, yet the whole suggestion was reported done."""
    parsed = parse_instruction(text, language)
    assert [op.kind for op in parsed.operations] == ["emoji_add", "lively"]
    content, v1 = _piece(store, contents, engine, clock, language)
    out = revise(store, contents, engine, content.id, text, learn=False, clock=clock)
    assert out.status == "revised"
    assert unmet([parsed], (v1.title, v1.body), (out.version.title, out.version.body)) == []
    assert "！" in out.version.body or "!" in out.version.body  # livelier, not only an emoji more


@pytest.mark.parametrize(
    "text,edit,why",
    [
        ("标题改成疑问句", lambda t, b: ("关于夏季防晒推荐，你需要知道的事", b), "标题不是疑问句"),
        (
            "把「基本原则」改成「核心原则」",
            lambda t, b: (t, b.replace("基本原则", "核心原则").replace("首先", "第一")),
            "修改不止替换了「基本原则」",
        ),
        ("第三段太长了，拆成两段", lambda t, b: (t, b), "没有修改"),
    ],
)
def test_a_chinese_model_edit_that_fails_its_postcondition_is_not_done(text, edit, why, store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock, "zh")
    out = revise(store, contents, _answering(engine, edit), content.id, text, clock=clock)
    assert out.status == "failed" and out.reply.content.startswith("未完成") and why in out.reply.content
    assert contents.versions(content.id) == [v1] and contents.revisions(content.id) == []
