"""Each speaker speaks while the one before is recorded; a cancel or a lost lease still stops the turn
before a speaker who has not started, and the lease is renewed only when due."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from furnace.arena.events import FinalReply, RunCancelled, SpeakerStarted
from furnace.arena.lease import LEASE_TTL_S, Holder, RunBusy
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind

from .helpers import IDS, OPEN, count, make_arena, named


class Watched:
    """The arena store, with a hook before each speaker is recorded and a count of lease claims."""

    def __init__(self, inner: Any, before_record: Any = None) -> None:
        self.inner, self.before_record, self.claims = inner, before_record, 0

    def record_speaker(self, checkpoint: Any, reply: Any, **finish: Any) -> bool:
        if self.before_record is not None:
            self.before_record(checkpoint.speaker_index)
        return self.inner.record_speaker(checkpoint, reply, **finish)

    def claim_run(self, *args: Any) -> Any:
        self.claims += 1
        return self.inner.claim_run(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_next_speaker_speaks_while_the_previous_one_is_recorded(store) -> None:
    speaking = {member: threading.Event() for member in IDS}

    def respond(request):
        if request.task is TaskKind.REPLY:
            speaking[request.inputs["persona"]["id"]].set()
        return named(request)

    overlapped: list[bool] = []

    def before_record(index: int) -> None:
        if index + 1 < len(IDS):  # recording speaker i waits until speaker i+1 has begun its call
            overlapped.append(speaking[IDS[index + 1]].wait(30))

    watched = Watched(store, before_record)
    arena = make_arena(FakeLLM(respond=respond), store=watched)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert overlapped == [True, True, True]  # inline, speaker i+1 could not start before i was recorded
    assert [r.member_id for r in outcome.replies] == IDS
    assert [c.status for c in store.checkpoints(outcome.run_id).values()] == ["done"] * 4
    assert store.get_run(outcome.run_id).status == "finished"
    assert watched.claims == 1  # claimed once for the turn; not renewed before every speaker


def test_a_speaker_stopped_by_a_cancel_is_never_announced(store) -> None:
    holder: dict = {}

    def respond(request):
        if request.task is TaskKind.REPLY and request.inputs["persona"]["id"] == "ada":
            holder["arena"].cancel(holder["run_id"])  # arrives while ada speaks
        return named(request)

    llm = FakeLLM(respond=respond)
    arena = holder["arena"] = make_arena(llm, store=store)
    events = []
    for event in arena.stream(arena.create_session(IDS).id, OPEN):
        holder.setdefault("run_id", event.run_id)
        events.append(event)
    assert [e.member_id for e in events if isinstance(e, SpeakerStarted)] == ["ada"]
    assert [e.member_id for e in events if isinstance(e, FinalReply)] == ["ada"]
    assert count(llm.calls, TaskKind.REPLY) == 1  # bo's call was never made
    [cancelled] = [e for e in events if isinstance(e, RunCancelled)]
    assert (cancelled.completed, cancelled.remaining) == (1, 3)


def test_a_lease_that_is_due_is_renewed_and_a_lost_one_stops_the_turn(store, monkeypatch) -> None:
    import furnace.arena.runner as runner

    now = [1000.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: now[0])
    thief = Holder(token="thief", host="elsewhere", pid=1)

    def respond(request):
        if request.task is TaskKind.REPLY and request.inputs["persona"]["id"] == "bo":
            now[0] += LEASE_TTL_S  # bo took long: the lease is due for renewal, and someone took the run
            store.release_run(holder["run_id"], holder["lease"])
            assert store.claim_run(holder["run_id"], thief, LEASE_TTL_S) is None
        return named(request)

    holder: dict = {}
    watched = Watched(store)
    arena = make_arena(FakeLLM(respond=respond), store=watched)
    events = []
    with pytest.raises(RunBusy, match="elsewhere"):
        for event in arena.stream(arena.create_session(IDS).id, OPEN):
            if "run_id" not in holder:
                holder["run_id"] = event.run_id
                token, host, pid = _lease_of(store, event.run_id)
                holder["lease"] = Holder(token=token, host=host, pid=pid)
            events.append(event)
    assert [e.member_id for e in events if isinstance(e, FinalReply)] == ["ada", "bo"]
    assert watched.claims == 2  # the claim, then the one renewal that was due


def _lease_of(store: Any, run_id: str) -> tuple[str, str, int]:
    probe = Holder(token="probe", host="probe-host", pid=2)
    busy = store.claim_run(run_id, probe, LEASE_TTL_S)
    assert busy is not None
    return busy.token, busy.host, busy.pid


@pytest.mark.parametrize(("message", "first"), [(OPEN, TaskKind.PLAN), ("@all count off!", TaskKind.REPLY)])
def test_a_new_run_is_stored_while_its_first_call_runs(store, message: str, first: TaskKind) -> None:
    """The supervisor's plan (open discussion) or the first routed speaker starts before the run row and
    lease are written; those are written while it runs."""
    calling = threading.Event()

    def respond(request):
        if request.task is first:
            calling.set()
        return named(request)

    overlapped: list[bool] = []

    class StoredLate(Watched):
        def start_run(self, run: Any) -> Any:
            overlapped.append(calling.wait(30))  # inline, the call could not start before the run was stored
            return self.inner.start_run(run)

    arena = make_arena(FakeLLM(respond=respond), store=StoredLate(store))
    outcome = arena.say(arena.create_session(IDS).id, message)
    assert overlapped == [True]
    assert [r.member_id for r in outcome.replies] == IDS
    run = store.get_run(outcome.run_id)
    assert (run.status, run.plan, run.turn) == ("finished", outcome.plan, 0)
    assert store.claim_run(run.run_id, Holder.here(), LEASE_TTL_S) is None  # the lease was given back
