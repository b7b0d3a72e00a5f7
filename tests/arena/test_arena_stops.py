"""A cancel or a lost lease stops the turn before a speaker who has not started, and the lease is
claimed once for a turn and renewed only when due."""

from __future__ import annotations

from typing import Any

import pytest

from furnace.arena.events import FinalReply, RunCancelled, SpeakerStarted
from furnace.arena.lease import LEASE_TTL_S, Holder, RunBusy
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind

from .helpers import IDS, OPEN, count, make_arena, named


class Watched:
    """The arena store, with a count of lease claims."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.claims = inner, 0

    def claim_run(self, *args: Any) -> Any:
        self.claims += 1
        return self.inner.claim_run(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_turn_claims_its_lease_once_and_records_every_speaker(store) -> None:
    watched = Watched(store)
    arena = make_arena(FakeLLM(respond=named), store=watched)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert [r.member_id for r in outcome.replies] == IDS
    assert [c.status for c in store.checkpoints(outcome.run_id).values()] == ["done"] * 4
    assert store.get_run(outcome.run_id).status == "finished"
    assert watched.claims == 1  # claimed once for the turn; not renewed before every speaker
    assert store.claim_run(outcome.run_id, Holder.here(), LEASE_TTL_S) is None  # the lease was given back


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
