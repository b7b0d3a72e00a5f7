"""The composition root: what a Runtime opens, when, and what its close() leaves behind."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from furnace.llm.seam import TaskKind, system_user
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings

PERSONA = {"name": "Ada", "language": "en", "identity": "x", "expertise": ["testing"], "principles": ["Be precise."]}


def test_nothing_is_opened_before_first_use_and_before_open_runs_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seen: list[tuple[Path, bool]] = []
    runtime = Runtime(FurnaceSettings(home=home), before_open=lambda h: seen.append((h, h.exists())))
    assert runtime.settings.home == home and seen == [] and not home.exists()
    home.mkdir()
    runtime.store.list_elixirs()
    assert seen == [(home, True)] and (home / "furnace.sqlite").exists()
    runtime.content_store  # noqa: B018  (same database: the hook ran once)
    assert len(seen) == 1


def test_close_writes_buffered_ledger_rows_and_frees_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    runtime = Runtime(FurnaceSettings(home=home, model=None))
    request = system_user(TaskKind.REPLY, "sys", "hi", inputs={"persona": PERSONA, "message": "How to start?"})
    runtime.llm.for_run("r1").complete(request)
    runtime.close()
    store = home / "furnace.sqlite"
    assert not store.with_name("furnace.sqlite-wal").exists()  # every connection closed: all is in the file
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)  # another owner reads it alone
    try:
        assert con.execute("SELECT count(*), min(run_id) FROM llm_calls").fetchone() == (1, "r1")
    finally:
        con.close()
    assert runtime.llm.totals("r1").calls == 1  # the runtime opens the file again on its next use
    runtime.close()


def test_close_of_an_unused_runtime_opens_nothing(tmp_path: Path) -> None:
    runtime = Runtime(FurnaceSettings(home=tmp_path / "missing"))
    runtime.close()
    assert not (tmp_path / "missing").exists()


def test_runner_dask_without_the_dask_extra_says_how_to_install_it(monkeypatch):
    """The default install has no Dask: ``--runner dask`` (with or without --prefect) is refused with the extra
    to install, and nothing else (``furnace serve``, ``--prefect`` on threads) needs it."""
    import sys

    import pytest

    import furnace.adapters
    from furnace.domain.errors import InputError
    from furnace.runtime import dask_cluster

    monkeypatch.delitem(sys.modules, "furnace.adapters.dask_cluster", raising=False)
    monkeypatch.delattr(furnace.adapters, "dask_cluster", raising=False)  # imported by an earlier test
    for name in [n for n in sys.modules if n.split(".")[0] in ("dask", "distributed")] + ["distributed"]:
        monkeypatch.setitem(sys.modules, name, None)  # what an install without the extra sees
    with pytest.raises(InputError, match=r"pip install 'furnace\[dask\]'"):
        dask_cluster()
    monkeypatch.delitem(sys.modules, "furnace_flows.evolution", raising=False)
    import furnace_flows.evolution  # the flows import without Dask

    assert furnace_flows.evolution.run_evolution
