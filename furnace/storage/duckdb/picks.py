"""People's picks in the furnace DuckDB file (table ``human_picks``, migration 0018): a
:class:`~furnace.scoring.picks.PickStore`.

Insert-only, one guarded insert per pick (``WHERE NOT EXISTS`` on its id), so two processes adding
picks at once both land (DuckDB's file lock takes turns); undo is one ``UPDATE`` that sets
``undone_at`` where it is still empty. Each pick carries a keyed seal (and its undo another), checked on
every read: a pick written or changed outside furnace is refused, named (docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import duckdb

from furnace.scoring.picks import (
    PICK_COLUMNS,
    Pick,
    as_stored,
    check_undo,
    naive_utc,
    pick_row,
    pick_seal,
    sealed_pick,
    undo_seal,
)
from furnace.storage.duckdb.db import Database

_COLS = ", ".join(PICK_COLUMNS)


class DuckDBPicks:
    """People's picks, kept in DuckDB."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] | None = None) -> None:
        self.db = db
        self._clock = clock or (lambda: datetime.now(UTC))

    def _now(self) -> datetime:
        return as_stored(self._clock())

    def _read(self, where: str, params: list[Any]) -> list[Pick]:
        rows = self.db.query(f"SELECT {_COLS}, seal, undo_seal FROM human_picks WHERE {where}", params)
        return [sealed_pick(self.db.sealer, r) for r in rows]

    def _get(self, pick_id: str) -> Pick | None:
        found = self._read("pick_id = ?", [pick_id])
        return found[0] if found else None

    def add(self, pick: Pick) -> Pick:
        row = replace(pick, created_at=self._now(), undone_at=None)
        values = list(pick_row(row).values())

        def insert(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                f"INSERT INTO human_picks ({_COLS}, seal) SELECT {', '.join(['?'] * len(values))}, ?"
                " WHERE NOT EXISTS (SELECT 1 FROM human_picks WHERE pick_id = ?)",
                [*values, pick_seal(self.db.sealer, row), row.pick_id],
            )

        self.db.write_one(insert)
        stored = self._get(pick.pick_id)
        assert stored is not None  # just inserted, or there already
        return stored

    def undo(self, pick_id: str, *, who: str) -> Pick:
        pick = check_undo(self._get(pick_id), pick_id, who)
        if pick.undone:
            return pick
        now = self._now()
        seal = undo_seal(self.db.sealer, replace(pick, undone_at=now))

        def mark(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                "UPDATE human_picks SET undone_at = ?, undo_seal = ? WHERE pick_id = ? AND undone_at IS NULL",
                [naive_utc(now), seal, pick_id],
            )

        self.db.write_one(mark)
        stored = self._get(pick_id)
        assert stored is not None
        return stored

    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        where = "" if include_undone else " AND undone_at IS NULL"
        return self._read(f"experiment_id = ?{where} ORDER BY created_at, pick_id", [experiment_id])

    def last(self, experiment_id: str, who: str) -> Pick | None:
        found = self._read(
            "experiment_id = ? AND who = ? AND undone_at IS NULL ORDER BY created_at DESC, pick_id DESC LIMIT 1",
            [experiment_id, who],
        )
        return found[0] if found else None
