"""The app bench's bulk load fills the runtime's live store with rows its sealed reads accept.

``python -m bench app`` crashed when the store moved to SQLAlchemy (it asked the runtime for the DuckDB
handle it no longer has) and nothing noticed; this runs its load, small, and reads the rows back as the
app's pages do (no timing here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_app
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings


def test_the_app_benchs_bulk_rows_are_read_back_by_the_runtimes_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_app, "PERSONAS", 20)
    monkeypatch.setattr(bench_app, "GENERATIONS", 4)
    monkeypatch.setattr(bench_app, "PER_GENERATION", 5)
    personas, edges, middle = bench_app._bulk(tmp_path)
    assert (personas, edges) == (20, 4 * 5 * 2)
    runtime = Runtime(FurnaceSettings(home=tmp_path, embedder="hash"))
    try:
        store = runtime.store
        library = {e.id for e in store.list_elixirs()}  # every body and seal verified on read
        assert len(library) == 20
        agent = store.get_agent(middle)  # its keyed seal verifies
        ancestors = {node.id for node in store.ancestors(middle)}
        assert {p.id for p in agent.lineage.parents} <= ancestors  # the edges were loaded with the agents
        assert ancestors & library  # down to the library
    finally:
        runtime.close()
