"""Atomic writes of the live store on SQLite and PostgreSQL (``sql_db``): a save that fails half-way
leaves nothing, a process killed (SIGKILL) inside a transaction leaves the store as it was, and one
killed after its commits loses none of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.lineage import Lineage
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .test_contract import make_agent

REPO = Path(__file__).resolve().parents[2]


def test_save_agent_is_atomic(sql_db: Any) -> None:
    """A failure after the child elixir row is written rolls the whole save back."""
    calls = []

    def failing_clock() -> datetime:
        calls.append(1)
        if len(calls) == 4:  # 1-2: parents, 3: child elixir row, 4: agent row
            raise RuntimeError("disk on fire")
        return datetime(2026, 1, 1, tzinfo=UTC)

    store = SQLStore(sql_db, clock=failing_clock)
    a = store.save_elixir(make_elixir("Editor"))
    b = store.save_elixir(make_elixir("Coach"))
    agent = make_agent([a, b])
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.save_agent(agent)
    assert sql_db.query("SELECT count(*) FROM elixir_versions WHERE id = ?", [agent.id]) == [(0,)]
    assert sql_db.query("SELECT count(*) FROM agents") == [(0,)]
    assert sql_db.query("SELECT count(*) FROM lineage_edges") == [(0,)]
    assert store.save_agent(agent) is True  # and a retry then succeeds completely
    assert store.get_agent(agent.id).elixir.version == 1
    assert sql_db.query("SELECT count(*) FROM lineage_edges") == [(2,)]


def test_lineage_round_trips_as_json_with_its_hash(sql_db: Any) -> None:
    store = SQLStore(sql_db)
    agent = make_agent([store.save_elixir(make_elixir("Editor"))], operator="mutation")
    store.save_agent(agent)
    stored = json.loads(sql_db.query("SELECT lineage FROM agents WHERE id = ?", [agent.id])[0][0])
    assert (stored["lineage_hash"], stored["operator"]) == (agent.lineage_hash, "mutation")
    assert Lineage.model_validate(stored).lineage_hash == agent.lineage_hash
    assert sql_db.query("SELECT parent, parent_version, operator, op_version FROM lineage_edges") == [
        ("editor", 1, "mutation", "1")
    ]


_KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.sql.db import SQLDatabase
    from furnace.storage.sql.store import SQLStore
    from furnace.storage.store import unit_of_work

    store = SQLStore(SQLDatabase(sys.argv[1], home=Path(sys.argv[2])))
    with unit_of_work(store):  # one transaction: ten versions of "shared" and ten new elixirs
        for i in range(10):
            shared = {"name": "Shared", "identity": "x", "expertise": ["a"], "principles": [f"killed {i}"]}
            store.save_elixir(parse_elixir(shared))
            lost = {"name": f"Lost {i}", "identity": "x", "expertise": ["a"], "principles": ["p"]}
            store.save_elixir(parse_elixir(lost))
        print("in the transaction", flush=True)
        time.sleep(600)  # killed here, before the commit
    """
)


def _kill_when(script: str, url: str, home: Path, line: str) -> None:
    """Run ``script`` (argv: the store's URL, a home) in a process and SIGKILL it once it prints ``line``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, url, str(home)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == line, proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_process_killed_inside_a_transaction_leaves_the_store_consistent(sql_db: Any, tmp_path: Path) -> None:
    store = SQLStore(sql_db)
    store.save_elixir(make_elixir("Shared", principles=["before"]))
    url = sql_db.url.render_as_string(hide_password=False)
    _kill_when(_KILLED, url, tmp_path, "in the transaction")
    fresh = SQLStore(type(sql_db)(url, home=tmp_path))  # another process's view
    assert [e.principles for e in fresh.history("shared")] == [("before",)]  # nothing of the killed work
    assert not any(e.id.startswith("lost") for e in fresh.list_elixirs())
    # the store takes writes at once (no lock left behind), and versions stay contiguous
    ref = fresh.save_elixir(make_elixir("Shared", principles=["after"]))
    assert ref.version == 2
    assert [e.version for e in fresh.history("shared")] == [1, 2]
    fresh.db.close()


_COMMITTED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.sql.db import SQLDatabase
    from furnace.storage.sql.store import SQLStore

    store = SQLStore(SQLDatabase(sys.argv[1], home=Path(sys.argv[2])))
    for i in range(20):  # twenty transactions, each committed on its own
        store.save_elixir(parse_elixir({"name": "Kept", "identity": "x", "expertise": ["a"], "principles": [f"v{i}"]}))
    print("committed", flush=True)
    time.sleep(600)  # killed here: the store never closed, nothing checkpointed on the way out
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_process_killed_after_its_commits_loses_none_of_them(sql_db: Any, tmp_path: Path) -> None:
    """What ``synchronous=NORMAL`` (SQLite) keeps: every committed transaction survives the writer's crash."""
    url = sql_db.url.render_as_string(hide_password=False)
    _kill_when(_COMMITTED, url, tmp_path, "committed")
    fresh = SQLStore(type(sql_db)(url, home=tmp_path))
    assert [e.principles for e in fresh.history("kept")] == [(f"v{i}",) for i in range(20)]
    fresh.db.close()
