"""An old home's ``furnace.duckdb`` as the move reads it: brought to the last DuckDB schema once, and a file
another process holds refused with a clear error (the move never waits for a turn)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from furnace.domain.errors import StoreError
from furnace.storage.duckdb.db import Database, migrations

REPO = Path(__file__).resolve().parents[2]


def test_the_schema_is_the_last_migration_and_a_reopen_applies_nothing(tmp_path: Path) -> None:
    db = Database(tmp_path / "furnace.duckdb")
    rows = db.query("SELECT version, name FROM schema_version ORDER BY version")
    assert [(v, n) for v, n, _ in migrations()] == rows
    tables = {r[0] for r in db.query("SELECT table_name FROM duckdb_tables()")}
    assert {"elixir_versions", "agents", "lineage_edges", "llm_calls", "human_picks"} <= tables
    db.execute("INSERT INTO kv (key, value, created_at) VALUES ('k', '{}', current_timestamp)")
    db.close()
    with Database(tmp_path / "furnace.duckdb") as again:
        assert again.migrate() == again.schema_version() == rows[-1][0]
        assert again.query("SELECT version, name FROM schema_version ORDER BY version") == rows
        assert again.query("SELECT key FROM kv") == [("k",)]


def test_a_failing_transaction_leaves_nothing(tmp_path: Path) -> None:
    db = Database(tmp_path / "furnace.duckdb")
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("INSERT INTO kv (key, value, created_at) VALUES ('k', '{}', current_timestamp)")
        raise RuntimeError("stop")
    assert db.query("SELECT count(*) FROM kv") == [(0,)]


_HOLDER = textwrap.dedent(
    """
    import sys
    from furnace.storage.duckdb.db import Database

    db = Database(sys.argv[1])
    print("holding", flush=True)
    sys.stdin.readline()
    """
)


def test_a_file_another_process_holds_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "furnace.duckdb"
    Database(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(StoreError, match="cannot open furnace.duckdb"):
            Database(path)
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
