"""Contents, versions, revision chat and preference marks in the relational store
(:class:`furnace.writing.content.ContentStore`).

A batch is one transaction. A new content version must follow the stored latest (checked inside the
transaction: two concurrent edits of one item cannot both win; on PostgreSQL the loser collides on
``(content_id, version)``); message ``seq`` is assigned inside the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from furnace.domain.errors import NotFound, StoreError
from furnace.domain.times import utc_now
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import (
    chat_messages,
    chat_sessions,
    content_versions,
    contents,
    processed_revisions,
    revisions,
)
from furnace.writing.content import ChatMessage, ChatSession, Content, ContentBatch, ContentVersion, RevisionRecord

_V = content_versions.c
_M = chat_messages.c
_R = revisions.c
_CONTENT_COLS = ("id", "persona_id", "persona_version", "topic", "language", "created_at")
_VERSION_COLS = ("content_id", "version", "title", "body", "word_count", "source", "revision_id", "note", "created_at")
_MESSAGE_COLS = ("id", "session_id", "seq", "role", "kind", "content", "revision_id", "created_at")
_REVISION_COLS = tuple(c.name for c in revisions.columns)


def _naive(value: Any) -> Any:
    return value.replace(tzinfo=None) if getattr(value, "tzinfo", None) is not None else value


def _content_row(c: Content) -> dict[str, Any]:
    return {name: _naive(getattr(c, name)) for name in _CONTENT_COLS}


def _session_row(s: ChatSession) -> dict[str, Any]:
    return {"id": s.id, "content_id": s.content_id, "persona_id": s.persona_id, "created_at": _naive(s.created_at)}


def _version_row(v: ContentVersion) -> dict[str, Any]:
    return {name: _naive(getattr(v, name)) for name in _VERSION_COLS}


def _revision_row(r: RevisionRecord) -> dict[str, Any]:
    row = {name: _naive(getattr(r, name)) for name in _REVISION_COLS}
    row["suggestions"] = json.dumps(list(r.suggestions), ensure_ascii=False)
    return row


def _message_row(m: ChatMessage) -> dict[str, Any]:
    return {name: _naive(getattr(m, name)) for name in _MESSAGE_COLS}


def _by_session(messages: Sequence[ChatMessage]) -> dict[str, list[ChatMessage]]:
    """``messages`` by session, in the order each session first appears."""
    out: dict[str, list[ChatMessage]] = {}
    for m in messages:
        out.setdefault(m.session_id, []).append(m)
    return out


# the statements of a batch, built once (SQLAlchemy memoizes a statement's cache key on the object: compiled
# ahead of the transaction and run in it, the key is made once)
_SESSION_OF = select(chat_sessions.c.id).where(
    (chat_sessions.c.id == bindparam("id")) | (chat_sessions.c.content_id == bindparam("content_id"))
)
_CONTENT_OF = select(contents.c.id).where(contents.c.id == bindparam("content_id"))
_LATEST_OF = select(func.coalesce(func.max(_V.version), 0)).where(_V.content_id == bindparam("content_id"))
_LAST_SEQ = select(func.coalesce(func.max(_M.seq), 0)).where(_M.session_id == bindparam("session_id"))
_INSERT_SESSION = chat_sessions.insert()
_INSERT_VERSION = content_versions.insert()
_INSERT_MESSAGES = chat_messages.insert()


def _revision(row: Any) -> RevisionRecord:
    data = dict(row._mapping)
    data["suggestions"] = tuple(json.loads(data["suggestions"]))
    return RevisionRecord.model_validate(data)


class SQLContentStore:
    """Contents, versions, chat sessions, messages, revisions and processed marks."""

    def __init__(self, db: SQLDatabase) -> None:
        self.db = db

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/store.md)."""
        self.db.snapshot_soon()

    # --- writes --------------------------------------------------------------------------------------

    def commit(self, batch: ContentBatch) -> list[ChatMessage]:
        """Write the batch in one transaction; returns the messages with ``seq``/``id``."""
        if self.db.dialect == "sqlite" and not self.db.in_transaction:
            self._compile_ahead(batch)
        return self.db.write(lambda conn: self._commit(conn, batch))

    def _compile_ahead(self, batch: ContentBatch) -> None:
        """Compile the statements ``_commit`` runs for ``batch`` before its transaction takes SQLite's write
        lock (:meth:`SQLDatabase.compile_ahead`)."""
        db = self.db
        if batch.content is not None:
            db.compile_ahead(db.insert_if_absent(contents), _content_row(batch.content))
        if batch.session is not None:
            s = batch.session
            db.compile_ahead(_SESSION_OF, {"id": s.id, "content_id": s.content_id})
            db.compile_ahead(_INSERT_SESSION, _session_row(s))
        if batch.version is not None:
            v = batch.version
            if batch.content is None:
                db.compile_ahead(_CONTENT_OF, {"content_id": v.content_id})
            db.compile_ahead(_LATEST_OF, {"content_id": v.content_id})
            db.compile_ahead(_INSERT_VERSION, _version_row(v))
        if batch.revision is not None:
            db.compile_ahead(db.insert_if_absent(revisions), _revision_row(batch.revision))
        for session_id, messages in _by_session(batch.messages).items():
            db.compile_ahead(_LAST_SEQ, {"session_id": session_id})
            db.compile_ahead(_INSERT_MESSAGES, [_message_row(m) for m in messages])

    def _commit(self, conn: Connection, batch: ContentBatch) -> list[ChatMessage]:
        if batch.content is not None:
            conn.execute(self.db.insert_if_absent(contents), _content_row(batch.content))
        if batch.session is not None:
            s = batch.session
            if conn.execute(_SESSION_OF, {"id": s.id, "content_id": s.content_id}).first() is None:
                conn.execute(_INSERT_SESSION, _session_row(s))
        if batch.version is not None:
            self._insert_version(conn, batch.version, has_content=batch.content is not None)
        if batch.revision is not None:
            conn.execute(self.db.insert_if_absent(revisions), _revision_row(batch.revision))
        stored: list[ChatMessage] = []
        for messages in _by_session(batch.messages).values():
            stored += self._insert_messages(conn, messages)
        return stored

    @staticmethod
    def _insert_messages(conn: Connection, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Append messages of one session: ``seq`` continues the session's last one."""
        if not messages:
            return []
        base = conn.execute(_LAST_SEQ, {"session_id": messages[0].session_id}).scalar()
        out = [
            m.model_copy(update={"seq": int(base or 0) + i, "id": f"{m.session_id}-m{int(base or 0) + i}"})
            for i, m in enumerate(messages, 1)
        ]
        conn.execute(_INSERT_MESSAGES, [_message_row(m) for m in out])
        return out

    @staticmethod
    def _insert_version(conn: Connection, v: ContentVersion, *, has_content: bool) -> None:
        if not has_content and conn.execute(_CONTENT_OF, {"content_id": v.content_id}).first() is None:
            raise NotFound(f"no content {v.content_id!r}")
        latest = int(conn.execute(_LATEST_OF, {"content_id": v.content_id}).scalar() or 0)
        if latest >= v.version:
            rev = conn.execute(
                select(_V.revision_id).where(_V.content_id == v.content_id, _V.version == v.version)
            ).scalar()
            if rev != v.revision_id:
                raise StoreError(f"{v.content_id} already has V{v.version}: it was edited meanwhile, try again")
            return  # the same write again: idempotent
        if v.version != latest + 1:
            raise StoreError(f"V{v.version} does not follow V{latest} of {v.content_id}")
        conn.execute(_INSERT_VERSION, _version_row(v))

    def mark_processed(
        self,
        revision_id: str,
        *,
        persona_id: str,
        persona_version: int | None,
        preferences: Sequence[dict[str, Any]],
        status: str,
    ) -> bool:
        """Mark a revision as processed (idempotent, one transaction); False when it already was."""
        row = {
            "revision_id": revision_id,
            "persona_id": persona_id,
            "persona_version": persona_version,
            "preferences": json.dumps(list(preferences), ensure_ascii=False),
            "status": status,
            "processed_at": utc_now(),
        }
        statement = (
            self.db.insert(processed_revisions).on_conflict_do_nothing().returning(processed_revisions.c.revision_id)
        )
        return bool(self.db.write(lambda conn: conn.execute(statement, row).all()))

    # --- reads ---------------------------------------------------------------------------------------

    def get_content(self, content_id: str) -> Content:
        rows = self.db.query(select(contents).where(contents.c.id == content_id))
        if not rows:
            raise NotFound(f"no content {content_id!r}")
        return Content.model_validate(dict(zip(_CONTENT_COLS, rows[0], strict=True)))

    def list_contents(self, *, persona_id: str | None = None) -> list[Content]:
        query = select(contents).order_by(contents.c.created_at.desc(), contents.c.id.desc())
        if persona_id:
            query = query.where(contents.c.persona_id == persona_id)
        return [Content.model_validate(dict(zip(_CONTENT_COLS, r, strict=True))) for r in self.db.query(query)]

    def _version(self, row: Sequence[Any]) -> ContentVersion:
        return ContentVersion.model_validate(dict(zip(_VERSION_COLS, row, strict=True)))

    def get_version(self, content_id: str, version: int | None = None) -> ContentVersion:
        query = select(content_versions).where(_V.content_id == content_id)
        if version is None:
            rows = self.db.query(query.order_by(_V.version.desc()).limit(1))
            if not rows:
                raise NotFound(f"no content {content_id!r}")
            return self._version(rows[0])
        rows = self.db.query(query.where(_V.version == version))
        if rows:
            return self._version(rows[0])
        latest = self.db.query(select(func.max(_V.version)).where(_V.content_id == content_id))[0][0]
        if latest is None:
            raise NotFound(f"no content {content_id!r}")
        raise NotFound(f"{content_id} has no V{version} (latest is V{latest})")

    def versions(self, content_id: str) -> list[ContentVersion]:
        rows = self.db.query(select(content_versions).where(_V.content_id == content_id).order_by(_V.version))
        return [self._version(r) for r in rows]

    def get_session(self, content_id: str) -> ChatSession | None:
        rows = self.db.query(select(chat_sessions).where(chat_sessions.c.content_id == content_id))
        if not rows:
            return None
        return ChatSession.model_validate(
            dict(zip(("id", "content_id", "persona_id", "created_at"), rows[0], strict=True))
        )

    def messages(self, session_id: str) -> list[ChatMessage]:
        rows = self.db.query(select(chat_messages).where(_M.session_id == session_id).order_by(_M.seq))
        return [ChatMessage.model_validate(dict(zip(_MESSAGE_COLS, r, strict=True))) for r in rows]

    def _revisions(self, query: Any) -> list[RevisionRecord]:
        with self.db.connect() as conn:
            return [_revision(r) for r in conn.execute(query)]

    def get_revision(self, revision_id: str) -> RevisionRecord:
        found = self._revisions(select(revisions).where(_R.id == revision_id))
        if not found:
            raise NotFound(f"no revision {revision_id!r}")
        return found[0]

    def revisions(self, content_id: str) -> list[RevisionRecord]:
        return self._revisions(select(revisions).where(_R.content_id == content_id).order_by(_R.to_version))

    def unprocessed_revisions(self, *, limit: int | None = None) -> list[RevisionRecord]:
        done = select(processed_revisions.c.revision_id).where(processed_revisions.c.revision_id == _R.id)
        query = select(revisions).where(~done.exists()).order_by(_R.created_at, _R.content_id, _R.to_version)
        return self._revisions(query.limit(limit) if limit is not None else query)

    def is_processed(self, revision_id: str) -> bool:
        return bool(
            self.db.query(
                select(processed_revisions.c.revision_id).where(processed_revisions.c.revision_id == revision_id)
            )
        )

    def processed(self, revision_id: str) -> dict[str, Any] | None:
        """The processed mark of a revision (persona version written, preferences extracted), if any."""
        with self.db.connect() as conn:
            row = conn.execute(
                select(processed_revisions).where(processed_revisions.c.revision_id == revision_id)
            ).first()
        if row is None:
            return None
        out = dict(row._mapping)
        out["preferences"] = json.loads(out["preferences"])
        return out
