"""The :class:`~furnace.writing.content.ContentStore` on DuckDB (tables from ``0005_content.sql``).

Every write is one short transaction (``Database.transaction``): a revision
record, the new content version and the assistant message are committed
together or not at all. A new version must follow the stored latest by
exactly one (checked inside the transaction), so two concurrent edits of one
item cannot both win. Message ``seq`` is assigned inside the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb

from furnace.domain.errors import NotFound, StoreError
from furnace.storage.duckdb.db import Database
from furnace.writing.content import ChatMessage, ChatSession, Content, ContentBatch, ContentVersion, RevisionRecord

T = TypeVar("T")
Con = duckdb.DuckDBPyConnection

_VERSION_COLS = "content_id, version, title, body, word_count, source, revision_id, note, created_at"
_MESSAGE_COLS = "id, session_id, seq, role, kind, content, revision_id, created_at"
_REVISION_COLS = (
    "id, content_id, session_id, persona_id, persona_version, suggestions, from_version, to_version, "
    "original_title, original_body, revised_title, revised_body, model, created_at"
)


_IMMUTABLE_KEPT = 10_000  # contents and sessions kept in memory per store (cleared when full)


def _row(cols: str, row: Sequence[Any]) -> dict[str, Any]:
    return dict(zip([c.strip() for c in cols.split(",")], row, strict=False))


def _insert_messages(con: Con, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Append messages of one session in one statement: ``seq`` continues the session's last one."""
    if not messages:
        return []
    session_id = messages[0].session_id
    rows = con.execute(
        f"INSERT INTO chat_messages ({_MESSAGE_COLS})"
        " SELECT $session || '-m' || (base + i), $session, base + i, role, kind, content, revision_id, created_at"
        " FROM (SELECT coalesce(max(seq), 0) AS base FROM chat_messages WHERE session_id = $session),"
        " (SELECT unnest($i::INTEGER[]) AS i, unnest($role::VARCHAR[]) AS role, unnest($kind::VARCHAR[]) AS kind,"
        " unnest($content::VARCHAR[]) AS content, unnest($revision::VARCHAR[]) AS revision_id,"
        " unnest($created::TIMESTAMP[]) AS created_at)"
        " RETURNING seq",
        {
            "session": session_id,
            "i": list(range(1, len(messages) + 1)),
            "role": [m.role for m in messages],
            "kind": [m.kind for m in messages],
            "content": [m.content for m in messages],
            "revision": [m.revision_id for m in messages],
            "created": [m.created_at for m in messages],
        },
    ).fetchall()
    base = min(r[0] for r in rows) - 1
    return [
        m.model_copy(update={"seq": base + i, "id": f"{session_id}-m{base + i}"}) for i, m in enumerate(messages, 1)
    ]


def _revision(row: Sequence[Any]) -> RevisionRecord:
    data = _row(_REVISION_COLS, row)
    data["suggestions"] = tuple(json.loads(data["suggestions"]))
    return RevisionRecord.model_validate(data)


@dataclass(frozen=True)
class _Mark:
    """A revision's processed mark (idempotent: a revision marked already keeps its mark)."""

    revision_id: str
    persona_id: str
    persona_version: int | None
    preferences: Sequence[dict[str, Any]]
    status: str

    def insert(self, con: Con) -> list[tuple[Any, ...]]:
        return con.execute(
            "INSERT INTO processed_revisions (revision_id, persona_id, persona_version, preferences, status)"
            " SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM processed_revisions WHERE revision_id = ?)"
            " RETURNING revision_id",
            [
                self.revision_id,
                self.persona_id,
                self.persona_version,
                json.dumps(list(self.preferences), ensure_ascii=False),
                self.status,
                self.revision_id,
            ],
        ).fetchall()


class DuckDBContentStore:
    """Contents, versions, chat sessions, messages, revisions and processed marks in DuckDB."""

    def __init__(self, db: Database, *, conflict_retries: int = 5) -> None:
        self.db = db
        self._conflict_retries = conflict_retries
        # Contents and chat sessions never change once written: a row read outside a transaction (so
        # committed) is kept, and a revision round reads neither again (two statements fewer per round).
        self._immutable: dict[tuple[str, str], Content | ChatSession] = {}

    def _remember(self, key: tuple[str, str], row: Content | ChatSession) -> None:
        if self.db.in_transaction:  # it may yet be rolled back
            return
        if len(self._immutable) >= _IMMUTABLE_KEPT:
            self._immutable.clear()
        self._immutable[key] = row

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/storage.md)."""
        from furnace.storage.duckdb import snapshot

        snapshot.request(self.db)

    def _write(self, work: Callable[[Con], T]) -> T:
        return self.db.write(work, retries=self._conflict_retries)

    # --- writes ----------------------------------------------------------

    def commit(self, batch: ContentBatch) -> list[ChatMessage]:
        if (batch.content, batch.session, batch.version, batch.revision) == (None, None, None, None):
            sessions = {m.session_id for m in batch.messages}
            if len(sessions) <= 1:  # messages of one session: one statement, atomic by itself
                return self.db.write_one(
                    lambda con: _insert_messages(con, batch.messages), retries=self._conflict_retries
                )
        return self._write(lambda con: self._commit(con, batch))

    def _commit(self, con: Con, batch: ContentBatch) -> list[ChatMessage]:
        if batch.content is not None:
            c = batch.content
            con.execute(
                "INSERT INTO contents SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM contents WHERE id = ?)",
                [c.id, c.persona_id, c.persona_version, c.topic, c.language, c.created_at, c.id],
            )
        if batch.session is not None:
            s = batch.session
            con.execute(
                "INSERT INTO chat_sessions SELECT ?, ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM chat_sessions WHERE id = ? OR content_id = ?)",
                [s.id, s.content_id, s.persona_id, s.created_at, s.id, s.content_id],
            )
        if batch.version is not None:
            self._insert_version(con, batch.version, has_content=batch.content is not None)
        if batch.revision is not None:
            r = batch.revision
            con.execute(  # (ON CONFLICT DO NOTHING costs ~2.5 ms of CPU more per insert than this guard)
                f"INSERT INTO revisions ({_REVISION_COLS}) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM revisions WHERE id = ?)",
                [
                    r.id,
                    r.content_id,
                    r.session_id,
                    r.persona_id,
                    r.persona_version,
                    json.dumps(list(r.suggestions), ensure_ascii=False),
                    r.from_version,
                    r.to_version,
                    r.original_title,
                    r.original_body,
                    r.revised_title,
                    r.revised_body,
                    r.model,
                    r.created_at,
                    r.id,
                ],
            )
        stored: list[ChatMessage] = []
        for session_id in dict.fromkeys(m.session_id for m in batch.messages):
            stored += _insert_messages(con, [m for m in batch.messages if m.session_id == session_id])
        return stored

    @staticmethod
    def _insert_version(con: Con, v: ContentVersion, *, has_content: bool) -> None:
        # one statement: whether the content exists, its latest version, and the revision of V{v.version}
        [(contents, latest, rev)] = con.execute(
            "SELECT (SELECT count(*) FROM contents WHERE id = $id), coalesce(max(version), 0),"
            " any_value(revision_id) FILTER (WHERE version = $version)"
            " FROM content_versions WHERE content_id = $id",
            {"id": v.content_id, "version": v.version},
        ).fetchall()
        if not has_content and not contents:
            raise NotFound(f"no content {v.content_id!r}")
        if latest >= v.version:
            if rev != v.revision_id:
                raise StoreError(f"{v.content_id} already has V{v.version}: it was edited meanwhile, try again")
            return  # the same write again: idempotent
        if v.version != latest + 1:
            raise StoreError(f"V{v.version} does not follow V{latest} of {v.content_id}")
        con.execute(
            f"INSERT INTO content_versions ({_VERSION_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [v.content_id, v.version, v.title, v.body, v.word_count, v.source, v.revision_id, v.note, v.created_at],
        )

    def mark_processed(
        self,
        revision_id: str,
        *,
        persona_id: str,
        persona_version: int | None,
        preferences: Sequence[dict[str, Any]],
        status: str,
        behind: bool = False,
    ) -> bool:
        mark = _Mark(revision_id, persona_id, persona_version, preferences, status)
        if behind:
            self.db.write_behind(mark.insert, what=f"the processed mark of {revision_id}")
            return True
        return bool(self.db.write_one(mark.insert, retries=self._conflict_retries))

    # --- reads -----------------------------------------------------------

    def get_content(self, content_id: str) -> Content:
        cached = self._immutable.get(("content", content_id))
        if isinstance(cached, Content):
            return cached
        rows = self.db.query(
            "SELECT id, persona_id, persona_version, topic, language, created_at FROM contents WHERE id = ?",
            [content_id],
        )
        if not rows:
            raise NotFound(f"no content {content_id!r}")
        content = Content.model_validate(_row("id, persona_id, persona_version, topic, language, created_at", rows[0]))
        self._remember(("content", content_id), content)
        return content

    def list_contents(self, *, persona_id: str | None = None) -> list[Content]:
        where, params = ("WHERE persona_id = ?", [persona_id]) if persona_id else ("", [])
        rows = self.db.query(
            f"SELECT id, persona_id, persona_version, topic, language, created_at FROM contents "
            f"{where} ORDER BY created_at DESC, id DESC",
            params,
        )
        return [
            Content.model_validate(_row("id, persona_id, persona_version, topic, language, created_at", r))
            for r in rows
        ]

    def get_version(self, content_id: str, version: int | None = None) -> ContentVersion:
        if version is None:
            rows = self.db.query(
                f"SELECT {_VERSION_COLS} FROM content_versions WHERE content_id = ?"
                " QUALIFY version = max(version) OVER ()",  # a third less CPU than ORDER BY … LIMIT 1
                [content_id],
            )
            if not rows:
                raise NotFound(f"no content {content_id!r}")
        else:
            rows = self.db.query(
                f"SELECT {_VERSION_COLS} FROM content_versions WHERE content_id = ? AND version = ?",
                [content_id, version],
            )
            if not rows:
                latest = self.db.query("SELECT max(version) FROM content_versions WHERE content_id = ?", [content_id])
                if latest[0][0] is None:
                    raise NotFound(f"no content {content_id!r}")
                raise NotFound(f"{content_id} has no V{version} (latest is V{latest[0][0]})")
        return ContentVersion.model_validate(_row(_VERSION_COLS, rows[0]))

    def versions(self, content_id: str) -> list[ContentVersion]:
        rows = self.db.query(
            f"SELECT {_VERSION_COLS} FROM content_versions WHERE content_id = ? ORDER BY version", [content_id]
        )
        return [ContentVersion.model_validate(_row(_VERSION_COLS, r)) for r in rows]

    def get_session(self, content_id: str) -> ChatSession | None:
        cached = self._immutable.get(("session", content_id))
        if isinstance(cached, ChatSession):
            return cached
        rows = self.db.query(
            "SELECT id, content_id, persona_id, created_at FROM chat_sessions WHERE content_id = ?", [content_id]
        )
        if not rows:
            return None
        session = ChatSession.model_validate(_row("id, content_id, persona_id, created_at", rows[0]))
        self._remember(("session", content_id), session)
        return session

    def messages(self, session_id: str) -> list[ChatMessage]:
        rows = self.db.query(
            f"SELECT {_MESSAGE_COLS} FROM chat_messages WHERE session_id = ? ORDER BY seq", [session_id]
        )
        return [ChatMessage.model_validate(_row(_MESSAGE_COLS, r)) for r in rows]

    def get_revision(self, revision_id: str) -> RevisionRecord:
        rows = self.db.query(f"SELECT {_REVISION_COLS} FROM revisions WHERE id = ?", [revision_id])
        if not rows:
            raise NotFound(f"no revision {revision_id!r}")
        return _revision(rows[0])

    def revisions(self, content_id: str) -> list[RevisionRecord]:
        rows = self.db.query(
            f"SELECT {_REVISION_COLS} FROM revisions WHERE content_id = ? ORDER BY to_version", [content_id]
        )
        return [_revision(r) for r in rows]

    def unprocessed_revisions(self, *, limit: int | None = None) -> list[RevisionRecord]:
        cols = ", ".join(f"r.{c.strip()}" for c in _REVISION_COLS.split(","))
        sql = (
            f"SELECT {cols} FROM revisions r ANTI JOIN processed_revisions p ON p.revision_id = r.id "
            "ORDER BY r.created_at, r.content_id, r.to_version"
        )
        params: list[Any] = []
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_revision(r) for r in self.db.query(sql, params)]

    def is_processed(self, revision_id: str) -> bool:
        return bool(self.db.query("SELECT 1 FROM processed_revisions WHERE revision_id = ?", [revision_id]))

    def processed(self, revision_id: str) -> dict[str, Any] | None:
        """The processed mark of a revision (persona version written, preferences extracted), if any."""
        rows = self.db.query_dicts("SELECT * FROM processed_revisions WHERE revision_id = ?", [revision_id])
        if not rows:
            return None
        row = rows[0]
        row["preferences"] = json.loads(row["preferences"])
        return row
