"""Arena records: sessions, plans, runs, replies and checkpoints (plain values)."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.canonical import content_key
from furnace.domain.times import UTCStamp

MIN_MEMBERS = 1  # one member = single chat
MAX_MEMBERS = 8

# failed: every planned speaker failed, so the turn has no reply (it ended; resume does not retry)
RunStatus = Literal["running", "finished", "failed", "cancelled"]
SpeakerStatus = Literal["done", "failed"]
PlanSource = Literal["directive", "supervisor", "fallback"]


class ArenaSession(BaseModel):
    """A chat room: members in a fixed order (the first is the primary) and a default model."""

    model_config = ConfigDict(frozen=True)

    id: str
    members: tuple[str, ...] = Field(min_length=MIN_MEMBERS, max_length=MAX_MEMBERS)
    model: str
    title: str = ""
    created_at: UTCStamp | None = None

    @property
    def primary(self) -> str:
        return self.members[0]

    @property
    def single_chat(self) -> bool:
        return len(self.members) == 1


class SpeakerTask(BaseModel):
    """One immutable task in a plan. ``ordinal`` is set for a roll call."""

    model_config = ConfigDict(frozen=True)

    member_id: str
    task: str
    ordinal: int | None = None


class PlanBudget(BaseModel):
    """What a plan may spend: how many speakers, how many tokens each."""

    model_config = ConfigDict(frozen=True)

    max_speakers: int = Field(ge=1, le=MAX_MEMBERS)
    max_tokens: int = Field(default=400, ge=16, le=4000)


class Plan(BaseModel):
    """Who speaks, in which order, with which task. Stored once per run, never re-made."""

    model_config = ConfigDict(frozen=True)

    source: PlanSource
    directive: str
    speakers: tuple[SpeakerTask, ...]
    budget: PlanBudget
    reason: str = ""


class RunRecord(BaseModel):
    """One user turn (``turn`` is numbered by the store when the run starts)."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    session_id: str
    turn: int
    message: str
    directive: str
    plan: Plan | None = None
    status: RunStatus = "running"
    cancel_requested: bool = False
    created_at: UTCStamp | None = None


class ReplyRecord(BaseModel):
    """A final reply, persisted idempotently by ``reply_id``."""

    model_config = ConfigDict(frozen=True)

    reply_id: str
    run_id: str
    session_id: str
    speaker_index: int
    member_id: str
    member_name: str
    member_version: int | None = None
    text: str
    ordinal: int | None = None
    corrected: bool = False
    created_at: UTCStamp | None = None


class Checkpoint(BaseModel):
    """Written after each speaker: the run can resume from the next one."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    speaker_index: int
    status: SpeakerStatus
    reply_id: str | None = None
    error: str | None = None
    attempts: int = 1


class ArenaMessage(BaseModel):
    """One line of a session's transcript (user turn or member reply), for display."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    role: Literal["user", "member"]
    text: str
    member_id: str | None = None
    member_name: str | None = None
    speaker_index: int | None = None
    reply_id: str | None = None


def new_session_id() -> str:
    """A fresh session id."""
    return "ses-" + uuid.uuid4().hex[:12]


def new_run_id() -> str:
    """A fresh run id (one per user turn)."""
    return "run-" + uuid.uuid4().hex[:16]


def reply_id_for(run_id: str, speaker_index: int) -> str:
    """The deterministic reply id of a speaker in a run."""
    return "rep-" + content_key([run_id, speaker_index])[:20]
