"""One process drives a run at a time: a second driver is refused before any model call."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from furnace.arena.events import FinalReply
from furnace.arena.lease import Holder, RunBusy
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind
from furnace.storage.sql.arena import SQLArenaStore
from furnace.storage.sql.db import SQLDatabase, sqlite_url

from .helpers import IDS, OPEN, make_arena, named


def _interrupted(store):
    """A run whose consumer died after two of four replies; (arena, llm, run id)."""
    llm = FakeLLM(respond=named)
    arena = make_arena(llm, store=store)
    session = arena.create_session(IDS)
    stream = arena.stream(session.id, OPEN)
    run_id, seen = None, 0
    for event in stream:
        run_id = event.run_id
        if isinstance(event, FinalReply):
            seen += 1
            if seen == 2:
                break
    stream.close()
    llm.calls.clear()
    return arena, llm, run_id


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_run_held_by_a_live_process_is_refused_without_model_calls(store) -> None:
    arena, llm, run_id = _interrupted(store)
    other = Holder(token="other-driver", host=socket.gethostname(), pid=os.getpid())
    assert store.claim_run(run_id, other, 600) is None
    with pytest.raises(RunBusy, match=rf"arena run {run_id} is already running \(process {os.getpid()}"):
        arena.resume(run_id)
    assert llm.calls == []
    assert sorted(store.checkpoints(run_id)) == [0, 1]

    store.release_run(run_id, other)  # the holder finished: the run can be resumed
    assert [r.member_id for r in arena.resume(run_id).replies] == ["cy", "dee"]


def test_a_lease_of_a_dead_process_or_an_expired_one_is_taken_over(store) -> None:
    arena, llm, run_id = _interrupted(store)
    dead = Holder(token="killed-driver", host=socket.gethostname(), pid=_dead_pid())
    assert store.claim_run(run_id, dead, 600) is None
    assert [r.member_id for r in arena.resume(run_id).replies] == ["cy", "dee"]

    arena, llm, run_id = _interrupted(store)
    elsewhere = Holder(token="remote", host="another-machine", pid=os.getpid())
    assert store.claim_run(run_id, elsewhere, -1) is None  # its lease already ran out
    assert [r.member_id for r in arena.resume(run_id).replies] == ["cy", "dee"]


def test_a_lease_from_another_machine_is_respected_until_it_expires(store) -> None:
    arena, llm, run_id = _interrupted(store)
    elsewhere = Holder(token="remote", host="another-machine", pid=1)
    assert store.claim_run(run_id, elsewhere, timedelta(minutes=5).total_seconds()) is None
    with pytest.raises(RunBusy, match="another-machine"):
        arena.resume(run_id)
    assert llm.calls == []


def test_each_drive_releases_its_lease_however_it_ends(store) -> None:
    arena, llm, run_id = _interrupted(store)  # the abandoned stream was closed: its lease is gone
    probe = Holder(token="probe", host="another-machine", pid=1)
    assert store.claim_run(run_id, probe, 600) is None
    store.release_run(run_id, Holder(token="not-the-holder", host="x", pid=1))  # only the holder releases
    assert store.claim_run(run_id, Holder(token="third", host="x", pid=1), 600) == probe
    store.release_run(run_id, probe)
    arena.resume(run_id)
    assert store.claim_run(run_id, probe, 600) is None  # a finished drive left the lease free


def test_a_finished_runs_lease_is_free_even_before_its_release_is_written(store) -> None:
    arena, _, run_id = _interrupted(store)
    arena.resume(run_id)
    assert store.get_run(run_id).status == "finished"
    alive_here = Holder(token="left-behind", host=socket.gethostname(), pid=os.getpid())
    assert store.claim_run(run_id, alive_here, 600) is None  # a lease row no release removed
    # a live holder on this machine, not expired: free only because the run is finished
    assert store.claim_run(run_id, Holder(token="next", host="another-machine", pid=1), 600) is None


def test_a_run_whose_end_was_lost_is_finished_by_resume_without_a_model_call(store) -> None:
    llm = FakeLLM(respond=named)
    arena = make_arena(llm, store=store)
    run_id = arena.say(arena.create_session(IDS).id, OPEN).run_id
    # a crash after the last reply, before the run's end (written behind it) reached the file
    store.set_status(run_id, "running")
    assert store.claim_run(run_id, Holder(token="crashed", host=socket.gethostname(), pid=_dead_pid()), 600) is None
    llm.calls.clear()
    outcome = arena.resume(run_id)
    assert llm.calls == []
    assert outcome.events[-1].skipped_done == 4 and outcome.replies == []
    assert store.get_run(run_id).status == "finished"


def test_the_last_speakers_record_removes_the_lease_row(tmp_path: Path) -> None:
    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)  # a home's live store
    store = SQLArenaStore(db)
    arena = make_arena(FakeLLM(respond=named), store=store)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert store.get_run(outcome.run_id).status == "finished"
    # written behind the turn: a read in this process waits for it
    assert db.query("SELECT count(*) FROM arena_leases WHERE run_id = ?", [outcome.run_id]) == [(0,)]


def test_two_concurrent_resumes_of_one_turn_call_each_speaker_once(tmp_path: Path) -> None:
    store = SQLArenaStore(SQLDatabase(sqlite_url(tmp_path), home=tmp_path))  # a home's live store
    arena, _, run_id = _interrupted(store)
    inside, release = threading.Event(), threading.Event()

    def slow(request):
        if request.task is TaskKind.REPLY:
            inside.set()
            release.wait(30)
        return named(request)

    llm = FakeLLM(respond=slow)
    first, second = (
        make_arena(llm, store=store, elixirs=arena.elixirs),
        make_arena(llm, store=store, elixirs=arena.elixirs),
    )
    results: dict[str, object] = {}
    worker = threading.Thread(target=lambda: results.setdefault("first", first.resume(run_id)))
    worker.start()
    assert inside.wait(30)
    with pytest.raises(RunBusy):
        second.resume(run_id)
    release.set()
    worker.join(30)
    replies = [c.inputs["persona"]["id"] for c in llm.calls if c.task is TaskKind.REPLY]
    assert replies == ["cy", "dee"]
    assert [r.speaker_index for r in store.replies(run_id=run_id)] == [0, 1, 2, 3]
