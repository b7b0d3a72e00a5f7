"""The relational store's adapters on SQLite and PostgreSQL (``sql_db``): what the in-memory and DuckDB
suites elsewhere hold them to, plus what only a shared database promises (several writers at once)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.errors import SealError
from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord, ScoreRow
from furnace.llm.cache import CachedLLM
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import Completion, TaskKind, Usage, system_user
from furnace.storage.sql.experiments import SQLExperimentResults
from furnace.storage.sql.kv import SQLKV, SQLVectors
from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir


def _priced(text: str) -> Completion:
    return Completion(text=text, usage=Usage(prompt_tokens=10, completion_tokens=4), cost_usd=0.002, model="fake")


def test_the_schema_is_the_migrations_head(sql_db: Any) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from furnace.storage.sql.schema import metadata

    stamps = ("lineage_stamp", "lineage_changes", "snapshot_stamps")

    def data(name: Any, kind: str, *_: Any) -> bool:  # the change stamps (and the lineage log) are no data
        return not (kind == "table" and name in stamps)

    with sql_db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"include_name": data}), metadata)
    assert diff == []
    assert sql_db.revision() == "0006"
    for table in stamps[:2]:
        rows = sql_db.query(
            f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{table}'"
            if sql_db.dialect == "postgresql"
            else f"SELECT count(*) FROM {table}"
        )
        assert rows == [(0,)] if sql_db.dialect == "postgresql" else rows == [(1,)]  # SQLite only: one row
    if sql_db.dialect == "sqlite":  # every data table has its snapshot stamp (else it is always copied in full)
        named = {row[0] for row in sql_db.query("SELECT name FROM snapshot_stamps")}
        assert named == set(metadata.tables)
    else:
        absent = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'snapshot_stamps'"
        assert sql_db.query(absent) == [(0,)]


def test_head_revision_is_the_newest_migration() -> None:
    """The store tells an up-to-date database by HEAD_REVISION, without loading Alembic: a new migration must
    move it (or every store already at the old head would skip the new migration)."""
    from alembic.script import ScriptDirectory

    from furnace.storage.sql.db import HEAD_REVISION, migrations_config

    assert ScriptDirectory.from_config(migrations_config()).get_current_head() == HEAD_REVISION


def test_a_paid_call_is_in_the_ledger_with_its_answer_and_a_rerun_pays_nothing(sql_db: Any) -> None:
    ledger = SQLCallLedger(sql_db)
    inner = FakeLLM(respond=lambda r: _priced("answer"))
    llm = CachedLLM(inner, SQLResponseCache(sql_db, ledger=ledger), ledger)
    llm.complete(system_user(TaskKind.REPLY, "sys", "hello"))
    # one transaction wrote both: the ledger row and the cache entry are there together
    assert sql_db.query("SELECT count(*) FROM llm_calls WHERE cached = ?", [False]) == [(1,)]
    assert sql_db.query("SELECT count(*) FROM llm_responses") == [(1,)]
    again = CachedLLM(FakeLLM(respond=lambda r: _priced("other")), SQLResponseCache(sql_db), SQLCallLedger(sql_db))
    assert again.complete(system_user(TaskKind.REPLY, "sys", "hello")).text == "answer"
    totals = SQLCallLedger(sql_db).totals()
    assert (totals.calls, totals.cached_calls, totals.prompt_tokens) == (2, 1, 10)
    assert totals.cost_usd == pytest.approx(0.002)


def test_a_rewritten_cached_answer_is_a_counted_miss(sql_db: Any) -> None:
    cache = SQLResponseCache(sql_db)
    cache.put("k", _priced("true answer"))
    forged = _priced("forged").model_dump_json()
    sql_db.execute("UPDATE llm_responses SET completion = ? WHERE cache_key = ?", [forged, "k"])
    fresh = SQLResponseCache(sql_db)
    assert fresh.get("k") is None and fresh.refused == 1
    assert fresh.stats()["bad_seals"] == 1


def test_kv_first_writer_wins_and_vectors_round_trip_exactly(sql_db: Any) -> None:
    kv = SQLKV(sql_db)
    assert kv.put_many_if_absent([("a", {"v": 1}, None), ("b", {"v": 2}, 60.0)]) == [{"v": 1}, {"v": 2}]
    assert kv.put_if_absent("a", {"v": 9}) == {"v": 1}
    vectors = SQLVectors(sql_db)
    exact = [0.1, 1 / 3, -2.5e-17]
    vectors.put_many("m", {"h": exact})
    vectors.put_many("m", {"h": [0.0, 0.0, 0.0]})  # a stored vector is kept
    assert vectors.get_many("m", ["h", "missing"]) == {"h": exact}


def _individual(fitness: float) -> IndividualRecord:
    return IndividualRecord(
        "exp-1", 0, "agt-a", 0, "seed", (), None, {"name": "A"}, "You are A.", fitness, {"judge": fitness},
        scores=(ScoreRow("p1", "judge", fitness, "ok", feedback="tone: fine"),),
    )  # fmt: skip


def test_experiment_records_are_sealed_and_a_rewritten_fitness_is_refused(sql_db: Any) -> None:
    results = SQLExperimentResults(sql_db)
    results.start_experiment(ExperimentRecord("exp-1", "demo", {"population": 2}, 7, "offline"))
    results.save_individuals([_individual(0.5)])
    results.save_individuals([_individual(0.9)])  # the same key again: kept as first stored
    results.save_generation(GenerationRecord("exp-1", 0, ("agt-a",), 0.5, 0.5, {"seed": 1.0}, calls=3))
    results.finish_experiment("exp-1", "finished", {"best": "agt-a"})
    assert [r.fitness for r in results.individuals("exp-1")] == [0.5]
    assert results.individuals("exp-1")[0].scores[0].feedback == "tone: fine"
    assert results.get_experiment("exp-1").summary == {"best": "agt-a"}  # type: ignore[union-attr]
    assert results.count_rows("exp-1") == {
        "experiment_generations": 1, "experiment_individuals": 1, "experiment_scores": 1,
    }  # fmt: skip
    sql_db.execute("UPDATE experiment_individuals SET fitness = ?", [0.99])
    with pytest.raises(SealError, match="agt-a"):
        results.individuals("exp-1")


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from furnace.domain.elixir import edit, parse_elixir
    from furnace.storage.sql.db import SQLDatabase
    from furnace.storage.sql.store import SQLStore

    url, home, who, n = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    store = SQLStore(SQLDatabase(url, home=home))
    base = parse_elixir({"name": "Shared", "identity": "You are shared.", "expertise": ["x"], "principles": ["p"]})
    for i in range(n):
        store.save_elixir(edit(base, principles=[f"{who} {i}"]))
    """
)


@pytest.mark.parametrize("sql_db", ["sqlite", "postgresql"], indirect=True)
def test_two_processes_saving_one_elixir_lose_nothing_and_keep_versions_contiguous(sql_db: Any, tmp_path: Path) -> None:
    url = sql_db.url.render_as_string(hide_password=False)
    n = 200
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, str(tmp_path), who, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("a", "b")
    ]
    outputs = [w.communicate(timeout=600) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], outputs
    assert all("waiting" not in err for _, err in outputs)  # no process waited its turn at the store
    history = SQLStore(sql_db).history("shared")
    assert [e.version for e in history] == list(range(1, 2 * n + 1))  # contiguous, none lost
    saved = {e.principles[0] for e in history}
    assert saved == {f"{who} {i}" for who in ("a", "b") for i in range(n)}


def test_a_store_is_shared_by_two_homes_with_one_seal_key(sql_db: Any, tmp_path: Path) -> None:
    """A team: two machines (homes) on one database verify each other's records with FURNACE_SEAL_KEY."""
    from furnace.storage.sql.db import SQLDatabase

    if sql_db.dialect == "sqlite":
        pytest.skip("a shared store across machines is PostgreSQL")
    key = "k" * 40
    url = sql_db.url.render_as_string(hide_password=False)
    one = SQLStore(SQLDatabase(url, home=tmp_path / "one", seal_key=key))
    two = SQLStore(SQLDatabase(url, home=tmp_path / "two", seal_key=key))
    ref = one.save_elixir(make_elixir("Editor"))
    assert two.get_elixir("editor").ref == ref
    stranger = SQLStore(SQLDatabase(url, home=tmp_path / "three"))  # its own key file: cannot vouch
    with pytest.raises(SealError):
        stranger.get_elixir("editor")
    assert json.loads(sql_db.query("SELECT expertise FROM elixir_versions")[0][0]) == ["writing"]


def test_a_write_through_a_second_object_joins_the_unit_open_on_this_thread(tmp_path: Path) -> None:
    """Two runtimes of one home in one process (a flow and its runner): a write through the second inside a
    unit of the first joins that unit, instead of waiting on SQLite's lock held by its own thread."""
    from furnace.storage.sql.db import SQLDatabase, sqlite_url

    url = sqlite_url(tmp_path)
    first, second = SQLDatabase(url, home=tmp_path), SQLDatabase(url, home=tmp_path)
    with first.unit():
        first.execute("INSERT INTO kv (key, value, created_at) VALUES (?, ?, ?)", ["a", "1", "2026-01-01"])
        second.execute("INSERT INTO kv (key, value, created_at) VALUES (?, ?, ?)", ["b", "2", "2026-01-01"])
        assert second.in_transaction
    assert sorted(r[0] for r in SQLDatabase(url, home=tmp_path).query("SELECT key FROM kv")) == ["a", "b"]
    with pytest.raises(RuntimeError), first.unit():  # and a unit that fails rolls back both writes
        second.execute("INSERT INTO kv (key, value, created_at) VALUES (?, ?, ?)", ["c", "3", "2026-01-01"])
        raise RuntimeError("boom")
    assert sorted(r[0] for r in second.query("SELECT key FROM kv")) == ["a", "b"]


def test_the_driver_path_writes_rows_the_full_path_reads_back_and_defers_a_present_key(tmp_path: Path) -> None:
    """A model call's answer and ledger row go through SQLite's driver (SQLDatabase.driver_transaction):
    the timestamp, flag and numbers read back through SQLAlchemy as written; an expired row under the
    same key is left to the full path, which replaces it."""
    from datetime import datetime, timedelta

    from furnace.storage.sql.db import SQLDatabase, sqlite_url

    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    assert db.driver_path
    ledger = SQLCallLedger(db)
    cache = SQLResponseCache(db, ledger=ledger, memory_items=0)
    llm = CachedLLM(FakeLLM(respond=lambda r: _priced("answer")), cache, ledger)
    before = datetime.now().astimezone().replace(tzinfo=None) - timedelta(days=1)
    llm.complete(system_user(TaskKind.REPLY, "sys", "hello"))
    [call] = ledger.calls()
    assert (call.cached, call.status, call.prompt_tokens, call.cost_usd) == (False, "ok", 10, pytest.approx(0.002))
    [(created,)] = db.query("SELECT created_at FROM llm_responses")
    assert isinstance(created, str) and created > before.isoformat(" ")  # SQLAlchemy's stored form
    key = call.cache_key
    assert cache.get(key) is not None and cache.get(key).text == "answer"  # read back on the driver
    db.execute("UPDATE llm_responses SET created_at = ? WHERE cache_key = ?", ["2000-01-01 00:00:00.000000", key])
    assert cache.get(key) is None  # expired
    assert cache.put(key, _priced("newer")) is True  # the driver's insert changes no row: the full path replaces it
    assert cache.get(key).text == "newer"
    db.close()


@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_the_ledgers_totals_of_one_unit_are_its_calls_only(sql_db: Any, kind: str) -> None:
    from datetime import UTC, datetime

    from furnace.llm.cache import CallRecord, MemoryCallLedger, sum_calls

    ledger = MemoryCallLedger() if kind == "memory" else SQLCallLedger(sql_db)
    made = [("exp", "held-out"), ("exp", "g1/s0"), ("exp", "held-out"), ("other", "held-out")]
    rows = [
        CallRecord(id=f"c{i}", run_id=run, task="reply", model="m", cache_key=f"k{i}", prompt_tokens=i,
                   cached=i == 2, created_at=datetime.now(UTC), unit=unit)
        for i, (run, unit) in enumerate(made)
    ]  # fmt: skip
    for row in rows:
        ledger.record(row)
    held = ledger.totals("exp", unit="held-out")
    assert held == sum_calls([rows[0], rows[2]])  # the run's held-out calls: not its generation's, nor another run's
    assert ledger.totals(unit="held-out") == sum_calls([rows[0], rows[2], rows[3]])


def test_a_server_furnace_cannot_reach_is_a_users_error_naming_it_without_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team's store URL pointing where no PostgreSQL answers: ``error:`` and exit 1 (not an internal
    error), the store named by its URL with the password masked."""
    import socket

    from furnace.domain.errors import StoreError
    from furnace.storage.sql.db import SQLDatabase
    from tests.conftest import run_cli

    pytest.importorskip("psycopg")
    with socket.socket() as probe:  # a port nothing listens on once this socket is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql+psycopg://team:s3cret-pw@127.0.0.1:{port}/furnace"
    with pytest.raises(StoreError) as refused:
        SQLDatabase(url, home=tmp_path)
    message = str(refused.value)
    assert message.startswith(
        f"cannot connect to the store at postgresql+psycopg://team:***@127.0.0.1:{port}/furnace: "
    )
    assert "s3cret-pw" not in message and "FURNACE_DATABASE_URL" in message

    (tmp_path / "home").mkdir()
    monkeypatch.setenv("FURNACE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FURNACE_DATABASE_URL", url)
    code, out, err = run_cli(capsys, "elixir", "list")
    assert code == 1 and err.startswith("error: cannot connect to the store at ") and "internal error" not in err
    assert "s3cret-pw" not in out + err
