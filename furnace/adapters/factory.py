"""Build adapters from settings. Called only at the edges (CLI, flows, app).

Each builder is owned by the feature that needs it; core code receives the
built objects as arguments and never calls these.
"""

from __future__ import annotations

from typing import Any

from furnace.settings import FurnaceSettings


def build_db(settings: FurnaceSettings) -> Any:
    """The DuckDB database under ``settings.home`` (migrated)."""
    from furnace.adapters.duckdb_db import Database

    return Database(settings.db_path)


def build_store(settings: FurnaceSettings, *, db: Any | None = None) -> Any:
    """The elixir/agent/lineage store on DuckDB."""
    from furnace.adapters.duckdb_store import DuckDBStore

    return DuckDBStore(db or build_db(settings))


def build_llm(settings: FurnaceSettings, *, db: Any | None = None) -> Any:
    """The configured model behind the response cache and accounting."""
    raise NotImplementedError("build_llm: owned by the LLM seam (issue 3)")


def build_embedder(settings: FurnaceSettings) -> Any:
    """The real MiniLM embedder when installed, else the hash fallback (with a warning)."""
    raise NotImplementedError("build_embedder: owned by the furnace operators (issue 3)")
