"""An in-memory :class:`~furnace.writing.content.ContentStore` for unit tests and benchmarks.

Same rules as the store's (:mod:`furnace.storage.sql.content`): ``commit`` is all-or-nothing (validated first,
then applied under one lock), versions must follow the latest by exactly one,
rows with an existing natural key are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from furnace.domain.errors import NotFound, StoreError
from furnace.domain.guarded import serialized
from furnace.storage.memory import InMemory
from furnace.writing.content import (
    ChatMessage,
    ChatSession,
    Content,
    ContentBatch,
    ContentVersion,
    RevisionRecord,
)


class MemoryContentStore(InMemory):
    """Dict-backed content store; thread-safe."""

    def __init__(self) -> None:
        self._contents: dict[str, Content] = {}
        self._versions: dict[str, list[ContentVersion]] = {}
        self._sessions: dict[str, ChatSession] = {}  # by content id
        self._messages: dict[str, list[ChatMessage]] = {}  # by session id
        self._revisions: dict[str, RevisionRecord] = {}
        self._processed: dict[str, dict[str, Any]] = {}
        self.commits = 0  # observable for tests

    @serialized
    def commit(self, batch: ContentBatch) -> list[ChatMessage]:
        if batch.version is not None:
            existing = self._versions.get(batch.version.content_id, [])
            if batch.content is None and batch.version.content_id not in self._contents:
                raise NotFound(f"no content {batch.version.content_id}")
            if len(existing) >= batch.version.version:
                if existing[batch.version.version - 1].revision_id != batch.version.revision_id:
                    raise StoreError(
                        f"{batch.version.content_id} already has V{batch.version.version}: "
                        "it was edited meanwhile, try again"
                    )
            elif batch.version.version != len(existing) + 1:
                raise StoreError(f"V{batch.version.version} does not follow V{len(existing)}")
        # validated: apply
        if batch.content is not None:
            self._contents.setdefault(batch.content.id, batch.content)
        if batch.session is not None:
            self._sessions.setdefault(batch.session.content_id, batch.session)
        if batch.version is not None:
            versions = self._versions.setdefault(batch.version.content_id, [])
            if len(versions) < batch.version.version:
                versions.append(batch.version)
        if batch.revision is not None:
            self._revisions.setdefault(batch.revision.id, batch.revision)
        stored: list[ChatMessage] = []
        for message in batch.messages:
            log = self._messages.setdefault(message.session_id, [])
            seq = len(log) + 1
            message = message.model_copy(update={"seq": seq, "id": f"{message.session_id}-m{seq}"})
            log.append(message)
            stored.append(message)
        self.commits += 1
        return stored

    @serialized
    def get_content(self, content_id: str) -> Content:
        if content_id not in self._contents:
            raise NotFound(f"no content {content_id!r}")
        return self._contents[content_id]

    @serialized
    def list_contents(self, *, persona_id: str | None = None) -> list[Content]:
        items = [c for c in self._contents.values() if persona_id is None or c.persona_id == persona_id]
        return sorted(items, key=lambda c: (c.created_at, c.id), reverse=True)

    @serialized
    def get_version(self, content_id: str, version: int | None = None) -> ContentVersion:
        versions = self._versions.get(content_id)
        if not versions:
            raise NotFound(f"no content {content_id!r}")
        if version is None:
            return versions[-1]
        if not 1 <= version <= len(versions):
            raise NotFound(f"{content_id} has no V{version} (latest is V{len(versions)})")
        return versions[version - 1]

    @serialized
    def versions(self, content_id: str) -> list[ContentVersion]:
        return list(self._versions.get(content_id, []))

    @serialized
    def get_session(self, content_id: str) -> ChatSession | None:
        return self._sessions.get(content_id)

    @serialized
    def messages(self, session_id: str) -> list[ChatMessage]:
        return list(self._messages.get(session_id, []))

    @serialized
    def get_revision(self, revision_id: str) -> RevisionRecord:
        if revision_id not in self._revisions:
            raise NotFound(f"no revision {revision_id!r}")
        return self._revisions[revision_id]

    @serialized
    def revisions(self, content_id: str) -> list[RevisionRecord]:
        items = [r for r in self._revisions.values() if r.content_id == content_id]
        return sorted(items, key=lambda r: r.to_version)

    @serialized
    def unprocessed_revisions(self, *, limit: int | None = None) -> list[RevisionRecord]:
        items = [r for r in self._revisions.values() if r.id not in self._processed]
        items.sort(key=lambda r: (r.created_at, r.content_id, r.to_version))
        return items[:limit] if limit is not None else items

    @serialized
    def mark_processed(
        self,
        revision_id: str,
        *,
        persona_id: str,
        persona_version: int | None,
        preferences: Sequence[dict[str, Any]],
        status: str,
    ) -> bool:
        if revision_id in self._processed:
            return False
        self._processed[revision_id] = {
            "persona_id": persona_id,
            "persona_version": persona_version,
            "preferences": list(preferences),
            "status": status,
        }
        return True

    @serialized
    def is_processed(self, revision_id: str) -> bool:
        return revision_id in self._processed
