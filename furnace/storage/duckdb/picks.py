"""People's picks in the furnace DuckDB file (table ``human_picks``, migration 0018): a
:class:`~furnace.scoring.picks.PickStore`.

Insert-only, one guarded insert per pick (``WHERE NOT EXISTS`` on its id), so two processes adding
picks at once both land (DuckDB's file lock takes turns); undo is one ``UPDATE`` that sets
``undone_at`` where it is still empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import duckdb

from furnace.scoring.picks import Pick, check_undo
from furnace.storage.duckdb.db import Database

_COLS = (
    "pick_id, experiment_id, probe, agent_a, generation_a, agent_b, generation_b, choice, who, reason,"
    " order_seed, created_at, undone_at"
)


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=UTC)


def _pick(row: tuple[Any, ...]) -> Pick:
    values = dict(zip([c.strip() for c in _COLS.split(",")], row, strict=True))
    values["created_at"] = _aware(values["created_at"])
    values["undone_at"] = _aware(values["undone_at"])
    return Pick(**values)


class DuckDBPicks:
    """People's picks, kept in DuckDB."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] | None = None) -> None:
        self.db = db
        self._clock = clock or (lambda: datetime.now(UTC))

    def _get(self, pick_id: str) -> Pick | None:
        rows = self.db.query(f"SELECT {_COLS} FROM human_picks WHERE pick_id = ?", [pick_id])
        return _pick(rows[0]) if rows else None

    def add(self, pick: Pick) -> Pick:
        row = replace(pick, created_at=self._clock(), undone_at=None)

        def insert(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                f"INSERT INTO human_picks ({_COLS}) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL"
                " WHERE NOT EXISTS (SELECT 1 FROM human_picks WHERE pick_id = ?)",
                [
                    row.pick_id,
                    row.experiment_id,
                    row.probe,
                    row.agent_a,
                    row.generation_a,
                    row.agent_b,
                    row.generation_b,
                    row.choice,
                    row.who,
                    row.reason,
                    row.order_seed,
                    _naive(row.created_at or self._clock()),
                    row.pick_id,
                ],
            )

        self.db.write_one(insert)
        stored = self._get(pick.pick_id)
        assert stored is not None  # just inserted, or there already
        return stored

    def undo(self, pick_id: str, *, who: str) -> Pick:
        check_undo(self._get(pick_id), pick_id, who)
        now = _naive(self._clock())

        def mark(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("UPDATE human_picks SET undone_at = ? WHERE pick_id = ? AND undone_at IS NULL", [now, pick_id])

        self.db.write_one(mark)
        stored = self._get(pick_id)
        assert stored is not None
        return stored

    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        where = "" if include_undone else " AND undone_at IS NULL"
        rows = self.db.query(
            f"SELECT {_COLS} FROM human_picks WHERE experiment_id = ?{where} ORDER BY created_at, pick_id",
            [experiment_id],
        )
        return [_pick(r) for r in rows]

    def last(self, experiment_id: str, who: str) -> Pick | None:
        rows = self.db.query(
            f"SELECT {_COLS} FROM human_picks WHERE experiment_id = ? AND who = ? AND undone_at IS NULL"
            " ORDER BY created_at DESC, pick_id DESC LIMIT 1",
            [experiment_id, who],
        )
        return _pick(rows[0]) if rows else None
