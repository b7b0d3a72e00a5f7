"""The synthesis cache's key-value store (table ``kv``) and the embedding vectors (table ``embeddings``)
in the relational store: plain transactions, first writer wins on a key."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, or_, select

from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import embeddings, kv
from furnace.storage.sql.store import chunks

# the synthesis cache's statements, built once (SQLAlchemy memoizes a statement's cache key on the object;
# a list of keys is an expanding parameter)
_GET = select(kv.c.value).where(
    kv.c.key == bindparam("key"), or_(kv.c.expires_at.is_(None), kv.c.expires_at > bindparam("now"))
)
_EXPIRED = delete(kv).where(
    kv.c.key.in_(bindparam("keys", expanding=True)), kv.c.expires_at.is_not(None), kv.c.expires_at <= bindparam("now")
)
_STORED = select(kv.c.key, kv.c.value).where(kv.c.key.in_(bindparam("keys", expanding=True)))


def _ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC).replace(tzinfo=None)


class SQLKV:
    """JSON values by key with expiry (:class:`furnace.fusion.synthesis.KV`)."""

    def __init__(self, db: SQLDatabase, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self._clock = clock
        if db.dialect == "sqlite":  # a build's entries are written inside its agent's transaction: compiled now
            row = dict.fromkeys(c.name for c in kv.columns)  # an entry's row names every column
            for statement, params in (
                (_EXPIRED, [{"keys": [], "now": None}]),
                (db.insert_if_absent(kv), [row]),
                (db.insert_if_absent(kv), [row, row]),
                (_STORED, [{"keys": []}]),
            ):
                db.compile_ahead(statement, params)
        # the common cases on SQLite's driver (SQLDatabase.read, .insert_on_driver): a read, new keys' inserts
        self._driver_get = db.prepare(_GET)
        self._driver_put = db.prepare(db.insert_if_absent(kv))

    def get(self, key: str) -> dict[str, Any] | None:
        """The live value under ``key``."""
        now = _ts(self._clock())
        rows = self.db.read(self._driver_get, _GET, {"key": key, "now": now})
        value: dict[str, Any] | None = json.loads(rows[0][0]) if rows else None
        return value

    def put_if_absent(self, key: str, value: dict[str, Any], ttl_s: float | None = None) -> dict[str, Any]:
        """Insert unless a live value exists (an expired one is replaced); the stored (winning) value."""
        return self.put_many_if_absent([(key, value, ttl_s)])[0]

    def put_many_if_absent(self, items: Sequence[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
        """``put_if_absent`` for each ``(key, value, ttl_s)`` in one transaction (inside a unit's, it joins
        it: the synthesis cache's entries commit with their agent); the stored value of each, in order."""
        first: dict[str, tuple[dict[str, Any], float | None]] = {}
        for key, value, ttl_s in items:
            first.setdefault(key, (value, ttl_s))
        if not first:
            return []
        now = self._clock()
        texts = {key: json.dumps(value, ensure_ascii=False, sort_keys=True) for key, (value, _) in first.items()}
        rows = [
            {
                "key": key,
                "value": texts[key],
                "created_at": _ts(now),
                "expires_at": None if ttl_s is None else _ts(now + ttl_s),
            }
            for key, (_, ttl_s) in first.items()
        ]
        if self.db.insert_on_driver([(self._driver_put, row, True) for row in rows]):  # every key new: all stored
            return [json.loads(texts[key]) for key, _, _ in items]

        def work(conn: Connection) -> dict[str, dict[str, Any]]:
            for part in chunks(list(first)):
                conn.execute(_EXPIRED, {"keys": list(part), "now": _ts(now)})
            conn.execute(self.db.insert_if_absent(kv), rows)
            stored: dict[str, dict[str, Any]] = {}
            for part in chunks(list(first)):
                for key, text in conn.execute(_STORED, {"keys": list(part)}):
                    stored[key] = json.loads(text)
            return stored

        stored = self.db.write(work)
        return [stored.get(key, value) for key, value, _ in items]

    def purge_expired(self) -> int:
        """Delete expired rows; returns how many went."""
        now = _ts(self._clock())
        expired = and_(kv.c.expires_at.is_not(None), kv.c.expires_at <= now)

        def work(conn: Connection) -> int:
            return len(conn.execute(delete(kv).where(expired).returning(kv.c.key)).all())

        return self.db.write(work)


class SQLVectors:
    """:class:`furnace.fusion.embedding.VectorStore`: vectors by model and text hash, exact as computed."""

    def __init__(self, db: SQLDatabase) -> None:
        self.db = db

    def get_many(self, model: str, text_hashes: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors among ``text_hashes``."""
        out: dict[str, list[float]] = {}
        with self.db.connect() as conn:
            for part in chunks(list(dict.fromkeys(text_hashes))):
                query = select(embeddings.c.text_hash, embeddings.c.vector).where(
                    embeddings.c.model == model, embeddings.c.text_hash.in_(part)
                )
                out.update((h, [float(x) for x in json.loads(v)]) for h, v in conn.execute(query))
        return out

    def put_many(self, model: str, vectors: Mapping[str, Sequence[float]]) -> None:
        """Store vectors in one transaction (a vector already stored for a hash is kept)."""
        if not vectors:
            return
        rows = [
            {"model": model, "text_hash": h, "vector": json.dumps([float(x) for x in v])} for h, v in vectors.items()
        ]
        self.db.write(lambda conn: conn.execute(self.db.insert(embeddings).on_conflict_do_nothing(), rows))
