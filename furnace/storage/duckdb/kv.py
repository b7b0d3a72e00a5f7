"""A DuckDB-backed KV for the synthesis cache (table ``kv``, migration 0003).

``put_if_absent`` is one guarded insert for a new key (``WHERE NOT EXISTS``:
``ON CONFLICT DO NOTHING`` costs ~2.5 ms more CPU in DuckDB 2.0), a read for a
key with a live row, and one transaction (drop the expired row, insert, read
back) for a key whose row expired; ``put_many_if_absent`` inserts every new key
of several in one guarded insert (a fusion's cache entries, in the transaction
that stores its agent). DuckDB's file lock serialises writers across
processes, so two processes racing on one key see one winner, and both return
the winner's value.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb

from furnace.storage.duckdb.db import Database


def _ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC).replace(tzinfo=None)


class DuckDBKV:
    """JSON values by key with TTL in the furnace DuckDB file."""

    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self._clock = clock

    def get(self, key: str) -> dict[str, Any] | None:
        """The live value under ``key``."""
        rows = self.db.query(
            "SELECT value FROM kv WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)",
            [key, _ts(self._clock())],
        )
        return json.loads(rows[0][0]) if rows else None

    def put_if_absent(self, key: str, value: dict[str, Any], ttl_s: float | None = None) -> dict[str, Any]:
        """Insert unless a live value exists; return the stored (winning) value.

        The usual case is one statement: the key is new, and the insert (guarded by ``WHERE NOT
        EXISTS``) returns the value. A key that has a row already is read: a live row wins; an
        expired one is replaced in one transaction (drop it, insert, read back the winner)."""
        now = self._clock()
        expires = None if ttl_s is None else _ts(now + ttl_s)
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)

        def insert_new(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
            # a same-process thread that commits the same key first makes this retry, and the
            # retry finds its row
            return con.execute(
                "INSERT INTO kv (key, value, created_at, expires_at) SELECT ?, ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM kv WHERE key = ?) RETURNING value",
                [key, text, _ts(now), expires, key],
            ).fetchall()

        if self.db.write_one(insert_new):
            return value
        live = self.get(key)
        if live is not None:
            return live

        def replace_expired(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
            con.execute("DELETE FROM kv WHERE key = ? AND expires_at IS NOT NULL AND expires_at <= ?", [key, _ts(now)])
            con.execute(
                "INSERT INTO kv (key, value, created_at, expires_at) SELECT ?, ?, ?, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM kv WHERE key = ?)",
                [key, text, _ts(now), expires, key],
            )
            stored: dict[str, Any] = json.loads(
                con.execute("SELECT value FROM kv WHERE key = ?", [key]).fetchall()[0][0]
            )
            return stored

        return self.db.write(replace_expired)

    def put_many_if_absent(self, items: Sequence[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
        """``put_if_absent`` for each ``(key, value, ttl_s)``, the new keys in one guarded insert; the stored
        (winning) value of each, in order. Inside a unit's transaction it joins it (the synthesis cache's
        entries commit with their agent)."""
        now = self._clock()
        first: dict[str, tuple[dict[str, Any], float | None]] = {}
        for key, value, ttl_s in items:
            first.setdefault(key, (value, ttl_s))
        if not first:
            return []
        params: list[Any] = []
        for key, (value, ttl_s) in first.items():
            expires = None if ttl_s is None else _ts(now + ttl_s)
            params += [key, json.dumps(value, ensure_ascii=False, sort_keys=True), _ts(now), expires]
        keys = list(first)
        rows = ", ".join(["(?, ?::JSON, ?::TIMESTAMP, ?::TIMESTAMP)"] * len(keys))

        def insert_new(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
            return con.execute(
                f"INSERT INTO kv (key, value, created_at, expires_at) SELECT * FROM (VALUES {rows})"
                f" WHERE col0 NOT IN (SELECT key FROM kv WHERE key IN ({', '.join(['?'] * len(keys))})) RETURNING key",
                [*params, *keys],
            ).fetchall()

        inserted = {row[0] for row in self.db.write_one(insert_new)}
        # a key that had a row: its live value wins (an expired row is replaced, as put_if_absent does)
        stored = {
            key: value if key in inserted else self.put_if_absent(key, value, ttl_s)
            for key, (value, ttl_s) in first.items()
        }
        return [stored[key] for key, _, _ in items]

    def purge_expired(self) -> int:
        """Delete expired rows; returns how many went."""
        with self.db.transaction() as con:
            rows = con.execute(
                "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ? RETURNING key", [_ts(self._clock())]
            ).fetchall()
        return len(rows)
