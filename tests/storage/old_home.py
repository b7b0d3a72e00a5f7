"""Old homes for the migration tests: a ``furnace.duckdb`` at a DuckDB schema an earlier release left.

The DuckDB adapters that wrote such homes are gone, so a test builds one in two steps: it writes its
records through the live store's adapters into a scratch SQLite database (:func:`scratch`: every row
and seal as furnace writes them), then :func:`write_old_home` creates the DuckDB file from the shipped
migrations (all of them, or those before ``before``) and inserts those rows with plain SQL, keeping the
columns that schema has. :func:`move` copies an old home into a fresh SQLite store of that home, as the
first open of the home does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from furnace.storage.duckdb import db as duckdb_db
from furnace.storage.duckdb.db import Database
from furnace.storage.migrate import Moved, copy_home
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.schema import metadata

_LISTS = {("elixir_versions", "expertise"), ("embeddings", "vector")}  # JSON text in SQL, lists in DuckDB
Row = dict[str, Any]


def scratch(home: Path) -> SQLDatabase:
    """A SQLite database in ``home`` (so its rows are sealed with that home's key) that is not its live store."""
    return SQLDatabase(f"sqlite:///{(home / 'scratch.sqlite').resolve()}", home=home)


@contextmanager
def older_schema(
    monkeypatch: pytest.MonkeyPatch, path: Path, before: int, *, upgrade: bool = True
) -> Iterator[Database]:
    """A Database at the schema an older furnace left (the migrations before number ``before``); the
    block fills it, and its end applies the remaining migrations as the move of an old home does (with
    ``upgrade``; else it is closed as that release left it)."""
    every = duckdb_db.migrations()
    monkeypatch.setattr(duckdb_db, "migrations", lambda: [m for m in every if m[0] < before])
    old = Database(path)
    yield old
    monkeypatch.setattr(duckdb_db, "migrations", lambda: every)
    if upgrade:
        old.migrate()
    else:
        old.close()


def _columns(old: Database, table: str) -> set[str]:
    return {r[0] for r in old.query("SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table])}


def insert_rows(old: Database, table: str, rows: list[Row]) -> None:
    """Insert ``rows`` (column -> value, as the relational store holds them) into ``old``'s ``table``,
    keeping the columns its schema has."""
    present = _columns(old, table)
    for row in rows:
        kept = {c: v for c, v in row.items() if c in present}
        for column, value in kept.items():
            if (table, column) in _LISTS and isinstance(value, str):
                kept[column] = json.loads(value)
        names = ", ".join(kept)
        old.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(kept))})", list(kept.values()))


def sql_rows(source: SQLDatabase, table: str) -> list[Row]:
    """Every row of ``table`` in ``source`` (values typed by the relational schema)."""
    with source.connect() as conn:
        return [dict(r) for r in conn.execute(select(metadata.tables[table])).mappings()]


def write_old_home(
    path: Path,
    source: SQLDatabase,
    *,
    before: int | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
    change: Callable[[str, Row], Row] | None = None,
    upgrade: bool = True,
) -> Database:
    """A ``furnace.duckdb`` at ``path`` holding every row of ``source``: at the last DuckDB schema, or
    (with ``before`` and ``monkeypatch``) at the schema before migration ``before``, then upgraded (with
    ``upgrade``; else closed as that release left it). ``change(table, row)`` gives the row as that older
    release wrote it (e.g. an unkeyed seal)."""

    def fill(old: Database) -> None:
        for table in metadata.sorted_tables:
            if _columns(old, table.name):
                rows = sql_rows(source, table.name)
                insert_rows(old, table.name, [change(table.name, r) for r in rows] if change else rows)

    if before is None:
        old = Database(path)
        fill(old)
        return old
    assert monkeypatch is not None, "an older schema is set with monkeypatch"
    with older_schema(monkeypatch, path, before, upgrade=upgrade) as old:
        fill(old)
    return old


def move(old: Database) -> tuple[SQLDatabase, Moved]:
    """``old`` copied into a fresh ``furnace.sqlite`` of its home (same seal key), verified."""
    home = old.path.parent
    target = SQLDatabase(sqlite_url(home), home=home)
    return target, copy_home(old, target)


def _unkeyed(table: str, row: Row) -> Row:
    """A row as the release before keyed seals wrote it: an agent's seal without its keyed ``mac``."""
    if table == "agents" and row.get("seal"):
        seal = json.loads(row["seal"])
        seal.pop("mac", None)
        return {**row, "seal": json.dumps(seal, sort_keys=True)}
    return row


def previous_release_home(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    change: Callable[[str, Row], Row] | None = None,
    upgrade: bool = True,
) -> tuple[Database, Any]:
    """A home as the release before keyed seals left it (DuckDB schema up to 0015: no keyed seals, the
    agents' unkeyed record seal): an agent and its parents, a cached response and a small finished
    experiment (agent ``agt-1`` with fitness 0.41), each row as that release wrote it; opened, so its
    first open ran the upgrade (0016 seals the intact rows with a new key), or with ``upgrade=False``
    closed as that release left it. ``change`` alters a row before it is written (an edit made before
    the upgrade). Returns the old home and the agent."""
    from furnace.evolution.records import ExperimentRecord, GenerationRecord
    from furnace.llm.seam import Completion
    from furnace.storage.sql.experiments import SQLExperimentResults
    from furnace.storage.sql.llm_calls import SQLResponseCache
    from furnace.storage.sql.store import SQLStore

    from .conftest import make_elixir
    from .test_contract import make_agent

    (tmp_path / "new").mkdir(parents=True, exist_ok=True)
    source = scratch(tmp_path / "new")  # another home: the old one gets its key at the upgrade
    store = SQLStore(source)
    agent = make_agent([store.save_elixir(make_elixir("Editor")), store.save_elixir(make_elixir("Coach"))])
    store.save_agent(agent)
    results = SQLExperimentResults(source)
    results.start_experiment(ExperimentRecord("exp-1", "small", {"generations": 1}, 7, "offline"))
    fitness = 0.41
    results.save_individuals([individual(fitness)])
    results.save_generation(GenerationRecord("exp-1", 0, ("agt-1",), 0.41, 0.41, {"mutation": 1.0}, 3, 1, 90, 0.01))
    results.finish_experiment("exp-1", "finished", {"best_agent": "agt-1", "best_fitness": 0.41})
    SQLResponseCache(source).put("k", Completion(text="old answer", model="m"))

    def as_written(table: str, row: Row) -> Row:
        row = _unkeyed(table, row)
        return change(table, row) if change else row

    old = write_old_home(
        tmp_path / "old" / "furnace.duckdb",
        source,
        before=16,
        monkeypatch=monkeypatch,
        change=as_written,
        upgrade=upgrade,
    )
    source.close()
    return old, agent


def individual(fitness: float = 0.41) -> Any:
    """The one individual record the old homes and the seal tests store (its figures sealed as written)."""
    from furnace.evolution.records import IndividualRecord, ScoreRow

    return IndividualRecord(
        experiment_id="exp-1",
        generation=0,
        agent_id="agt-1",
        slot=0,
        operator="seed",
        parents=("editor",),
        lineage_hash=None,
        elixir={"name": "Editor"},
        system_prompt="You are Editor.",
        fitness=fitness,
        objectives={"judge": fitness},
        scores=(ScoreRow("p1", "judge", fitness, "ok", feedback="clear"),),
    )
