"""A lineage walk skips re-checking agents only while nothing in the file can have changed
(``Database.epoch``): any statement that may write, and any re-open of the file, makes it look again."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from furnace.domain.errors import LineageError
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore

from .conftest import make_elixir
from .test_contract import make_agent


def _family(tmp_path: Path) -> tuple[DuckDBStore, str]:
    store = DuckDBStore(Database(tmp_path / "f.duckdb"))
    a = store.save_elixir(make_elixir("Editor"))
    b = store.save_elixir(make_elixir("Coach"))
    agent = make_agent([a, b])
    store.save_agent(agent)
    return store, agent.id


def test_the_epoch_moves_with_writes_and_opens_not_reads(tmp_path: Path) -> None:
    db = Database(tmp_path / "e.duckdb")
    db.execute("CREATE TABLE t (x INTEGER)")
    before = db.epoch
    db.query("SELECT count(*) FROM t")
    db.query("WITH n AS (SELECT 1 AS x) SELECT x FROM n")
    assert db.epoch == before  # reads change nothing
    db.run("INSERT INTO t VALUES (1) RETURNING x")
    assert db.epoch > before
    written = db.epoch
    db.close()
    db.query("SELECT 1")  # opens the file again: another process may have written meanwhile
    assert db.epoch > written


def test_a_repeated_walk_reads_no_records_until_something_changes(tmp_path: Path) -> None:
    store, agent_id = _family(tmp_path)
    store.ancestors(agent_id)
    before = store.db.statements
    store.ancestors(agent_id)
    assert store.db.statements - before == 1  # the edge index's catch-up read only: no fingerprints
    store.db.execute("UPDATE agents SET system_prompt = system_prompt || ' (edited)' WHERE id = ?", [agent_id])
    with pytest.raises(LineageError, match=agent_id):  # the write moved the epoch: the record is checked
        store.ancestors(agent_id)


def test_a_record_altered_while_the_file_was_not_held_is_caught(tmp_path: Path) -> None:
    store, agent_id = _family(tmp_path)
    store.ancestors(agent_id)
    store.db.close()  # another program takes the file and edits the record
    with duckdb.connect(str(tmp_path / "f.duckdb")) as con:
        (lineage,) = con.execute("SELECT lineage FROM agents WHERE id = ?", [agent_id]).fetchone()
        data = json.loads(lineage)
        data["operator"] = "mutation"
        con.execute("UPDATE agents SET lineage = ? WHERE id = ?", [json.dumps(data), agent_id])
    with pytest.raises(LineageError, match=agent_id):  # the re-open moved the epoch
        store.ancestors(agent_id)
