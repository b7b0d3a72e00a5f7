"""Revision chat semantics: failures, pending suggestions, no-change, diff, rollback, atomicity."""

from __future__ import annotations

import logging

import pytest

from furnace.domain.errors import InputError, LLMMalformedOutput, LLMTimeout
from furnace.domain.text import split_paragraphs
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.writing_text import count_emoji
from furnace.llm.seam import TaskKind
from furnace.writing.content import generate_content
from furnace.writing.revision import (
    DROP_PENDING,
    Step,
    diff_versions,
    is_drop_request,
    pending_suggestions,
    revise,
    rollback,
)


def _piece(store, contents, engine, clock, persona="skin-advisor", topic="夏季防晒推荐"):
    content, v1 = generate_content(store, contents, engine, persona_id=persona, topic=topic, clock=clock)
    return content, v1


def _failing(engine, task: TaskKind, error: Exception) -> FakeLLM:
    """The offline engine, except that ``task`` fails."""

    def respond(request):
        if request.task == task:
            raise error
        return engine.complete(request)

    return FakeLLM(respond=respond, model_name=engine.model_name)


@pytest.mark.parametrize("error", [LLMTimeout("slow"), LLMMalformedOutput("bad json"), RuntimeError("boom")])
def test_edit_failure_keeps_user_message_leaves_content_and_replies_kindly(error, store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    llm = _failing(engine, TaskKind.REVISE, error)
    outcome = revise(store, contents, llm, content.id, "太正式了，活泼点", clock=clock)
    assert outcome.status == "failed"
    assert outcome.steps == (Step.SESSION, Step.USER_MESSAGE)
    assert contents.versions(content.id) == [v1]
    assert contents.revisions(content.id) == []
    messages = contents.messages(outcome.user_message.session_id)
    assert [(m.role, m.kind) for m in messages] == [
        ("system", "welcome"),
        ("user", "suggestion"),
        ("assistant", "failure"),
    ]
    assert messages[1].content == "太正式了，活泼点"
    assert "抱歉" in messages[2].content and "V1" in messages[2].content and "再发一次即可重试" in messages[2].content
    assert "这 1 条建议仍待修改：「太正式了，活泼点」" in messages[2].content
    assert store.get_elixir("skin-advisor").version == 1
    # nothing of the batch was saved, so it stays pending: sending it again retries it, once
    assert outcome.pending == ("太正式了，活泼点",)
    ok = revise(store, contents, engine, content.id, "太正式了，活泼点", clock=clock)
    assert ok.status == "revised" and ok.revision.suggestions == ("太正式了，活泼点",)


def test_malformed_structured_output_is_an_edit_failure(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    llm = FakeLLM([{"title": "", "body": "x"}])
    outcome = revise(store, contents, llm, content.id, "加一个 emoji", clock=clock)
    assert outcome.status == "failed" and contents.get_version(content.id) == v1


def test_extraction_failure_is_a_warning_and_never_touches_the_revision(store, contents, engine, clock, caplog):
    content, v1 = _piece(store, contents, engine, clock)
    llm = _failing(engine, TaskKind.EXTRACT_PREFERENCES, LLMTimeout("extraction timed out"))
    with caplog.at_level(logging.WARNING, logger="furnace.writing.revision"):
        outcome = revise(store, contents, llm, content.id, "太正式了，活泼点", clock=clock)
    assert outcome.status == "revised" and outcome.learned is None
    assert Step.EXTRACT not in outcome.steps
    assert "preference extraction" in caplog.text and outcome.revision.id in caplog.text
    assert contents.get_version(content.id).version == 2
    assert contents.get_revision(outcome.revision.id) == outcome.revision
    assert store.get_elixir("skin-advisor").version == 1  # persona untouched
    assert not contents.is_processed(outcome.revision.id)  # left for the batch flow


def test_no_regenerate_collects_suggestions_applied_together_next_time(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    noted = revise(store, contents, engine, content.id, "太正式了，活泼点", regenerate=False, clock=clock)
    assert noted.status == "noted" and noted.pending == ("太正式了，活泼点",)
    assert contents.versions(content.id) == [v1]
    noted2 = revise(store, contents, engine, content.id, "第三段太长，缩短一点", regenerate=False, clock=clock)
    assert noted2.pending == ("太正式了，活泼点", "第三段太长，缩短一点") and "2" in noted2.reply.content
    done = revise(store, contents, engine, content.id, "加一个 emoji", clock=clock)
    assert done.status == "revised"
    assert done.revision.suggestions == ("太正式了，活泼点", "第三段太长，缩短一点", "加一个 emoji")
    v2 = contents.get_version(content.id)
    assert v2.version == 2 and count_emoji(v2.body) == 1
    assert len(split_paragraphs(v2.body)[2]) < len(split_paragraphs(v1.body)[2])
    assert done.reply.content.startswith("V1→V2")
    prefs = {p.dimension: p.value for p in store.get_elixir("skin-advisor").style_preferences}
    assert prefs == {"tone": "lively", "length": "concise", "emoji": "more"}
    assert pending_suggestions(contents.messages(done.user_message.session_id)) == []


def test_a_failed_batch_keeps_every_pending_suggestion_until_they_are_dropped(store, contents, engine, clock):
    """The user's report: two noted suggestions and a third sent with an edit; one of them cannot be done
    (the piece has no hashtags). Nothing is saved, and nothing of the batch is lost either."""
    content, v1 = _piece(store, contents, engine, clock, persona="skin-advisor-en", topic="summer sunscreen")
    revise(store, contents, engine, content.id, "shorter intro", regenerate=False, clock=clock)
    revise(store, contents, engine, content.id, "remove the hashtags", regenerate=False, clock=clock)
    failed = revise(store, contents, engine, content.id, "make the title a question", clock=clock)
    assert failed.status == "failed" and failed.reply.content.startswith("Not done")
    assert contents.versions(content.id) == [v1] and contents.revisions(content.id) == []
    batch = ["shorter intro", "remove the hashtags", "make the title a question"]
    session_id = failed.user_message.session_id
    assert pending_suggestions(contents.messages(session_id)) == batch
    assert failed.pending == tuple(batch)
    reply = failed.reply.content
    assert 'Still pending (3): "shorter intro"; "remove the hashtags"; "make the title a question"' in reply
    assert f'send "{DROP_PENDING["en"]}" to drop them' in reply

    # the next edit still carries the whole batch (and fails again for the same reason)
    again = revise(store, contents, engine, content.id, "add an emoji", clock=clock)
    assert again.status == "failed" and again.pending == (*batch, "add an emoji")
    # dropping them is said and closes the batch; the user notes again what can be done
    dropped = revise(store, contents, engine, content.id, "drop the pending suggestions", clock=clock)
    assert dropped.status == "unchanged" and dropped.reply.content.startswith("Dropped 4 pending suggestion(s):")
    assert pending_suggestions(contents.messages(session_id)) == []
    revise(store, contents, engine, content.id, "shorter intro", regenerate=False, clock=clock)
    done = revise(store, contents, engine, content.id, "make the title a question", clock=clock)
    assert done.status == "revised" and done.revision.suggestions == ("shorter intro", "make the title a question")
    assert done.version.version == 2 and done.version.title.endswith("?")
    assert pending_suggestions(contents.messages(session_id)) == []


@pytest.mark.parametrize(
    ("text", "drop"),
    [
        ("drop the pending suggestions", True),
        ("Clear pending.", True),
        ("forget all my pending suggestions", True),
        ("清空待改建议", True),
        ("请放弃所有待改建议。", True),
        ("drop the last paragraph", False),
        ("删掉最后一段", False),
        ("remove the pending tone", False),
    ],
)
def test_only_a_request_to_drop_the_pending_suggestions_drops_them(text, drop):
    assert is_drop_request(text) is drop


def test_unrecognised_suggestion_changes_nothing_and_says_so(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock, persona="skin-advisor-en", topic="summer sunscreen")
    outcome = revise(store, contents, engine, content.id, "make it sing like a whale", clock=clock)
    assert outcome.status == "failed"
    assert contents.versions(content.id) == [v1] and contents.revisions(content.id) == []
    reply = outcome.reply.content
    assert reply.startswith("Not done; the text is still V1") and 'Not understood: "make it sing like a whale"' in reply
    assert "Edits I can make:" in reply and "less like an ad" in reply


def test_empty_suggestion_is_an_input_error(store, contents, engine, clock):
    content, _ = _piece(store, contents, engine, clock)
    with pytest.raises(InputError):
        revise(store, contents, engine, content.id, "   ", clock=clock)


def test_diff_and_rollback_as_a_new_version(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock, persona="skin-advisor-en", topic="summer sunscreen")
    revise(store, contents, engine, content.id, "too formal, make it livelier", clock=clock)
    revise(store, contents, engine, content.id, "add an emoji", clock=clock)
    v2, v3 = contents.get_version(content.id, 2), contents.get_version(content.id, 3)
    diff = diff_versions(v1, v2, "en")
    text = diff.render()
    assert text.startswith("V1 → V2")
    assert "[-In conclusion, -]{+All in all, +}" in text
    assert diff.added_words > 0 and diff.removed_words > 0
    emoji_diff = diff_versions(v2, v3, "en").render()
    assert "☀️+}" in emoji_diff and emoji_diff.count("\n~ ") == 1 and "\n- " not in emoji_diff
    back = rollback(contents, content.id, 1, clock=clock)
    assert back.version == 4 and (back.title, back.body) == (v1.title, v1.body) and back.source == "rollback"
    assert [v.version for v in contents.versions(content.id)] == [1, 2, 3, 4]
    last = contents.messages(contents.get_session(content.id).id)[-1]
    assert last.kind == "rollback" and last.content.startswith("V3→V4")
    with pytest.raises(InputError):
        rollback(contents, content.id, 4, clock=clock)


def test_zh_diff_is_character_level(store, contents, engine, clock):
    content, v1 = _piece(store, contents, engine, clock)
    revise(store, contents, engine, content.id, "第三段太长，缩短一点", clock=clock)
    diff = diff_versions(v1, contents.get_version(content.id), "zh")
    changed = [line for line in diff.lines if not line.startswith("  ")]
    assert len(changed) == 1 and changed[0].startswith("~ ") and "[-" in changed[0]
    assert diff.added_words == 0 and diff.removed_words > 10


def test_revision_record_version_and_reply_are_one_atomic_write(store, engine, clock, tmp_path, monkeypatch):
    """A failure inside the commit (as if the process died there) leaves none of the three."""
    from furnace.storage.sql.content import SQLContentStore
    from furnace.storage.sql.db import SQLDatabase, sqlite_url

    contents = SQLContentStore(SQLDatabase(sqlite_url(tmp_path), home=tmp_path))  # a home's live store
    content, v1 = generate_content(
        store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock
    )
    insert = SQLContentStore._insert_messages

    def dying(conn, messages):
        """Dies when the assistant reply of a revision is inserted (after its version and record)."""
        if any(m.kind == "revision" for m in messages):
            raise KeyboardInterrupt("process killed")
        return insert(conn, messages)

    with monkeypatch.context() as patch:
        patch.setattr(SQLContentStore, "_insert_messages", staticmethod(dying))
        with pytest.raises(KeyboardInterrupt):
            revise(store, contents, engine, content.id, "加一个 emoji", clock=clock)
    assert contents.versions(content.id) == [v1]
    assert contents.revisions(content.id) == []
    kinds = [m.kind for m in contents.messages(contents.get_session(content.id).id)]
    assert kinds == ["welcome", "suggestion"]  # the user's words survived
    # the retried turn picks the kept suggestion up again
    again = revise(store, contents, engine, content.id, "第三段太长，缩短一点", clock=clock)
    assert again.revision.suggestions == ("加一个 emoji", "第三段太长，缩短一点")


def test_an_edit_racing_another_edit_is_refused_kindly(store, contents, engine, clock):
    from furnace.writing.content import ContentBatch, ContentVersion

    content, v1 = _piece(store, contents, engine, clock)

    def racing(request):
        if request.task == TaskKind.REVISE:  # someone else saves V2 while our model call runs
            contents.commit(
                ContentBatch(
                    version=ContentVersion(
                        content_id=content.id,
                        version=2,
                        title="t",
                        body="b",
                        word_count=1,
                        source="revise",
                        revision_id="rev-elsewhere",
                        created_at=clock(),
                    )
                )
            )
        return engine.complete(request)

    from furnace.llm.fakes import FakeLLM

    outcome = revise(store, contents, FakeLLM(respond=racing), content.id, "加一个 emoji", clock=clock)
    assert outcome.status == "failed" and "V2" in outcome.reply.content and "再发一次" in outcome.reply.content
    assert contents.revisions(content.id) == [] and contents.get_version(content.id).body == "b"


def test_a_withdrawn_persona_cannot_write(store, contents, engine, clock):
    store.delete_elixir("skin-advisor")
    with pytest.raises(InputError, match="withdrawn"):
        _piece(store, contents, engine, clock)


def test_a_ui_can_show_the_message_before_the_edit_runs(store, contents, engine, clock):
    from furnace.writing.revision import finish_turn, start_turn

    content, _ = _piece(store, contents, engine, clock)
    start = start_turn(contents, content.id, "加一个 emoji", clock=clock)
    assert [m.content for m in contents.messages(start.session.id)][-1] == "加一个 emoji"
    assert contents.get_version(content.id).version == 1  # nothing edited yet
    done = finish_turn(store, contents, engine, start, clock=clock)
    assert done.status == "revised" and done.user_message == start.user_message


def test_two_edits_racing_for_one_version_never_merge(store, contents, engine, clock):
    """Both compute V2 from V1; the second must not be taken for a retry of the first."""
    from furnace.writing.revision import finish_turn, start_turn

    content, _ = _piece(store, contents, engine, clock)
    slow = start_turn(contents, content.id, "加一个 emoji", clock=clock)
    others: list = []

    def racing(request):
        if request.task == TaskKind.REVISE and not others:  # another window edits while our model call runs
            others.append(revise(store, contents, engine, content.id, "第三段太长，缩短一点", clock=clock))
        return engine.complete(request)

    from furnace.llm.fakes import FakeLLM

    late = finish_turn(store, contents, FakeLLM(respond=racing), slow, clock=clock)
    [other] = others
    assert other.status == "revised" and late.status == "failed"
    assert [r.id for r in contents.revisions(content.id)] == [other.revision.id]
    assert contents.get_version(content.id).revision_id == other.revision.id
    # the late turn's preferences (extracted while it tried to commit) were dropped with it
    learned_version = other.learned.persona_ref.version if other.learned and other.learned.persona_ref else 1
    assert store.get_elixir("skin-advisor").version == learned_version


def test_a_suggestion_already_applied_by_another_turn_is_not_edited_again(store, contents, engine, clock):
    from furnace.writing.revision import finish_turn, start_turn

    content, _ = _piece(store, contents, engine, clock)
    a = start_turn(contents, content.id, "加一个 emoji", clock=clock)
    b = start_turn(contents, content.id, "第三段太长，缩短一点", clock=clock)
    first = finish_turn(store, contents, engine, a, clock=clock)
    assert first.revision.suggestions == ("加一个 emoji", "第三段太长，缩短一点")
    second = finish_turn(store, contents, FakeLLM(), b, clock=clock)  # no model call
    assert second.status == "unchanged" and "V2" in second.reply.content
    assert len(contents.versions(content.id)) == 2
