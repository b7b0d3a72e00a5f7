"""The CLI end to end (offline engine, the home's live store): count-off, show, and crash + resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from furnace.cli import cli, main
from furnace.domain.elixir import Elixir
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings

from .helpers import IDS, MEMBERS, numbers


def _seed_library(home: Path) -> None:
    runtime = Runtime(FurnaceSettings(home=home))
    for data in MEMBERS:
        runtime.store.save_elixir(Elixir.model_validate(data))
    runtime.close()


def _invoke(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _new_session(home: Path) -> str:
    return json.loads(_invoke(home, "arena", "new", "--members", ",".join(IDS), "--json"))["id"]


def _events(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


@pytest.mark.slow
def test_count_off_from_the_cli(home: Path) -> None:
    _seed_library(home)
    session = _new_session(home)
    out = _invoke(home, "arena", "say", session, "@全体成员 全体都有！报数！")
    lines = out.splitlines()
    replies = [line for line in lines if line.split(":")[0] in {m["name"] for m in MEMBERS}]
    assert [r.split(":")[0] for r in replies] == [m["name"] for m in MEMBERS]
    assert [set(numbers(r.split(":", 1)[1])) for r in replies] == [{1}, {2}, {3}, {4}]
    assert lines[-1] == "done: 4 replies, 0 failed"

    events = _events(_invoke(home, "arena", "say", session, "@all count off!", "--json"))
    finals = [e for e in events if e["type"] == "final_reply"]
    assert [e["member_id"] for e in finals] == IDS and [e["ordinal"] for e in finals] == [1, 2, 3, 4]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"

    shown = json.loads(_invoke(home, "arena", "show", session, "--json"))
    assert [m["role"] for m in shown["messages"]].count("member") == 8
    stamps = re.findall(r'"created_at": "([^"]+)"', json.dumps(shown))
    assert stamps and all(datetime.fromisoformat(s).utcoffset() == timedelta(0) for s in stamps)  # UTC, said
    text = _invoke(home, "arena", "show", session, "--plans")
    assert "plan 4. dee" in text


def test_unknown_member_is_one_clear_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _seed_library(home)
    with pytest.raises(SystemExit) as exit_:
        main(["--home", str(home), "arena", "new", "--members", "ada,ghost"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and "ghost" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_killed_after_speaker_two_resumes_speakers_three_and_four(home: Path) -> None:
    _seed_library(home)
    session = _new_session(home)
    env = {**os.environ, "FURNACE_HOME": str(home), "FURNACE_ARENA_KILL_AFTER": "2", "FURNACE_EMBEDDER": "hash"}
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "furnace"),
            "arena",
            "say",
            session,
            "Any tips for a food trip to Rome on a budget?",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    before = _events(proc.stdout)
    run_id = before[0]["run_id"]
    [plan_event] = [e for e in before if e["type"] == "plan_created"]
    planned = [s["member_id"] for s in plan_event["plan"]["speakers"]]
    assert len(planned) == 4 and plan_event["plan"]["source"] == "supervisor"
    assert [e["member_id"] for e in before if e["type"] == "final_reply"] == planned[:2]
    assert not [e for e in before if e["type"] == "run_finished"]

    runtime = Runtime(FurnaceSettings(home=home))
    db = runtime.sql
    assert db.query("SELECT status FROM arena_runs WHERE run_id = ?", [run_id]) == [("running",)]

    # Resume through the same API the CLI uses, with every model call counted.
    engine = OfflineEngine()
    llm = FakeLLM(respond=engine.complete, model_name=engine.model_name)
    arena = runtime.arena(llm=llm)
    after = [json.loads(e.model_dump_json()) for e in arena.resume(run_id).events]
    assert after[0]["resumed"] is True
    assert [e["reused"] for e in after if e["type"] == "plan_created"] == [True]
    assert [e["member_id"] for e in after if e["type"] == "final_reply"] == planned[2:]
    assert after[-1] == {**after[-1], "type": "run_finished", "replies": 2, "skipped_done": 2}

    rows = db.query("SELECT speaker_index, member_id FROM arena_replies WHERE run_id = ? ORDER BY 1", [run_id])
    assert rows == list(enumerate(planned))
    checkpoints = runtime.arena_store().checkpoints(run_id)
    assert {i: c.status for i, c in checkpoints.items()} == dict.fromkeys(range(4), "done")
    assert db.query("SELECT status FROM arena_runs WHERE run_id = ?", [run_id]) == [("finished",)]
    assert [c.task.value for c in llm.calls] == ["reply", "reply"]  # no second plan; 1 and 2 not asked again
    assert {c.inputs["persona"]["id"] for c in llm.calls} == set(planned[2:])

    again = _events(_invoke(home, "arena", "resume", run_id, "--json"))
    assert [e for e in again if e["type"] == "final_reply"] == []
    assert db.query("SELECT count(*) FROM arena_replies WHERE run_id = ?", [run_id]) == [(4,)]
    runtime.close()


def test_cancel_refuses_a_turn_that_has_ended_and_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from furnace.arena.models import RunRecord

    _seed_library(home)
    session = _new_session(home)
    _invoke(home, "arena", "say", session, "@all count off!")
    [finished] = json.loads(_invoke(home, "arena", "show", session, "--json"))["runs"]
    capsys.readouterr()

    def cancel(run_id: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exit_:
            main(["--home", str(home), "arena", "cancel", run_id])
            raise SystemExit(0)
        out, err = capsys.readouterr()
        return int(exit_.value.code or 0), out, err

    run_id = finished["run_id"]
    assert cancel(run_id) == (1, "", f"error: run {run_id} already finished; nothing to cancel\n")
    [after] = json.loads(_invoke(home, "arena", "show", session, "--json"))["runs"]
    assert after["status"] == "finished" and after["cancel_requested"] is False  # nothing written

    # an interrupted turn (still "running") can be cancelled; once cancelled, cancelling it again is refused
    runtime = Runtime(FurnaceSettings(home=home))
    store = runtime.arena_store()
    store.start_run(RunRecord(run_id="run-open", session_id=session, turn=0, message="hi", directive="open"))
    assert cancel("run-open") == (0, "cancel requested for run-open\n", "")
    assert store.get_run("run-open").cancel_requested is True
    store.set_status("run-open", "cancelled")
    code, out, err = cancel("run-open")
    assert (code, out) == (1, "") and err.startswith("error: run run-open already cancelled; nothing to cancel")
    runtime.close()
