"""A turn nobody answered: the run is stored as failed, and the CLI exits 1 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from furnace.arena.events import RunFinished
from furnace.cli import main
from furnace.domain.elixir import Elixir
from furnace.domain.errors import LLMTimeout
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings

from .helpers import IDS, MEMBERS, make_arena

PLAN_TWO = {"speakers": [{"member": "ada", "task": "a"}, {"member": "bo", "task": "b"}], "budget": {"max_speakers": 2}}


def _down(request):
    if request.task is TaskKind.PLAN:
        return PLAN_TWO
    raise LLMTimeout("the model is down")


def _finished(outcome) -> RunFinished:
    [event] = [e for e in outcome.events if isinstance(e, RunFinished)]
    return event


def test_every_speaker_failing_records_the_run_as_failed(store) -> None:
    llm = FakeLLM(respond=_down)
    arena = make_arena(llm, store=store)
    outcome = arena.say(arena.create_session(IDS).id, "Tell me something useful.")
    assert outcome.replies == [] and len(outcome.failures) == 2
    ended = _finished(outcome)
    assert (ended.status, ended.replies, ended.failed) == ("failed", 0, 2)
    assert store.get_run(outcome.run_id).status == "failed"

    calls = len(llm.calls)
    again = arena.resume(outcome.run_id)  # nothing to retry: still failed, no model call
    assert _finished(again).status == "failed" and store.get_run(outcome.run_id).status == "failed"
    assert len(llm.calls) == calls


def test_one_reply_is_enough_for_a_finished_run(store) -> None:
    def one_fails(request):
        if request.task is TaskKind.PLAN:
            return PLAN_TWO
        if request.inputs["persona"]["id"] == "ada":
            raise LLMTimeout("slow")
        return "hello"

    arena = make_arena(FakeLLM(respond=one_fails), store=store)
    outcome = arena.say(arena.create_session(IDS).id, "Tell me something useful.")
    assert (_finished(outcome).status, store.get_run(outcome.run_id).status) == ("finished", "finished")


def test_the_cli_exits_1_with_one_line_when_nobody_replied(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    library = Runtime(FurnaceSettings(home=home))  # the members, in the home's live store
    for data in MEMBERS:
        library.store.save_elixir(Elixir.model_validate(data))
    library.close()
    monkeypatch.setattr(Runtime, "llm", FakeLLM(respond=_down))  # every face's model: one that is down
    main(["--home", str(home), "arena", "new", "--members", ",".join(IDS), "--json"])  # exit 0: returns
    session = json.loads(capsys.readouterr().out)["id"]

    with pytest.raises(SystemExit) as exit_:
        main(["--home", str(home), "arena", "say", session, "@Ada hi"])
    assert exit_.value.code == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no member replied in run run-"), captured.err
    assert "recorded as failed" in err[0]
    assert captured.out.splitlines()[-1] == "failed: 0 replies, 1 failed"

    run_id = err[0].split("run ")[1].split(" ")[0]
    with pytest.raises(SystemExit) as resumed:
        main(["--home", str(home), "arena", "resume", run_id, "--json"])
    assert resumed.value.code == 1
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["status"] == "failed"
