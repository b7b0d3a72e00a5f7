"""Typed events of an arena run, consumable by the CLI and the app.

Every step of a run emits one of these (pydantic models with a ``type``
discriminator, so ``ArenaEventAdapter.validate_json(line)`` reads them back):

``RunStarted`` → ``PlanCreated`` → per speaker ``SpeakerStarted`` → ``Delta``\\* →
``FinalReply`` | ``SpeakerFailed`` → ``RunFinished`` | ``RunCancelled``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from furnace.arena.models import Plan


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    session_id: str


class RunStarted(_Event):
    """A user turn started (or resumed)."""

    type: Literal["run_started"] = "run_started"
    message: str
    directive: str
    resumed: bool = False


class PlanCreated(_Event):
    """The speakers and their tasks. ``reused`` is True when a resume loaded the stored plan."""

    type: Literal["plan_created"] = "plan_created"
    plan: Plan
    reused: bool = False


class SpeakerStarted(_Event):
    """A speaker starts its reply."""

    type: Literal["speaker_started"] = "speaker_started"
    index: int
    member_id: str
    name: str
    task: str
    ordinal: int | None = None


class Delta(_Event):
    """A chunk of a speaker's reply text (the seam is not streaming: one chunk per reply)."""

    type: Literal["delta"] = "delta"
    index: int
    member_id: str
    text: str


class FinalReply(_Event):
    """A speaker's validated, persisted reply."""

    type: Literal["final_reply"] = "final_reply"
    index: int
    member_id: str
    name: str
    reply_id: str
    text: str
    ordinal: int | None = None
    corrected: bool = False


class SpeakerFailed(_Event):
    """A speaker failed after its retries and was skipped; the run goes on."""

    type: Literal["speaker_failed"] = "speaker_failed"
    index: int
    member_id: str
    name: str
    error: str
    attempts: int


class RunFinished(_Event):
    """Every planned speaker has answered or been skipped. ``status`` is the run's, as stored:
    ``failed`` when no speaker of the run replied (in this drive or before it)."""

    type: Literal["run_finished"] = "run_finished"
    replies: int
    failed: int
    skipped_done: int = 0
    status: Literal["finished", "failed"] = "finished"


class RunCancelled(_Event):
    """A cancel landed between speakers."""

    type: Literal["run_cancelled"] = "run_cancelled"
    completed: int
    remaining: int


ArenaEvent = Annotated[
    RunStarted | PlanCreated | SpeakerStarted | Delta | FinalReply | SpeakerFailed | RunFinished | RunCancelled,
    Field(discriminator="type"),
]
ArenaEventAdapter: TypeAdapter[ArenaEvent] = TypeAdapter(ArenaEvent)
