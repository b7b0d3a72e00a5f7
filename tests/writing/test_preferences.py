"""Preference extraction, merging and the idempotent batch."""

from __future__ import annotations

import pytest

from furnace.domain.elixir import StylePreference
from furnace.domain.errors import LLMMalformedOutput
from furnace.llm.fakes import FakeLLM
from furnace.writing.content import generate_content
from furnace.writing.preferences import REINFORCE_STEP, merge_preferences, parse_preferences, process_unprocessed
from furnace.writing.revision import revise


def P(dim, value, weight=0.5, count=1, src="r1"):
    return StylePreference(dimension=dim, value=value, weight=weight, count=count, source_revision=src)


def test_merge_reinforces_same_value_and_replaces_another():
    existing = [P("tone", "lively", 0.6), P("emoji", "more", 0.5)]
    merged = merge_preferences(
        existing,
        [P("tone", "Lively", 0.4, src="r2"), P("emoji", "fewer", 0.6, src="r2"), P("length", "concise", 0.6, src="r2")],
    )
    tone, emoji, length = merged
    assert (tone.value, tone.count, tone.weight, tone.source_revision) == ("lively", 2, 0.6 + REINFORCE_STEP, "r2")
    assert (emoji.value, emoji.count, emoji.weight) == ("fewer", 1, 0.6)
    assert (length.dimension, length.count) == ("length", 1)
    again = merge_preferences(merged, [P("tone", "lively", 0.95)])
    assert again[0].weight == 1.0 and again[0].count == 3


def test_parse_validates_and_skips_bad_items():
    prefs = parse_preferences(
        {"preferences": [{"dimension": "Tone", "value": "Lively", "weight": 3}, {"value": "no dimension"}, "junk"]},
        revision_id="r9",
    )
    assert [(p.dimension, p.value, p.weight, p.source_revision) for p in prefs] == [("tone", "lively", 1.0, "r9")]
    with pytest.raises(LLMMalformedOutput):
        parse_preferences({"nope": []}, revision_id="r9")


def test_batch_processes_unprocessed_revisions_once(store, contents, engine, clock):
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    for s in ["太正式了，活泼点", "加一个 emoji", "再加一个 emoji"]:
        revise(store, contents, engine, content.id, s, learn=False, clock=clock)
    assert len(contents.unprocessed_revisions()) == 3
    calls = FakeLLM(respond=engine.complete, model_name=engine.model_name)
    report = process_unprocessed(store, contents, calls)
    assert (report.processed, report.learned, report.failed) == (3, 3, 0)
    persona = store.get_elixir("skin-advisor")
    prefs = {p.dimension: p for p in persona.style_preferences}
    assert prefs["emoji"].count == 2 and prefs["tone"].count == 1
    assert report.personas == {"skin-advisor": persona.version}
    # idempotent: nothing left, no model call, no new version
    n_calls = len(calls.calls)
    again = process_unprocessed(store, contents, calls)
    assert again.processed == 0 and len(calls.calls) == n_calls
    assert store.get_elixir("skin-advisor").version == persona.version


def test_batch_counts_failures_and_retries_them_later(store, contents, engine, clock):
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor-en", topic="sunscreen", clock=clock)
    revise(store, contents, engine, content.id, "add an emoji", learn=False, clock=clock)
    broken = FakeLLM(respond=lambda r: {"oops": 1})
    report = process_unprocessed(store, contents, broken)
    assert (report.processed, report.failed) == (0, 1)
    assert len(contents.unprocessed_revisions()) == 1
    assert process_unprocessed(store, contents, engine).learned == 1


def test_crash_between_persona_save_and_mark_does_not_double_count(store, contents, engine, clock):
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    out = revise(store, contents, engine, content.id, "加一个 emoji", clock=clock)
    version = store.get_elixir("skin-advisor").version
    contents._processed.clear()  # as if the mark had never been written
    report = process_unprocessed(store, contents, FakeLLM())  # no model call may happen
    assert report.processed == 1 and report.learned == 0
    assert store.get_elixir("skin-advisor").version == version
    assert contents.is_processed(out.revision.id)


def test_preferences_learned_for_an_agent_persona(store, contents, engine, clock):
    from furnace.domain.elixir import edit

    child = edit(store.get_elixir("skin-advisor"), id="agt-0123456789abcdef0123", name="融合体")
    store.save_elixir(child, origin="agent")
    content, _ = generate_content(store, contents, engine, persona_id=child.id, topic="夏季防晒推荐", clock=clock)
    revise(store, contents, engine, content.id, "太正式了，活泼点", clock=clock)
    latest = store.get_elixir(child.id)
    assert latest.version == 2 and latest.style_preferences[0].value == "lively"


def test_an_edit_saved_while_preferences_are_extracted_is_kept(store, contents, engine, clock):
    """The learned version is saved only on top of the latest one (compare-and-set): a persona edit
    made meanwhile (another window, the app's editor) is kept, and the preferences land on top of it."""
    from furnace.domain.elixir import edit
    from furnace.llm.seam import TaskKind

    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)

    def respond(request):
        if request.task == TaskKind.EXTRACT_PREFERENCES:  # someone edits the persona while the model extracts
            persona = store.get_elixir("skin-advisor")
            store.save_elixir(edit(persona, principles=[*persona.principles, "引用研究时给出来源"]))
        return engine.complete(request)

    before = store.get_elixir("skin-advisor").version
    out = revise(
        store, contents, FakeLLM(respond=respond, model_name=engine.model_name), content.id, "太正式了，活泼点"
    )
    assert out.learned is not None and out.learned.status == "learned"
    latest = store.get_elixir("skin-advisor")
    assert latest.version == before + 2 == out.learned.persona_ref.version
    assert "引用研究时给出来源" in latest.principles  # the edit made meanwhile survives
    assert [p.dimension for p in latest.style_preferences] == [p.dimension for p in out.learned.learned]
    assert contents.is_processed(out.revision.id)


def _stored_piece(tmp_path, engine, clock):
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.sql.content import SQLContentStore
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.store import SQLStore

    from .conftest import ZH_PERSONA

    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    store, contents = SQLStore(db), SQLContentStore(db)
    store.save_elixir(parse_elixir(ZH_PERSONA))
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    return db, store, contents, content


def test_on_the_live_store_a_round_commits_the_learned_version_and_its_mark_together(tmp_path, engine, clock):
    db, store, contents, content = _stored_piece(tmp_path, engine, clock)
    out = revise(store, contents, engine, content.id, "太正式了，活泼点", clock=clock)
    assert out.status == "revised" and out.learned is not None and out.learned.persona_ref.version == 2
    assert contents.is_processed(out.revision.id)
    assert contents.processed(out.revision.id)["status"] == "learned"
    assert contents.unprocessed_revisions() == []
    assert store.get_elixir("skin-advisor").version == 2


def test_a_mark_lost_after_the_version_is_redone_by_the_batch_without_learning_twice(tmp_path, engine, clock):
    """A version committed without its mark (a store that cannot join them, a crash between them) leaves
    the revision unprocessed; the next batch finds it in the persona's preferences and only marks it."""
    db, store, contents, content = _stored_piece(tmp_path, engine, clock)
    out = revise(store, contents, engine, content.id, "太正式了，活泼点", clock=clock)
    assert out.learned is not None and store.get_elixir("skin-advisor").version == 2
    db.execute("DELETE FROM processed_revisions WHERE revision_id = ?", [out.revision.id])  # the mark lost
    assert [r.id for r in contents.unprocessed_revisions()] == [out.revision.id]
    report = process_unprocessed(store, contents, engine)
    assert (report.processed, report.learned) == (1, 0)  # marked, not learned again
    assert store.get_elixir("skin-advisor").version == 2
    assert contents.processed(out.revision.id)["status"] == "already"
    db.close()


@pytest.mark.parametrize(
    ("persona", "topic", "suggestion"),
    [
        ("skin-advisor-en", "summer sunscreen", "Too formal, make it livelier and add an emoji"),
        ("skin-advisor", "夏季防晒推荐", "太正式了，活泼点，再加个表情"),
    ],
)
def test_a_suggestion_that_asks_several_things_teaches_each(store, contents, engine, clock, persona, topic, suggestion):
    content, _ = generate_content(store, contents, engine, persona_id=persona, topic=topic, clock=clock)
    out = revise(store, contents, engine, content.id, suggestion, clock=clock)
    assert out.status == "revised" and out.learned is not None
    learned = {(p.dimension, p.value) for p in out.learned.learned}
    assert learned == {("tone", "lively"), ("emoji", "more")}
    prefs = {p.dimension: p.value for p in store.get_elixir(persona).style_preferences}
    assert prefs == {"tone": "lively", "emoji": "more"}


@pytest.mark.parametrize(
    ("persona", "topic", "suggestion", "unit"),
    [
        ("skin-advisor", "夏季防晒推荐", "太长了，短一点", "字"),
        ("skin-advisor-en", "summer sunscreen", "too long, shorten it", " words"),
    ],
)
def test_a_learned_lengths_evidence_counts_as_the_versions_count(
    store, contents, engine, clock, persona, topic, suggestion, unit
):
    content, _ = generate_content(store, contents, engine, persona_id=persona, topic=topic, clock=clock)
    out = revise(store, contents, engine, content.id, suggestion, clock=clock)
    assert out.status == "revised" and out.learned is not None
    before, after = contents.get_version(content.id, 1), contents.get_version(content.id, 2)
    said = " ".join(f"{p.evidence}" for p in out.learned.learned)
    # the evidence counted newlines (250→207字) where the versions say 244→201
    assert f"{before.word_count}→{after.word_count}{unit}" in said, said
