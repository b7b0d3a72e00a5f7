"""Moving a DuckDB home into the relational store keeps every row and seal, and refuses a forged one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from furnace.domain.errors import LineageError, SealError
from furnace.evolution.records import ExperimentRecord, IndividualRecord
from furnace.llm.seam import Completion, Usage
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.experiments import DuckDBExperimentResults
from furnace.storage.duckdb.llm_calls import DuckDBResponseCache
from furnace.storage.duckdb.store import DuckDBStore
from furnace.storage.migrate import copy_home
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .test_contract import make_agent


def _old_home(home: Path) -> Database:
    db = Database(home / "furnace.duckdb")
    store = DuckDBStore(db)
    a = store.save_elixir(make_elixir("Alpha"))
    store.save_elixir(make_elixir("Alpha", principles=["Be brief."]))
    b = store.save_elixir(make_elixir("Beta", expertise=["writing", "math"]))
    store.save_agent(make_agent([a, b]))
    results = DuckDBExperimentResults(db)
    results.start_experiment(ExperimentRecord("exp-1", "demo", {"population": 2}, 7, "offline"))
    results.save_individual(IndividualRecord("exp-1", 0, "alpha", 0, "seed", (), None, {}, "You are A.", 0.5, {}))
    DuckDBResponseCache(db).put(
        "k", Completion(text="hi", usage=Usage(prompt_tokens=1, completion_tokens=1), model="m")
    )
    return db


def test_a_duckdb_home_moves_with_every_row_and_seal(tmp_path: Path) -> None:
    old = _old_home(tmp_path)
    target = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)  # same home: same seal key
    moved = copy_home(old, target)
    assert moved.rows["elixir_versions"] == 4 and moved.rows["agents"] == 1 and moved.rows["llm_responses"] == 1
    assert moved.verified == {"elixir versions": 4, "agents": 1, "experiment records": 2, "cached responses": 1}
    store = SQLStore(target)
    assert list(store.get_elixir("alpha").principles) == ["Be brief."]
    assert list(store.get_elixir("beta").expertise) == ["writing", "math"]
    assert [n.id for n in store.ancestors(store.list_agents()[0].id)] == ["alpha", "beta"]
    assert (tmp_path / "furnace.duckdb").exists()  # the old file is kept
    assert copy_home(old, target).rows == moved.rows  # again: nothing duplicated


def test_a_forged_row_in_the_old_home_is_refused(tmp_path: Path) -> None:
    old = _old_home(tmp_path)
    agent = DuckDBStore(old).list_agents()[0]
    old.execute("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [agent.id])
    with pytest.raises((LineageError, SealError), match=agent.id):
        copy_home(old, SQLDatabase(sqlite_url(tmp_path), home=tmp_path))


def test_another_key_cannot_vouch_for_the_moved_rows(tmp_path: Path, monkeypatch: Any) -> None:
    old = _old_home(tmp_path / "a")
    with pytest.raises(SealError):
        copy_home(old, SQLDatabase(sqlite_url(tmp_path / "b"), home=tmp_path / "b"))
