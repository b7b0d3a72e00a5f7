"""Persona-driven content: pieces (title + body) with a version chain V1, V2, ...

A :class:`Content` item is written by one persona (a library elixir or an
agent's child elixir) on a topic; its text lives in immutable
:class:`ContentVersion` rows. Generation *creates* (GENERATE task, the persona's
rendered prompt — learned preferences included — as the system message);
revisions *edit* (:mod:`furnace.writing.revision`).

Storage is a :class:`ContentStore` (``furnace.storage.sql.content`` in the live
store, :class:`~furnace.writing.content_memory.MemoryContentStore` in memory).
Diff and rollback of versions live in :mod:`furnace.writing.revision`. Its
``commit`` writes a :class:`ContentBatch` atomically: a revision record, the
new version and the assistant message land together or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.agent import AGENT_PREFIX
from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError, LLMMalformedOutput
from furnace.domain.text import word_count
from furnace.domain.times import UTCStamp, utc_now
from furnace.llm.seam import LLM, Completion, LLMRequest, Message, TaskKind
from furnace.llm.structured import parse_reply, schema_of
from furnace.storage.protocols import ContentStore as ContentStore  # declared with every store protocol
from furnace.storage.store import ElixirStore, Origin

Clock = Callable[[], datetime]
VersionSource = Literal["generate", "revise", "rollback"]
Role = Literal["system", "user", "assistant"]


class PieceReply(BaseModel):
    """A written piece as the model returns it."""

    title: str
    body: str


PIECE_SCHEMA: dict[str, Any] = schema_of(PieceReply)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Content(_Frozen):
    """One content item: who writes it, about what. Its text is in the versions."""

    id: str
    persona_id: str
    persona_version: int
    topic: str
    language: Literal["zh", "en"] = "en"
    created_at: UTCStamp


class ContentVersion(_Frozen):
    """One immutable version of a content item's text."""

    content_id: str
    version: int = Field(ge=1)
    title: str
    body: str
    word_count: int
    source: VersionSource = "generate"
    revision_id: str | None = None
    note: str = ""
    created_at: UTCStamp

    @property
    def label(self) -> str:
        return f"V{self.version}"


class ChatSession(_Frozen):
    """The revision chat of one content item (one session per item)."""

    id: str
    content_id: str
    persona_id: str
    created_at: UTCStamp


MessageKind = Literal["welcome", "suggestion", "noted", "revision", "unchanged", "failure", "rollback"]


class ChatMessage(_Frozen):
    """A light chat message; ``seq`` and ``id`` are assigned by the store on commit."""

    session_id: str
    role: Role
    kind: MessageKind
    content: str
    revision_id: str | None = None
    seq: int = 0
    id: str = ""
    created_at: UTCStamp


class RevisionRecord(_Frozen):
    """A heavy revision record: the suggestion(s) and the exact text before and after."""

    id: str
    content_id: str
    session_id: str
    persona_id: str
    persona_version: int
    suggestions: tuple[str, ...]
    from_version: int
    to_version: int
    original_title: str
    original_body: str
    revised_title: str
    revised_body: str
    model: str = ""
    created_at: UTCStamp

    @property
    def suggestion(self) -> str:
        """All suggestions of this edit as one line."""
        return " / ".join(self.suggestions)


class ContentBatch(_Frozen):
    """What one atomic ``ContentStore.commit`` writes (any subset)."""

    content: Content | None = None
    session: ChatSession | None = None
    version: ContentVersion | None = None
    revision: RevisionRecord | None = None
    messages: tuple[ChatMessage, ...] = ()


# --- counting and ids -------------------------------------------------------


def session_id_for(content_id: str) -> str:
    """The one chat session of a content item."""
    return f"ses-{content_id}"


def revision_id_for(content_id: str, to_version: int, edit_key: str = "") -> str:
    """A revision's natural key: the version it produced and what the edit was.

    ``edit_key`` (a digest of suggestions and revised text) tells two different
    edits racing for the same version apart, while the very same write retried
    keeps its id (and stays a no-op).
    """
    return f"rev-{content_id}-v{to_version}" + (f"-{edit_key[:8]}" if edit_key else "")


def new_content_id() -> str:
    """A fresh content id."""
    return "cnt-" + uuid.uuid4().hex[:12]


# --- personas ---------------------------------------------------------------


def persona_origin(persona_id: str) -> Origin:
    """Agents' child elixirs are stored under the agent id with origin ``agent``."""
    return "agent" if persona_id.startswith(AGENT_PREFIX) else "library"


def load_persona(store: ElixirStore, persona_id: str) -> Elixir:
    """The latest version of a library elixir or an agent's child elixir (not a withdrawn one)."""
    persona = store.get_elixir(persona_id)
    if persona.withdrawn:
        raise InputError(
            f"persona {persona_id} v{persona.version} is withdrawn; it cannot write new content", field="persona"
        )
    return persona


# --- generation -------------------------------------------------------------


def build_generate_request(persona: Elixir, topic: str, *, seed: int = 0) -> LLMRequest:
    """The GENERATE request: the persona's rendered prompt creates a piece on ``topic``."""
    from furnace.domain.render import render_prompt

    if persona.language == "zh":
        task = (
            f"请以你的身份写一篇关于「{topic}」的文章：一个标题，正文分若干段。"
            '遵守上面的所有约束与习得偏好。以 JSON 返回 {"title": ..., "body": ...}，段落之间空一行。'
        )
    else:
        task = (
            f'Write a piece on the topic "{topic}" in your voice: a title and a body of several '
            "paragraphs. Keep every constraint and learned preference above. Answer as JSON "
            '{"title": ..., "body": ...}, paragraphs separated by a blank line.'
        )
    return LLMRequest(
        task=TaskKind.GENERATE,
        messages=(Message(role="system", content=render_prompt(persona)), Message(role="user", content=task)),
        temperature=0.7,
        seed=seed,
        json_schema=PIECE_SCHEMA,
        inputs={"persona": persona.model_dump(mode="json"), "topic": topic, "language": persona.language},
    )


def parse_piece(parsed: Any, text: str = "", *, model: str = "model") -> tuple[str, str]:
    """Title and body from a structured answer; raises LLMMalformedOutput when unusable."""
    piece = parse_reply(Completion(text=text or "", parsed=parsed, model=model), PieceReply, task="piece")
    if not piece.title.strip() or not piece.body.strip():
        raise LLMMalformedOutput("the model returned an empty title or body")
    return piece.title.strip(), piece.body.strip()


def generate_content(
    store: ElixirStore,
    content_store: ContentStore,
    llm: LLM,
    *,
    persona_id: str,
    topic: str,
    seed: int = 0,
    content_id: str | None = None,
    clock: Clock = utc_now,
) -> tuple[Content, ContentVersion]:
    """Write V1 of a new content item on ``topic`` in the persona's voice."""
    topic = topic.strip()
    if not topic:
        raise InputError("topic must not be empty", field="topic")
    persona = load_persona(store, persona_id)
    completion = llm.complete(build_generate_request(persona, topic, seed=seed))
    title, body = parse_piece(completion.parsed, completion.text, model=completion.model)
    now = clock()
    content = Content(
        id=content_id or new_content_id(),
        persona_id=persona.id,
        persona_version=persona.version,
        topic=topic,
        language=persona.language,
        created_at=now,
    )
    version = ContentVersion(
        content_id=content.id,
        version=1,
        title=title,
        body=body,
        word_count=word_count(body, persona.language),
        source="generate",
        created_at=now,
    )
    content_store.commit(ContentBatch(content=content, version=version))
    return content, version


# --- chat sessions ----------------------------------------------------------

_WELCOME = {
    "zh": "你好！我是这篇《{title}》的修改助手。告诉我哪里想改（比如“太正式了，活泼点”），我会只改你说的地方。",
    "en": 'Hi! I\'m the revision assistant for "{title}". Tell me what to change (e.g. "too formal, make it '
    "livelier\") and I'll change only that.",
}


def open_session(
    content_store: ContentStore, content: Content, now: datetime
) -> tuple[ChatSession, ChatSession | None, tuple[ChatMessage, ...]]:
    """Get or create the content's chat session.

    Returns ``(session, new_session, welcome)``: for an existing session
    ``new_session`` is None and ``welcome`` empty; otherwise both are to be
    written in the caller's batch (creation = session + system welcome message).
    """
    session = content_store.get_session(content.id)
    if session is not None:
        return session, None, ()
    session = ChatSession(
        id=session_id_for(content.id), content_id=content.id, persona_id=content.persona_id, created_at=now
    )
    title = content_store.get_version(content.id, 1).title
    welcome = ChatMessage(
        session_id=session.id,
        role="system",
        kind="welcome",
        content=_WELCOME[content.language].format(title=title),
        created_at=now,
    )
    return session, session, (welcome,)


# --- text helpers -----------------------------------------------------------


def preview(text: str, limit: int = 200) -> str:
    """The first ``limit`` characters of ``text`` on one line (… when cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


__all__ = [
    "ChatMessage",
    "ChatSession",
    "Content",
    "ContentBatch",
    "ContentStore",
    "ContentVersion",
    "RevisionRecord",
    "build_generate_request",
    "generate_content",
    "open_session",
    "parse_piece",
    "preview",
    "word_count",
]
