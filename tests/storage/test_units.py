"""Units of work on the held DuckDB instance, and turns between processes (docs/storage.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from furnace.domain.elixir import parse_elixir
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore
from furnace.storage.store import unit_of_work

REPO = Path(__file__).resolve().parents[2]


def _elixir(id: str, identity: str):
    return parse_elixir({"id": id, "name": id, "identity": identity, "expertise": ["a"], "principles": ["p"]})


def test_a_unit_uses_one_cursor_for_every_store_call(tmp_path: Path) -> None:
    db = Database(tmp_path / "f.duckdb")
    store = DuckDBStore(db)
    store.save_elixir(_elixir("a", "first"))
    with db.unit() as cursor:
        inner = []
        original = db._acquire

        def counting() -> object:  # a store call inside the unit must not take a cursor of its own
            inner.append(1)
            return original()

        db._acquire = counting  # type: ignore[method-assign]
        try:
            assert store.get_elixir("a").identity == "first"
            store.save_elixir(_elixir("a", "second"))
            assert [e.version for e in store.history("a")] == [1, 2]
            with db.connect() as con:
                assert con is cursor
        finally:
            db._acquire = original  # type: ignore[method-assign]
    assert inner == []


def test_a_unit_writes_in_one_transaction_all_or_nothing(tmp_path: Path) -> None:
    store = DuckDBStore(Database(tmp_path / "f.duckdb"))
    with pytest.raises(RuntimeError), unit_of_work(store):
        store.save_elixir(_elixir("a", "one"))
        store.save_elixir(_elixir("b", "two"))
        assert {e.id for e in store.list_elixirs()} == {"a", "b"}  # visible inside the unit
        raise RuntimeError("the unit fails after two writes")
    assert store.list_elixirs() == []
    with unit_of_work(store):
        store.save_elixir(_elixir("a", "one"))
        store.save_elixir(_elixir("b", "two"))
    assert {e.id for e in store.list_elixirs()} == {"a", "b"}


def test_the_instance_is_held_between_units_and_released_on_close(tmp_path: Path) -> None:
    db = Database(tmp_path / "f.duckdb", idle_release_s=60)
    store = DuckDBStore(db)
    opens = db.opens
    for i in range(5):
        store.save_elixir(_elixir("a", f"v{i}"))
    assert db.held and db.opens == opens  # five units, no new open
    db.close()
    assert not db.held
    store.get_elixir("a")
    assert db.held and db.opens == opens + 1


_ALTERNATE = textwrap.dedent(
    """
    import sys
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.duckdb.db import Database
    from furnace.storage.duckdb.store import DuckDBStore
    from furnace.storage.store import unit_of_work

    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    db = Database(path, lock_timeout_s=60, idle_release_s=60)  # only a waiter's request frees the file
    store = DuckDBStore(db)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(n):
        with unit_of_work(store):  # read the latest, write the next version: one unit
            latest = store.get_elixir("shared")
            store.save_elixir(latest.model_copy(update={"identity": f"{tag}-{i}"}))
    print("retries", db.lock_retries, "waits", db.waits, flush=True)
    """
)


@pytest.mark.slow
def test_two_processes_alternating_units_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.duckdb"
    store = DuckDBStore(Database(path))
    store.save_elixir(_elixir("shared", "start"))
    store.db.close()
    n = 15
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _ALTERNATE, str(path), tag, str(n)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("x", "y")
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = [proc.communicate(timeout=180) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    history = store.history("shared")
    assert [e.version for e in history] == list(range(1, 2 * n + 2))  # contiguous: no version lost or doubled
    identities = [e.identity for e in history[1:]]
    for tag in ("x", "y"):  # every write of each process is there, in its own order
        assert [i for i in identities if i.startswith(tag)] == [f"{tag}-{i}" for i in range(n)]
    waits = sum(int(out.split()[-1]) for out, _ in outs)
    assert waits > 0  # the processes really took turns on the file (each held it between its units)


_HOLDER = textwrap.dedent(
    """
    import sys
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.duckdb.db import Database
    from furnace.storage.duckdb.store import DuckDBStore

    db = Database(sys.argv[1], idle_release_s=600)  # would hold for 10 minutes unless asked
    store = DuckDBStore(db)
    store.get_elixir("shared")
    print("holding", db.held, flush=True)
    sys.stdin.readline()
    print("released", not db.held, flush=True)
    """
)


@pytest.mark.slow
def test_a_holding_process_releases_when_another_asks(tmp_path: Path) -> None:
    path = tmp_path / "shared.duckdb"
    store = DuckDBStore(Database(path, lock_timeout_s=60))
    store.save_elixir(_elixir("shared", "start"))
    store.db.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().split() == ["holding", "True"]
        notices: list[str] = []
        store.db.on_wait = notices.append
        store.save_elixir(_elixir("shared", "written while the other process held the file"))
        assert store.db.waits >= 1  # it met the lock and was let in
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "released True" in out
    assert store.get_elixir("shared").version == 2
    for notice in notices:  # a shown wait names the file
        assert "furnace process" in notice or "shared.duckdb" in notice
