"""A revision round stores the user's words before its edit call and commits the revision before its
extraction call; a failure on either side still leaves nothing half-written."""

from __future__ import annotations

from typing import Any

import pytest

from furnace.domain.errors import StoreError
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind
from furnace.writing.content import generate_content
from furnace.writing.revision import revise


class Watched:
    """The content store, with a hook before each commit."""

    def __init__(self, inner: Any, before_commit: Any) -> None:
        self.inner, self.before_commit = inner, before_commit

    def commit(self, batch: Any) -> Any:
        self.before_commit(batch)
        return self.inner.commit(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_each_write_is_committed_before_the_model_call_that_follows_it(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    happened: list[str] = []

    def before_commit(batch) -> None:
        happened.append("revision" if batch.revision is not None else "+".join(m.role for m in batch.messages))

    def respond(request):
        happened.append(request.task.value)
        return engine.complete(request)

    llm = FakeLLM(respond=respond, model_name=engine.model_name)
    outcome = revise(store, Watched(contents, before_commit), llm, content.id, "加一个 emoji", clock=clock)
    assert happened == ["system+user", TaskKind.REVISE.value, "revision", TaskKind.EXTRACT_PREFERENCES.value]
    assert outcome.status == "revised" and outcome.learned is not None
    assert [m.role for m in contents.messages(outcome.user_message.session_id)] == ["system", "user", "assistant"]
    assert contents.get_version(content.id).version == 2
    assert contents.is_processed(outcome.revision.id)


def test_a_user_message_that_cannot_be_stored_fails_the_turn_with_nothing_written(
    store, contents, engine, clock
) -> None:
    content, v1 = generate_content(
        store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock
    )

    def before_commit(batch) -> None:
        if any(m.role == "user" for m in batch.messages):
            raise StoreError("the disk is full")

    llm = FakeLLM(respond=engine.complete, model_name=engine.model_name)
    with pytest.raises(StoreError, match="disk is full"):
        revise(store, Watched(contents, before_commit), llm, content.id, "加一个 emoji", clock=clock)
    assert contents.versions(content.id) == [v1]
    assert contents.revisions(content.id) == []
    assert contents.get_session(content.id) is None  # the session and its welcome were in the same batch
    assert llm.calls == []  # no model call for a turn whose words could not be kept
    assert store.get_elixir("skin-advisor").version == 1
