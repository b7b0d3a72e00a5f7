"""Runs: retries and skipped speakers, cancel between speakers, resume, idempotent storage."""

from __future__ import annotations

import threading

import pytest

from furnace.arena.events import ArenaEventAdapter, FinalReply, PlanCreated, RunCancelled, RunStarted, SpeakerFailed
from furnace.arena.models import Checkpoint, ReplyRecord, reply_id_for
from furnace.domain.errors import LLMTimeout, NotFound
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind

from .helpers import IDS, OPEN, count, make_arena, named


def test_a_speaker_that_always_fails_is_skipped_and_reported(store) -> None:
    def respond(request):
        if request.task is TaskKind.REPLY and request.inputs["persona"]["id"] == "bo":
            raise LLMTimeout("bo is unreachable")
        return named(request)

    llm = FakeLLM(respond=respond)
    arena = make_arena(llm, store=store)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert [r.member_id for r in outcome.replies] == ["ada", "cy", "dee"]
    [failure] = outcome.failures
    assert failure.member_id == "bo" and failure.attempts == 1 and "unreachable" in failure.error
    bo_calls = [c for c in llm.calls if c.task is TaskKind.REPLY and c.inputs["persona"]["id"] == "bo"]
    assert len(bo_calls) == 1  # retries live in the model client only; the arena never re-wraps a call
    checkpoints = store.checkpoints(outcome.run_id)
    assert checkpoints[1].status == "failed" and checkpoints[1].reply_id is None
    assert store.get_run(outcome.run_id).status == "finished"


def test_an_empty_reply_fails_the_speaker_without_a_retry_above_the_client() -> None:
    def respond(request):
        if request.task is TaskKind.REPLY and request.inputs["persona"]["id"] == "cy":
            return ""  # an empty reply is malformed output
        return named(request)

    llm = FakeLLM(respond=respond)
    arena = make_arena(llm)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert [f.member_id for f in outcome.failures] == ["cy"]
    assert arena.store.checkpoints(outcome.run_id)[2].attempts == 1
    assert sum(1 for c in llm.calls if c.task is TaskKind.REPLY and c.inputs["persona"]["id"] == "cy") == 1


def test_cancel_lands_between_speakers_never_inside(store) -> None:
    holder: dict = {}

    def respond(request):
        # The cancel arrives while speaker 2 (bo) is mid-reply: bo still finishes.
        if request.task is TaskKind.REPLY and request.inputs["persona"]["id"] == "bo":
            holder["arena"].cancel(holder["run_id"])
        return named(request)

    llm = FakeLLM(respond=respond)
    arena = make_arena(llm, store=store)
    holder["arena"] = arena
    session = arena.create_session(IDS)
    events = []
    for event in arena.stream(session.id, OPEN):
        holder.setdefault("run_id", event.run_id)
        events.append(event)
    replies = [e for e in events if isinstance(e, FinalReply)]
    assert [r.member_id for r in replies] == ["ada", "bo"]
    assert replies[1].text == "Bo says hi"  # the reply in flight was completed, not cut
    [cancelled] = [e for e in events if isinstance(e, RunCancelled)]
    assert (cancelled.completed, cancelled.remaining) == (2, 2)
    run_id = holder["run_id"]
    assert store.get_run(run_id).status == "cancelled"

    # Resume: the remaining speakers only, the stored plan, no second PLAN call.
    llm.calls.clear()
    resumed = arena.resume(run_id)
    assert [r.member_id for r in resumed.replies] == ["cy", "dee"]
    assert count(llm.calls, TaskKind.PLAN) == 0
    assert [e.reused for e in resumed.events if isinstance(e, PlanCreated)] == [True]
    assert len(store.replies(run_id=run_id)) == 4
    assert store.get_run(run_id).status == "finished"


def test_an_interrupted_turn_resumes_without_repeats_or_duplicates(store) -> None:
    llm = FakeLLM(respond=named)
    arena = make_arena(llm, store=store)
    session = arena.create_session(IDS)
    stream = arena.stream(session.id, OPEN)
    run_id, seen = None, 0
    for event in stream:  # the consumer dies after the second reply
        run_id = event.run_id
        if isinstance(event, FinalReply):
            seen += 1
            if seen == 2:
                break
    stream.close()
    assert sorted(store.checkpoints(run_id)) == [0, 1]
    first_plan = store.get_run(run_id).plan

    llm.calls.clear()
    outcome = arena.resume(run_id)
    assert [r.member_id for r in outcome.replies] == ["cy", "dee"]
    assert {c.inputs["persona"]["id"] for c in llm.calls} == {"cy", "dee"}
    assert count(llm.calls, TaskKind.PLAN) == 0
    assert store.get_run(run_id).plan == first_plan
    replies = store.replies(run_id=run_id)
    assert [r.speaker_index for r in replies] == [0, 1, 2, 3]
    assert [r.reply_id for r in replies] == [reply_id_for(run_id, i) for i in range(4)]

    # Resuming a finished run does nothing and writes nothing.
    again = arena.resume(run_id)
    assert again.replies == [] and len(store.replies(run_id=run_id)) == 4


def test_later_speakers_and_turns_see_earlier_replies() -> None:
    llm = FakeLLM(respond=named)
    arena = make_arena(llm)
    session = arena.create_session(IDS)
    arena.say(session.id, OPEN)
    arena.say(session.id, "@Dee and one more thing")
    last = llm.calls[-1]
    contents = [m.content for m in last.messages]
    assert contents[0].startswith(arena.personas(session)["dee"].system_prompt)
    assert "[Ada] Ada says hi" in contents and "Dee says hi" in contents and OPEN in contents
    assert [m.role for m in last.messages if m.content == "Dee says hi"] == ["assistant"]


def test_store_writes_are_idempotent_and_plans_are_set_once(store) -> None:
    arena = make_arena(FakeLLM(respond=named), store=store)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    run_id = outcome.run_id
    reply = store.replies(run_id=run_id)[0]
    store.record_speaker(Checkpoint(run_id=run_id, speaker_index=0, status="done", reply_id=reply.reply_id), reply)
    store.record_speaker(
        Checkpoint(run_id=run_id, speaker_index=0, status="failed"),
        ReplyRecord(**{**reply.model_dump(), "text": "changed"}),
    )
    assert len(store.replies(run_id=run_id)) == 4
    assert store.replies(run_id=run_id)[0].text == reply.text
    assert store.checkpoints(run_id)[0].status == "done"
    assert store.set_plan(run_id, outcome.plan.model_copy(update={"reason": "other"})).plan == outcome.plan
    assert store.get_run(run_id).plan == outcome.plan


def test_stop_and_continue_are_control(store) -> None:
    llm = FakeLLM(respond=named)
    arena = make_arena(llm, store=store)
    session = arena.create_session(IDS)
    stream = arena.stream(session.id, OPEN)
    run_id = next(stream).run_id
    next(stream)  # plan created; the turn is now "running"
    stream.close()  # the process serving it went away
    stop = arena.say(session.id, "停！")
    assert [type(e) for e in stop.events] == [RunCancelled] and stop.run_id == run_id
    assert store.cancel_requested(run_id)
    assert len(store.list_runs(session.id)) == 1  # control makes no run of its own
    cont = arena.say(session.id, "continue")
    assert cont.run_id == run_id
    assert [r.member_id for r in cont.replies] == IDS
    assert count(llm.calls, TaskKind.PLAN) == 1


def test_single_chat_uses_the_same_pipeline_without_a_supervisor() -> None:
    llm = FakeLLM(respond=named)
    arena = make_arena(llm)
    session = arena.create_session(["cy"])
    assert session.single_chat
    outcome = arena.say(session.id, "今天适合买基金吗？")
    assert [r.member_id for r in outcome.replies] == ["cy"]
    assert count(llm.calls, TaskKind.PLAN) == 0
    assert llm.calls[0].task is TaskKind.REPLY


def test_sessions_validate_members() -> None:
    arena = make_arena(FakeLLM())
    with pytest.raises(NotFound):
        arena.create_session(["ada", "ghost"])
    with pytest.raises(Exception, match="repeated"):
        arena.create_session(["ada", "ada"])
    with pytest.raises(Exception, match="1 to 8"):
        arena.create_session([])


def test_messages_and_events_serialise(store) -> None:
    arena = make_arena(FakeLLM(respond=named), store=store)
    session = arena.create_session(IDS[:2])
    outcome = arena.say(session.id, "@all hi")
    messages = arena.messages(session.id)
    assert [(m.role, m.member_id) for m in messages] == [("user", None), ("member", "ada"), ("member", "bo")]
    for event in outcome.events:
        assert ArenaEventAdapter.validate_json(event.model_dump_json()) == event
    assert [type(e).__name__ for e in outcome.events] == [
        "RunStarted",
        "PlanCreated",
        "SpeakerStarted",
        "Delta",
        "FinalReply",
        "SpeakerStarted",
        "Delta",
        "FinalReply",
        "RunFinished",
    ]
    assert not [e for e in outcome.events if isinstance(e, SpeakerFailed)]


def test_a_cancel_during_planning_lands_before_the_first_speaker(store) -> None:
    stop_pressed = threading.Event()

    def respond(request):
        if request.task is TaskKind.PLAN:  # the supervisor is still planning when the user presses stop
            assert stop_pressed.wait(10)
        return named(request)

    llm = FakeLLM(respond=respond)
    arena = make_arena(llm, store=store)
    session = arena.create_session(IDS)

    def on_event(event) -> None:
        if isinstance(event, RunStarted):  # the user sees the run start (and its id) and stops it
            arena.cancel(event.run_id)
            stop_pressed.set()

    outcome = arena.say(session.id, OPEN, on_event=on_event)
    assert outcome.cancelled and outcome.replies == []
    assert count(llm.calls, TaskKind.REPLY) == 0
    assert arena.plan_of(outcome.run_id) == outcome.plan  # the plan is kept for the resume
    assert [r.member_id for r in arena.resume(outcome.run_id).replies] == IDS
    assert count(llm.calls, TaskKind.PLAN) == 1
