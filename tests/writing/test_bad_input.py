"""Bad or impossible instructions through the revision chat and the CLI: a clear message,
no new version, no preference learned, exit 1 — and an edit never leaves its target."""

from __future__ import annotations

import json

import pytest

from furnace.domain.elixir import parse_elixir
from furnace.domain.errors import InputError
from furnace.domain.text import split_paragraphs
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import Completion, TaskKind
from furnace.writing.content import generate_content
from furnace.writing.revision import revise

from .conftest import EN_PERSONA, ZH_PERSONA


class Recording:
    def __init__(self, inner):
        self.inner, self.model_name, self.calls = inner, inner.model_name, []

    def complete(self, request):
        self.calls.append(request)
        return self.inner.complete(request)


def _piece(store, contents, llm, clock, persona="skin-advisor-en", topic="summer sunscreen"):
    return generate_content(store, contents, llm, persona_id=persona, topic=topic, clock=clock)


@pytest.mark.parametrize(
    "persona,topic,instruction,says",
    [
        (
            "skin-advisor-en",
            "summer sunscreen",
            "第二段太长",
            "the piece is in English but the suggestion is in Chinese",
        ),
        ("skin-advisor", "夏季防晒推荐", "the second paragraph is too long", "这篇文章是中文，修改建议却是英文"),
        ("skin-advisor-en", "summer sunscreen", "   ", "must not be empty"),
        ("skin-advisor-en", "summer sunscreen", "shorten it " * 455, "too long (5004 characters"),
    ],
)
def test_bad_instructions_are_refused_before_anything_is_written(
    persona, topic, instruction, says, store, contents, engine, clock
):
    content, v1 = _piece(store, contents, engine, clock, persona, topic)
    llm = Recording(engine)
    with pytest.raises(InputError, match=says.replace("(", r"\(")):
        revise(store, contents, llm, content.id, instruction, clock=clock)
    assert contents.versions(content.id) == [v1] and llm.calls == []


@pytest.mark.parametrize(
    "persona,topic,instruction,says",
    [
        (
            "skin-advisor-en",
            "summer sunscreen",
            "paragraph 9 is too long",
            "paragraph 9 does not exist (the text has 4)",
        ),
        ("skin-advisor", "夏季防晒推荐", "第九段太长了", "没有第 9 段（全文共 4 段）"),
        ("skin-advisor-en", "summer sunscreen", 'delete the sentence "Buy now"', 'the sentence "Buy now" is not in'),
    ],
)
def test_a_target_that_is_not_there_fails_without_a_model_call(
    persona, topic, instruction, says, store, contents, engine, clock
):
    content, v1 = _piece(store, contents, engine, clock, persona, topic)
    llm = Recording(engine)
    before = store.get_elixir(persona).version
    outcome = revise(store, contents, llm, content.id, instruction, clock=clock)
    assert outcome.status == "failed" and outcome.version is None and outcome.learned is None
    assert says in outcome.reply.content
    assert contents.versions(content.id) == [v1] and llm.calls == []
    assert store.get_elixir(persona).version == before  # nothing learned from a refused edit


@pytest.mark.parametrize(
    "persona,topic,instruction,says",
    [
        ("skin-advisor-en", "summer sunscreen", "make it sing like a whale", "Edits I can make:"),
        ("skin-advisor", "夏季防晒推荐", "随便改改", "可以这样说："),
        ("skin-advisor-en", "summer sunscreen", "make it sound less like an ad", "has no ad-like wording"),
    ],
)
def test_not_understood_or_not_applicable_says_so_and_lists_the_edits(
    persona, topic, instruction, says, store, contents, engine, clock
):
    content, v1 = _piece(store, contents, engine, clock, persona, topic)
    before = store.get_elixir(persona).version
    outcome = revise(store, contents, engine, content.id, instruction, clock=clock)
    assert outcome.status == "failed" and says in outcome.reply.content
    assert contents.versions(content.id) == [v1] and contents.revisions(content.id) == []
    assert store.get_elixir(persona).version == before


def _rewrite_everything(engine):
    """A careless model: applies the edit, then also rewrites every other paragraph and the title."""

    def respond(request):
        done = engine.complete(request)
        if request.task != TaskKind.REVISE:
            return done
        paragraphs = [p + " (edited)" for p in split_paragraphs(done.parsed["body"])]
        parsed = {"title": done.parsed["title"] + "!", "body": "\n\n".join(paragraphs)}
        return Completion(text=json.dumps(parsed), parsed=parsed, model=done.model)

    return FakeLLM(respond=respond, model_name=engine.model_name)


def test_an_edit_outside_its_target_is_undone_byte_for_byte(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    outcome = revise(store, contents, _rewrite_everything(engine), content.id, "the intro is too long", clock=clock)
    assert outcome.status == "revised"
    old, new = split_paragraphs(v1.body), split_paragraphs(outcome.version.body)
    assert new[1:] == old[1:] and outcome.version.title == v1.title
    assert new[0] != old[0] and len(new[0]) < len(old[0]) + len(" (edited)")


def test_a_model_that_empties_the_piece_is_refused(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)

    def respond(request):
        if request.task == TaskKind.REVISE:
            return Completion(text="", parsed={"title": v1.title, "body": "   "}, model="m")
        return engine.complete(request)

    outcome = revise(store, contents, FakeLLM(respond=respond), content.id, "make it shorter", clock=clock)
    assert outcome.status == "failed" and outcome.version is None
    assert contents.versions(content.id) == [v1]


def test_the_issue_scenarios_touch_only_their_target(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock, "skin-advisor-en", "winter birdwatching")
    out = revise(store, contents, engine, content.id, "the intro is too long, cut it to one sentence", clock=clock)
    old, new = split_paragraphs(v1.body), split_paragraphs(out.version.body)
    assert new[1:] == old[1:] and new[0] == old[0].split(". ")[0] + "."
    zh, z1 = _piece(store, contents, engine, clock, "skin-advisor", "秋天喝什么茶")
    out = revise(store, contents, engine, zh.id, "第二段太啰嗦，删掉一半", clock=clock)
    old, new = split_paragraphs(z1.body), split_paragraphs(out.version.body)
    assert [p for i, p in enumerate(new) if i != 1] == [p for i, p in enumerate(old) if i != 1]
    assert old[1].startswith(new[1]) and len(new[1]) < len(old[1])


@pytest.fixture()
def cli(settings):
    from furnace.runtime import Runtime

    store = Runtime(settings).store
    store.save_elixir(parse_elixir(ZH_PERSONA))
    store.save_elixir(parse_elixir(EN_PERSONA))

    def main(*args: str) -> int:
        from furnace.cli import main as entry

        try:
            entry(["--home", str(settings.home), *args])
        except SystemExit as exit_info:
            return int(exit_info.code or 0)
        return 0

    return main


@pytest.mark.parametrize(
    "instruction,says",
    [
        ("paragraph 9 is too long", "paragraph 9 does not exist"),
        ("第二段太长", "the piece is in English but the suggestion is in Chinese"),
        ("", "must not be empty"),
        ("x" * 5000, "too long"),
        ("make it sing like a whale", "Not understood"),
    ],
)
def test_cli_bad_instructions_exit_1_and_make_no_version(cli, capsys, instruction, says):
    assert cli("content", "new", "--persona", "skin-advisor-en", "--topic", "summer sunscreen", "--json") == 0
    created = json.loads(capsys.readouterr().out)
    cid = created["content"]["id"]
    assert cli("revise", cid, instruction) == 1
    captured = capsys.readouterr()
    assert says in captured.out + captured.err
    assert cli("content", "history", cid, "--json") == 0
    history = json.loads(capsys.readouterr().out)
    assert [v["version"] for v in history["versions"]] == [1]
