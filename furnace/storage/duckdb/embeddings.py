"""Embedding vectors in DuckDB (table ``embeddings``, migration 0008), keyed by model and text hash."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from furnace.storage.duckdb.db import Database


class DuckDBVectors:
    """:class:`furnace.fusion.embedding.VectorStore` on the furnace DuckDB file."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get_many(self, model: str, text_hashes: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors among ``text_hashes`` (one query)."""
        if not text_hashes:
            return {}
        rows = self.db.query(
            "SELECT text_hash, vector FROM embeddings WHERE model = ? AND list_contains(?, text_hash)",
            [model, list(text_hashes)],
        )
        return {h: [float(x) for x in v] for h, v in rows}

    def put_many(self, model: str, vectors: Mapping[str, Sequence[float]]) -> None:
        """Store vectors (one transaction; a vector already stored for a hash is kept)."""
        if not vectors:
            return
        rows = [[model, h, [float(x) for x in v]] for h, v in vectors.items()]
        self.db.write(
            lambda con: con.executemany(
                "INSERT INTO embeddings (model, text_hash, vector) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", rows
            )
        )
