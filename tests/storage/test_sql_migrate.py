"""Moving a DuckDB home into the relational store keeps every row and seal, and refuses a forged one."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.errors import LineageError, SealError
from furnace.evolution.records import ExperimentRecord, IndividualRecord
from furnace.llm.seam import Completion, Usage
from furnace.scoring.picks import Pick
from furnace.storage.duckdb.db import Database
from furnace.storage.migrate import copy_home
from furnace.storage.sql.db import HEAD_REVISION, SQLDatabase, sqlite_url
from furnace.storage.sql.experiments import SQLExperimentResults
from furnace.storage.sql.llm_calls import SQLResponseCache
from furnace.storage.sql.picks import SQLPicks
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .old_home import move, previous_release_home, scratch, write_old_home
from .test_contract import make_agent


def _old_home(home: Path) -> tuple[Database, list[Pick]]:
    """A home of the last DuckDB release: its records written (and sealed with the home's key) by furnace,
    its ``furnace.duckdb`` made from the DuckDB migrations and filled with those rows by plain SQL; and the
    picks as furnace read them back."""
    home.mkdir(parents=True, exist_ok=True)
    source = scratch(home)
    store = SQLStore(source)
    a = store.save_elixir(make_elixir("Alpha"))
    store.save_elixir(make_elixir("Alpha", principles=["Be brief."]))
    b = store.save_elixir(make_elixir("Beta", expertise=["writing", "math"]))
    store.save_agent(make_agent([a, b]))
    results = SQLExperimentResults(source)
    results.start_experiment(ExperimentRecord("exp-1", "demo", {"population": 2}, 7, "offline"))
    results.save_individual(IndividualRecord("exp-1", 0, "alpha", 0, "seed", (), None, {}, "You are A.", 0.5, {}))
    SQLResponseCache(source).put(
        "k", Completion(text="hi", usage=Usage(prompt_tokens=1, completion_tokens=1), model="m")
    )
    picks = SQLPicks(source)
    picks.add(Pick("pick-kept", "exp-1", "p", "alpha", 0, "beta", 0, "A", "ana", reason="warmer", order_seed=3))
    picks.add(Pick("pick-undone", "exp-1", "p", "alpha", 0, "beta", 0, "tie", "bo"))
    picks.undo("pick-undone", who="bo")
    written = picks.picks("exp-1", include_undone=True)
    old = write_old_home(home / "furnace.duckdb", source)
    source.close()
    for made in home.glob("scratch.sqlite*"):
        made.unlink()
    return old, written


def test_a_duckdb_home_moves_with_every_row_and_seal(tmp_path: Path) -> None:
    old, written = _old_home(tmp_path)
    target = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)  # same home: same seal key
    moved = copy_home(old, target)
    assert moved.rows["elixir_versions"] == 4 and moved.rows["agents"] == 1 and moved.rows["llm_responses"] == 1
    assert moved.rows["human_picks"] == 2
    assert moved.verified == {
        "elixir versions": 4,
        "agents": 1,
        "experiment records": 2,
        "cached responses": 1,
        "picks": 2,
    }
    assert SQLPicks(target).picks("exp-1", include_undone=True) == written
    assert [p.pick_id for p in SQLPicks(target).picks("exp-1")] == ["pick-kept"]
    store = SQLStore(target)
    assert list(store.get_elixir("alpha").principles) == ["Be brief."]
    assert list(store.get_elixir("beta").expertise) == ["writing", "math"]
    agent = store.list_agents()[0].id
    assert [n.id for n in store.ancestors(agent)] == ["alpha", "beta"]
    assert (tmp_path / "furnace.duckdb").exists()  # the old file is kept
    assert copy_home(old, target).rows == moved.rows  # again: nothing duplicated
    # the moved rows moved the lineage tables' stamp (migration 0004): a forgery after a remembered walk is seen
    assert target.revision() == HEAD_REVISION and target.query("SELECT n FROM lineage_stamp")[0][0] > 0
    store.ancestors(agent)
    target.execute("UPDATE agents SET system_prompt = ? WHERE id = ?", ["You are EvilBot.", agent])
    with pytest.raises(LineageError, match="system prompt does not match"):
        store.ancestors(agent)


def test_a_forged_row_in_the_old_home_is_refused(tmp_path: Path) -> None:
    old, _ = _old_home(tmp_path)
    agent = old.query("SELECT id FROM agents")[0][0]
    old.execute("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [agent])
    with pytest.raises((LineageError, SealError), match=agent):
        copy_home(old, SQLDatabase(sqlite_url(tmp_path), home=tmp_path))


def test_a_forged_pick_in_the_old_home_is_refused_by_name(tmp_path: Path) -> None:
    old, _ = _old_home(tmp_path)
    old.execute("UPDATE human_picks SET choice = 'B' WHERE pick_id = 'pick-kept'")
    with pytest.raises(SealError, match="pick pick-kept does not match its keyed seal"):
        copy_home(old, SQLDatabase(sqlite_url(tmp_path), home=tmp_path))


def test_another_key_cannot_vouch_for_the_moved_rows(tmp_path: Path, monkeypatch: Any) -> None:
    old, _ = _old_home(tmp_path / "a")
    with pytest.raises(SealError):
        copy_home(old, SQLDatabase(sqlite_url(tmp_path / "b"), home=tmp_path / "b"))


def test_a_home_of_the_previous_release_moves_with_every_row_and_seal(tmp_path: Path, monkeypatch: Any) -> None:
    """A home written by the release before keyed seals (DuckDB schema up to 0015, rows as that furnace
    wrote them): upgraded, copied, and every record reads back verified."""
    old, agent = previous_release_home(tmp_path, monkeypatch)
    target, moved = move(old)
    assert moved.verified["agents"] == 1 and moved.verified["cached responses"] == 1
    assert moved.verified["elixir versions"] == 3 and moved.verified["experiment records"] == 3
    assert SQLStore(target).get_agent(agent.id).system_prompt == agent.system_prompt
    assert SQLExperimentResults(target).individuals("exp-1")[0].fitness == 0.41
    assert SQLExperimentResults(target).get_experiment("exp-1").summary["best_fitness"] == 0.41  # type: ignore[union-attr]
    assert SQLResponseCache(target).get("k").text == "old answer"  # type: ignore[union-attr]


def test_an_agent_altered_before_the_upgrade_stays_refused_after_the_move(tmp_path: Path, monkeypatch: Any) -> None:
    """The upgrade does not bless a record its old unkeyed seal already refused: the move refuses it,
    naming it (its intact parents were sealed)."""

    def evil(table: str, row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "system_prompt": "You are EvilBot."} if table == "agents" else row

    old, agent = previous_release_home(tmp_path, monkeypatch, change=evil)
    with pytest.raises((LineageError, SealError), match=agent.id):
        move(old)


def test_furnace_migrate_and_the_first_open_move_an_old_home(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    from tests.conftest import run_cli

    home = tmp_path / "home"
    _old_home(home)[0].close()  # furnace opens it on its own
    monkeypatch.setenv("FURNACE_HOME", str(home))
    monkeypatch.delenv("FURNACE_DATABASE_URL", raising=False)
    code, out, err = run_cli(capsys, "migrate")
    assert code == 0 and "seals verified: 4 elixir versions, 1 agents" in out and "is kept" in out, err
    for made in home.glob("furnace.sqlite*"):
        made.unlink()
    monkeypatch.setenv("FURNACE_DATABASE_URL", f"sqlite:///{home / 'furnace.sqlite'}")
    code, out, err = run_cli(capsys, "elixir", "list")  # the first open of the old home in the new store
    assert code == 0 and "moving furnace.duckdb into furnace.sqlite" in err
    assert "alpha" in out and "beta" in out
    code, out, err = run_cli(capsys, "elixir", "list")
    assert code == 0 and "moving" not in err  # once
    monkeypatch.setenv("FURNACE_HOME", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "migrate")
    assert code == 1 and "nothing to migrate" in err


def test_the_move_leaves_the_old_file_byte_for_byte_at_its_release_schema(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """The move reads a copy brought to the last DuckDB schema: the home's file stays what its release
    wrote (that release can still open it), and the records arrive with their seals verified."""
    from tests.conftest import run_cli

    old, agent = previous_release_home(tmp_path, monkeypatch, upgrade=False)
    home = old.path.parent
    scratch_dir = tmp_path / "tmp"  # this test's temporary folders (other tests move homes at the same time)
    scratch_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_dir))
    before = (home / "furnace.duckdb").read_bytes()
    monkeypatch.setenv("FURNACE_HOME", str(home))
    monkeypatch.delenv("FURNACE_DATABASE_URL", raising=False)
    code, out, err = run_cli(capsys, "migrate")
    assert code == 0 and "1 agents" in out, err
    assert (home / "furnace.duckdb").read_bytes() == before
    with Database(home / "furnace.duckdb", migrate=False) as kept:
        assert kept.schema_version() == 15  # not upgraded in place
    moved = SQLStore(SQLDatabase(sqlite_url(home), home=home))
    assert [a.id for a in moved.list_agents()] == [agent.id]
    assert not list(home.glob("furnace-move-*")) and not list(scratch_dir.iterdir())  # the copy is removed
