"""People's picks in the furnace DuckDB file (table ``human_picks``, migration 0018): a
:class:`~furnace.scoring.picks.PickStore`.

Insert-only, one guarded insert per pick (``WHERE NOT EXISTS`` on its id), so two processes adding
picks at once both land (DuckDB's file lock takes turns); undo is one ``UPDATE`` that sets
``undone_at`` where it is still empty. Each pick carries a keyed seal (and its undo another), checked on
every read: a pick written or changed outside furnace is refused, named (docs/reliability.md). The
seals and timestamps are :class:`~furnace.scoring.picks.SealedPicks`', the same as in the relational store.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from furnace.scoring.picks import PICK_COLUMNS, Pick, SealedPicks, sealed_pick
from furnace.storage.duckdb.db import Database

_COLS = ", ".join(PICK_COLUMNS)


class DuckDBPicks(SealedPicks):
    """People's picks, kept in DuckDB."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(lambda: db.sealer, clock)
        self.db = db

    def _read(self, where: str, params: list[Any]) -> list[Pick]:
        rows = self.db.query(f"SELECT {_COLS}, seal, undo_seal FROM human_picks WHERE {where}", params)
        return [sealed_pick(self.db.sealer, r) for r in rows]

    def _get(self, pick_id: str) -> Pick | None:
        found = self._read("pick_id = ?", [pick_id])
        return found[0] if found else None

    def _insert(self, row: dict[str, Any]) -> None:
        self.db.write_one(
            lambda con: con.execute(
                f"INSERT INTO human_picks ({', '.join(row)}) SELECT {', '.join(['?'] * len(row))}"
                " WHERE NOT EXISTS (SELECT 1 FROM human_picks WHERE pick_id = ?)",
                [*row.values(), row["pick_id"]],
            )
        )

    def _mark_undone(self, pick_id: str, undone_at: datetime, seal: str) -> None:
        self.db.write_one(
            lambda con: con.execute(
                "UPDATE human_picks SET undone_at = ?, undo_seal = ? WHERE pick_id = ? AND undone_at IS NULL",
                [undone_at, seal, pick_id],
            )
        )

    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        where = "" if include_undone else " AND undone_at IS NULL"
        return self._read(f"experiment_id = ?{where} ORDER BY created_at, pick_id", [experiment_id])

    def last(self, experiment_id: str, who: str) -> Pick | None:
        found = self._read(
            "experiment_id = ? AND who = ? AND undone_at IS NULL ORDER BY created_at DESC, pick_id DESC LIMIT 1",
            [experiment_id, who],
        )
        return found[0] if found else None
