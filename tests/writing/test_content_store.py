"""One contract suite for the content stores (in memory, SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime

import pytest

from furnace.domain.errors import NotFound, StoreError
from furnace.writing.content import (
    ChatMessage,
    ChatSession,
    Content,
    ContentBatch,
    ContentVersion,
    RevisionRecord,
    revision_id_for,
    session_id_for,
)
from furnace.writing.content_memory import MemoryContentStore

T0 = datetime(2026, 1, 1, 12, 0, 0)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def cstore(request, tmp_path):
    if request.param == "memory":
        return MemoryContentStore()
    from furnace.storage.sql.content import SQLContentStore
    from tests.storage.postgres import open_sql

    return SQLContentStore(open_sql(request, request.param, tmp_path))


def _content(cid="cnt-1"):
    return Content(id=cid, persona_id="p", persona_version=1, topic="t", language="zh", created_at=T0)


def _version(n, cid="cnt-1", rev=None):
    return ContentVersion(
        content_id=cid,
        version=n,
        title=f"T{n}",
        body=f"正文{n}",
        word_count=3,
        source="generate" if n == 1 else "revise",
        revision_id=rev,
        created_at=T0,
    )


def _record(n, cid="cnt-1"):
    return RevisionRecord(
        id=revision_id_for(cid, n),
        content_id=cid,
        session_id=session_id_for(cid),
        persona_id="p",
        persona_version=1,
        suggestions=("短一点",),
        from_version=n - 1,
        to_version=n,
        original_title=f"T{n - 1}",
        original_body=f"正文{n - 1}",
        revised_title=f"T{n}",
        revised_body=f"正文{n}",
        created_at=T0,
    )


def _msg(text, role="user", kind="suggestion", cid="cnt-1"):
    return ChatMessage(session_id=session_id_for(cid), role=role, kind=kind, content=text, created_at=T0)


def test_versions_sessions_messages_and_revisions_round_trip(cstore):
    cstore.commit(ContentBatch(content=_content(), version=_version(1)))
    session = ChatSession(id=session_id_for("cnt-1"), content_id="cnt-1", persona_id="p", created_at=T0)
    stored = cstore.commit(ContentBatch(session=session, messages=(_msg("hi", "system", "welcome"), _msg("短一点"))))
    assert [(m.seq, m.id) for m in stored] == [(1, "ses-cnt-1-m1"), (2, "ses-cnt-1-m2")]
    rec = _record(2)
    [reply] = cstore.commit(
        ContentBatch(version=_version(2, rev=rec.id), revision=rec, messages=(_msg("V1→V2", "assistant", "revision"),))
    )
    assert reply.seq == 3
    assert cstore.get_content("cnt-1") == _content()
    assert cstore.get_version("cnt-1").version == 2
    assert cstore.get_version("cnt-1", 1) == _version(1)
    assert [v.version for v in cstore.versions("cnt-1")] == [1, 2]
    assert cstore.get_session("cnt-1") == session
    assert [m.content for m in cstore.messages(session.id)] == ["hi", "短一点", "V1→V2"]
    assert cstore.get_revision(rec.id) == rec
    assert cstore.revisions("cnt-1") == [rec]
    assert [c.id for c in cstore.list_contents(persona_id="p")] == ["cnt-1"]


def test_missing_things_raise_not_found(cstore):
    with pytest.raises(NotFound):
        cstore.get_content("nope")
    with pytest.raises(NotFound):
        cstore.get_version("nope")
    with pytest.raises(NotFound):
        cstore.get_revision("nope")
    cstore.commit(ContentBatch(content=_content(), version=_version(1)))
    with pytest.raises(NotFound, match="V7"):
        cstore.get_version("cnt-1", 7)
    assert cstore.get_session("cnt-1") is None


def test_a_conflicting_version_writes_nothing_of_the_batch(cstore):
    cstore.commit(ContentBatch(content=_content(), version=_version(1)))
    rec = _record(2)
    cstore.commit(ContentBatch(version=_version(2, rev=rec.id), revision=rec))
    other = _record(2).model_copy(update={"id": "rev-other"})
    with pytest.raises(StoreError, match="edited meanwhile"):
        cstore.commit(
            ContentBatch(
                version=_version(2, rev="rev-other"), revision=other, messages=(_msg("x", "assistant", "revision"),)
            )
        )
    with pytest.raises(StoreError, match="does not follow"):
        cstore.commit(ContentBatch(version=_version(5)))
    with pytest.raises(NotFound):
        cstore.get_revision("rev-other")
    assert cstore.messages(session_id_for("cnt-1")) == []
    # the very same write again is a no-op
    cstore.commit(ContentBatch(version=_version(2, rev=rec.id), revision=rec))
    assert len(cstore.versions("cnt-1")) == 2


def test_processed_marks_are_idempotent(cstore):
    cstore.commit(ContentBatch(content=_content(), version=_version(1)))
    for n in (2, 3):
        rec = _record(n)
        cstore.commit(ContentBatch(version=_version(n, rev=rec.id), revision=rec))
    assert [r.to_version for r in cstore.unprocessed_revisions()] == [2, 3]
    assert [r.to_version for r in cstore.unprocessed_revisions(limit=1)] == [2]
    assert (
        cstore.mark_processed(
            _record(2).id, persona_id="p", persona_version=2, preferences=[{"dimension": "length"}], status="learned"
        )
        is True
    )
    assert cstore.mark_processed(_record(2).id, persona_id="p", persona_version=3, preferences=[], status="x") is False
    assert cstore.is_processed(_record(2).id) and not cstore.is_processed(_record(3).id)
    assert [r.to_version for r in cstore.unprocessed_revisions()] == [3]
