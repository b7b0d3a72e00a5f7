"""``furnace ask`` from the terminal: a scope line, a lead, a table; the lock persists per session."""

from __future__ import annotations

import json
from dataclasses import replace

from furnace.cli import main


def _run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_ask_locks_scope_across_invocations(home, capsys) -> None:
    code, out, err = _run(capsys, "ask", "from now on only the coach persona")
    assert code == 0, err
    assert "I could not read a scope" in out or "can't find" in out  # empty library: nothing to lock to
    code, out, _ = _run(capsys, "ask", "list the personas")
    assert code == 0 and out.startswith("scope: everything")
    code, out, _ = _run(capsys, "ask", "list the personas", "--json")
    events = json.loads(out)
    assert [e["type"] for e in events][0] == "status" and events[-1]["type"] == "done"
    assert events[-1]["result"]["columns"][:2] == ["id", "name"]


def test_ask_lock_and_clear_phrasings_persist_per_session(home, capsys) -> None:
    code, out, err = _run(capsys, "ask", "focus on the last 24 hours from now on", "--session", "s2")
    assert code == 0, err
    assert "Scope locked: time=" in out
    code, out, _ = _run(capsys, "ask", "list the personas", "--session", "s2")
    assert code == 0 and "(locked: time=" in out.splitlines()[0]
    code, out, _ = _run(capsys, "ask", "list the personas")  # another session is not locked
    assert "(not locked)" in out.splitlines()[0]
    code, out, _ = _run(capsys, "ask", "不限了", "--session", "s2")
    assert code == 0 and "已清除范围" in out
    code, out, _ = _run(capsys, "ask", "how many personas are there?", "--session", "s2", "--json")
    events = json.loads(out)
    meta = next(e for e in events if e["type"] == "meta")
    assert meta["intent"] == "count" and meta["confidence"] >= 0.6 and not meta["locked"]
    assert events[-1]["result"]["items"] == [{"what": "personas", "count": 0}]  # an empty library


def test_ask_refuses_a_forged_fitness_naming_the_record(home, capsys) -> None:
    """The assistant's answers from experiment results hold the rows to their keyed seals, as
    ``furnace experiment show`` does: a fitness re-written outside furnace is refused, not reported."""
    from furnace.evolution.records import ExperimentRecord, GenerationRecord
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings
    from tests.storage.old_home import individual

    runtime = Runtime(FurnaceSettings())
    results = runtime.results
    results.start_experiment(ExperimentRecord("exp-1", "small", {"generations": 1}, 7, "offline"))
    child = replace(individual(), operator="mutation")  # a bred agent (best agents leave seeds out)
    results.save_individuals([child])
    results.save_generation(GenerationRecord("exp-1", 0, ("agt-1",), 0.41, 0.41, {"mutation": 1.0}, 3, 1, 90, 0.01))
    runtime.close()

    code, out, err = _run(capsys, "ask", "which agents scored best?", "--json")
    assert code == 0, err
    [row] = json.loads(out)[-1]["result"]["items"]
    assert (row["agent_id"], row["fitness"]) == ("agt-1", 0.41)

    def edit(statement: str) -> None:  # the home's live store, written behind furnace's back
        runtime = Runtime(FurnaceSettings())
        runtime.sql.execute(statement)
        runtime.close()

    edit("UPDATE experiment_individuals SET fitness = 0.999")
    code, out, err = _run(capsys, "ask", "which agents scored best?")
    assert code == 1 and "0.999" not in out
    assert "experiment exp-1: the record of agt-1 (gen 0) does not match its keyed seal" in err
    edit("UPDATE experiment_individuals SET fitness = 0.41")  # as sealed
    assert _run(capsys, "ask", "which agents scored best?")[0] == 0
