"""Parquet snapshots of the live store: consistent, atomic, readable while (and after) a writer runs
(docs/store.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.elixir import parse_elixir
from furnace.storage.duckdb import snapshot
from furnace.storage.seals import sealer_for
from furnace.storage.snapshot_files import Written
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.store import SQLStore

REPO = Path(__file__).resolve().parents[2]


def _store(home: Path) -> SQLStore:
    return SQLStore(SQLDatabase(sqlite_url(home), home=home))


def _elixir(id: str, identity: str = "x"):
    return parse_elixir({"id": id, "name": id, "identity": identity, "expertise": ["a"], "principles": ["p"]})


def test_connect_gives_views_with_the_table_names_over_the_newest_snapshot(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save_elixirs([_elixir("a"), _elixir("b")])
    snapshot.refresh(store.db)
    con = snapshot.connect(store.db.path)
    assert con.execute("SELECT id FROM elixir_versions ORDER BY id").fetchall() == [("a",), ("b",)]
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert {"elixir_versions", "agents", "lineage_edges", "experiment_individuals", "revisions"} <= views
    store.save_elixir(_elixir("c"))
    assert len(con.execute("SELECT * FROM elixir_versions").fetchall()) == 2  # a snapshot never changes
    snapshot.refresh(store.db)
    assert len(snapshot.connect(store.db.path).execute("SELECT * FROM elixir_versions").fetchall()) == 3
    assert len(con.execute("SELECT * FROM elixir_versions").fetchall()) == 2  # the old reader still reads


def test_connects_of_one_process_share_the_views_of_a_snapshot(tmp_path: Path) -> None:
    """A notebook re-running connect() gets cursors on one in-memory database: the views of a
    snapshot are made once, and every connection keeps the snapshot it was opened on."""
    store = _store(tmp_path)
    store.save_elixir(_elixir("a"))
    snapshot.refresh(store.db)

    def views(con) -> int:
        return con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0]

    first, second = snapshot.connect(store.db.path), snapshot.connect(store.db.path)
    schema = first.execute("SELECT current_schema()").fetchone()[0]
    assert second.execute("SELECT current_schema()").fetchone()[0] == schema
    made = views(first)
    assert views(snapshot.connect(store.db.path)) == made  # no new views for the same snapshot
    second.close()  # closing one connection leaves the others (and later ones) working
    store.save_elixir(_elixir("b"))
    snapshot.refresh(store.db)
    newer = snapshot.connect(store.db.path)
    assert newer.execute("SELECT current_schema()").fetchone()[0] != schema
    assert views(newer) > made
    assert newer.execute("SELECT count(*) FROM elixir_versions").fetchone()[0] == 2
    assert first.execute("SELECT count(*) FROM elixir_versions").fetchone()[0] == 1
    assert snapshot.connect(store.db.path).execute("SELECT count(*) FROM elixir_versions").fetchone()[0] == 2


def test_connect_never_opens_the_live_store(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save_elixir(_elixir("a"))
    snapshot.refresh(store.db)
    store.db.close()
    for live in tmp_path.glob("furnace.sqlite*"):  # the live store out of reach: the snapshot still reads
        live.rename(tmp_path / f"moved-{live.name}")
    code = (
        "import sys; from furnace.storage.duckdb import snapshot;"
        "con = snapshot.connect(sys.argv[1]);"
        "print(con.execute('SELECT count(*) FROM elixir_versions').fetchone()[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(store.db.path)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "1"
    assert not store.db.path.exists()  # nothing made a live store again


def test_a_failed_refresh_leaves_the_previous_snapshot_current(tmp_path: Path, monkeypatch) -> None:
    store = _store(tmp_path)
    store.save_elixir(_elixir("a"))
    first = snapshot.refresh(store.db)
    store.save_elixir(_elixir("b"))
    real_replace = os.replace

    def crash(src, dst):  # the writer dies between writing the tables and publishing them
        if Path(dst).name == snapshot.POINTER:
            raise OSError("killed mid-snapshot")
        return real_replace(src, dst)

    monkeypatch.setattr(snapshot.os, "replace", crash)
    with pytest.raises(OSError):
        snapshot.refresh(store.db)
    monkeypatch.undo()
    root = snapshot.snapshot_root(store.db.path)
    assert snapshot.current(root) == first
    con = snapshot.connect(store.db.path)
    assert con.execute("SELECT id FROM elixir_versions").fetchall() == [("a",)]


_WRITER = textwrap.dedent(
    """
    import sys
    from furnace.domain.elixir import parse_elixir
    from pathlib import Path
    from furnace.storage.duckdb import snapshot
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.store import SQLStore

    store = SQLStore(SQLDatabase(sqlite_url(Path(sys.argv[1])), home=Path(sys.argv[1])))
    round = 0
    while True:  # every snapshot holds whole rounds: 5 elixirs saved in one transaction
        round += 1
        store.save_elixirs([
            parse_elixir({"id": f"r{round}-{i}", "name": "n", "identity": "x", "expertise": ["a"], "principles": ["p"]})
            for i in range(5)
        ])
        snapshot.refresh(store.db)
        if round == 3:
            print("ready", flush=True)
    """
)

_READER = textwrap.dedent(
    """
    import json, sys
    from furnace.storage.duckdb import snapshot

    seen = []
    for _ in range(int(sys.argv[2])):
        con = snapshot.connect(sys.argv[1])
        seen.append(con.execute("SELECT count(*) FROM elixir_versions").fetchone()[0])
        con.close()
    print(json.dumps(seen))
    """
)


@pytest.mark.slow
def test_readers_see_whole_snapshots_while_a_writer_runs_and_after_it_is_killed(tmp_path: Path) -> None:
    path = _store(tmp_path).db.path
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        reader = subprocess.run(
            [sys.executable, "-c", _READER, str(path), "40"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert reader.returncode == 0, reader.stderr[-2000:]
        counts = json.loads(reader.stdout)
        assert all(n % 5 == 0 and n >= 15 for n in counts), counts  # never half a round
        assert counts == sorted(counts)  # a newer snapshot never goes back
        writer.send_signal(signal.SIGKILL)  # killed at any point: mid-round or mid-snapshot
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    con = snapshot.connect(path)  # still readable, and still whole
    n = con.execute("SELECT count(*) FROM elixir_versions").fetchone()[0]
    assert n % 5 == 0 and n >= max(counts)


_KILLED_MID_SNAPSHOT = textwrap.dedent(
    """
    import pathlib, sys, time
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.duckdb import snapshot
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.store import SQLStore

    store = SQLStore(SQLDatabase(sqlite_url(pathlib.Path(sys.argv[1])), home=pathlib.Path(sys.argv[1])))
    fields = {"id": "new", "name": "n", "identity": "x", "expertise": ["a"], "principles": ["p"]}
    store.save_elixir(parse_elixir(fields))
    real = pathlib.Path.write_text

    def stall(self, *args, **kwargs):  # every table is copied into the temporary folder; stop before publishing
        if self.name == "manifest.json":
            print("mid-snapshot", flush=True)
            time.sleep(600)
        return real(self, *args, **kwargs)

    pathlib.Path.write_text = stall
    snapshot.refresh(store.db)
    """
)


@pytest.mark.slow
def test_a_writer_killed_mid_snapshot_leaves_the_previous_snapshot_whole(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = store.db.path
    store.save_elixir(_elixir("old"))
    first = snapshot.refresh(store.db)
    store.db.close()
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_MID_SNAPSHOT, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "mid-snapshot", writer.stderr
        root = snapshot.snapshot_root(path)
        partial = [p for p in root.glob(".tmp-*") if list(p.glob("*.parquet"))]
        assert partial  # the new snapshot's tables were being written
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert snapshot.current(root) == first  # the pointer still names the previous, complete snapshot
    con = snapshot.connect(path)
    assert con.execute("SELECT id FROM elixir_versions").fetchall() == [("old",)]
    con.close()
    # the next refresh publishes the writer's committed row and clears the dead writer's leftovers
    newer = snapshot.refresh(_store(tmp_path).db)
    assert snapshot.current(root) == newer and not list(root.glob(".tmp-*"))
    con = snapshot.connect(path)
    assert sorted(r[0] for r in con.execute("SELECT id FROM elixir_versions").fetchall()) == ["new", "old"]


def test_a_refresh_waits_for_a_quiet_writer_but_not_past_the_maximum_delay() -> None:
    first = 100.0
    # quiet since 100: due half a second later (the last refresh long ago, and cheap)
    assert snapshot.refresh_due(first, first, last=0.0, cost=0.01) == first + snapshot.QUIET_S
    # a writer that never pauses: at the latest MAX_DELAY_S after the request
    busy = snapshot.refresh_due(first + 60.0, first, last=0.0, cost=0.01)
    assert busy == first + snapshot.MAX_DELAY_S


def test_a_refresh_is_spaced_by_its_own_cost_so_a_large_home_takes_a_bounded_share_of_the_cpu() -> None:
    first, last = 100.0, 99.0
    cheap = snapshot.refresh_due(first + 60.0, first, last, cost=0.01)
    assert cheap == first + snapshot.MAX_DELAY_S  # a small home: the fixed bounds decide
    for cost in (0.5, 2.0, 8.0):  # the refresh of a larger home takes longer
        due = snapshot.refresh_due(first + 60.0, first, last, cost)
        assert due == max(first + snapshot.MAX_DELAY_S, last + snapshot.DUTY * cost)
        assert cost / (due - last) <= 1 / snapshot.DUTY  # its share of the time between refreshes
    quiet = snapshot.refresh_due(first, first, last, cost=2.0)  # a pause does not bring it forward
    assert quiet == last + snapshot.DUTY * 2.0


class _Copies:
    """A live store for the background refresher: counts its copies (of no tables); with ``again``, a
    write asks for another refresh while the first one copies."""

    def __init__(self, home: Path, *, again: bool = False) -> None:
        self.path = home / "furnace.sqlite"
        self.sealer = sealer_for(home, "k" * 32)
        self.idle_s = 0.0  # a writer that never pauses
        self.copies = 0
        self.again = again

    def exists(self) -> bool:
        return True

    def write_parquet(self, folder: Path, base: Any = None) -> tuple[Written, int]:
        self.copies += 1
        if self.again and self.copies == 1:
            snapshot.request(self)
        return Written(), 5


@pytest.fixture
def never_due(monkeypatch) -> None:
    """Background refreshes an hour from due (a busy writer, the maximum delay an hour): only
    ``wait_pending`` brings one on."""
    monkeypatch.setattr(snapshot, "QUIET_S", 3600.0)
    monkeypatch.setattr(snapshot, "MAX_DELAY_S", 3600.0)


def test_requests_are_coalesced_into_one_refresh_that_wait_pending_hurries(tmp_path: Path, never_due) -> None:
    source = _Copies(tmp_path)
    for _ in range(5):
        snapshot.request(source)
    snapshot.wait_pending(timeout=60)
    assert source.copies == 1  # five requests, one refresh, done now rather than an hour from now
    assert snapshot.current(snapshot.snapshot_root(source.path)) is not None
    snapshot.request(source)  # the refresher went idle: a later request has a refresh of its own
    snapshot.wait_pending(timeout=60)
    assert source.copies == 2


def test_a_request_while_a_refresh_copies_gets_a_refresh_of_its_own(tmp_path: Path, never_due) -> None:
    source = _Copies(tmp_path, again=True)
    snapshot.request(source)
    snapshot.wait_pending(timeout=60)
    assert source.copies == 2  # the write during the first copy may be missing from it: copied again


_FORKED = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.duckdb import snapshot
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.store import SQLStore

    def elixir(id):
        return parse_elixir({"id": id, "name": id, "identity": "x", "expertise": ["a"], "principles": ["p"]})

    home = Path(sys.argv[1])
    store = SQLStore(SQLDatabase(sqlite_url(home), home=home))
    store.save_elixir(elixir("a"))
    snapshot.QUIET_S = snapshot.MAX_DELAY_S = 3600.0
    parent = snapshot.connect(store.db.path, source=store.db)  # this process's views
    snapshot.request(store.db)  # its refresher thread waits an hour
    time.sleep(0.5)  # (settled into its wait)
    pid = os.fork()
    if pid == 0:  # the child: its own views, and a refresher thread of its own
        signal.alarm(60)
        store.db.engine.dispose(close=False)  # the parent's pooled connections stay the parent's
        store.save_elixir(elixir("b"))
        snapshot.request(store.db)
        snapshot.wait_pending(timeout=30)
        child = snapshot.connect(store.db.path)
        n = child.execute("SELECT count(*) FROM elixir_versions").fetchone()[0]
        os._exit(0 if n == 2 else 3)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), parent.execute("SELECT count(*) FROM elixir_versions").fetchone()[0])
    snapshot.wait_pending(timeout=30)
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_views_and_refresher(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _FORKED, str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "1"]  # the child read its own refresh; the parent's views are intact
