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

from furnace.scoring.picks import Pick, check_undo
from furnace.storage.duckdb.db import Database
from furnace.storage.seals import Sealer, check

_COLS = (
    "pick_id, experiment_id, probe, agent_a, generation_a, agent_b, generation_b, choice, who, reason,"
    " order_seed, created_at, undone_at"
)
_NAMES = [c.strip() for c in _COLS.split(",")]


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=UTC)


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def pick_seal(sealer: Sealer, pick: Pick) -> str:
    """The keyed seal of a pick as made (every field but its undo)."""
    fields = [getattr(pick, name) for name in _NAMES[:-2]] + [_stamp(pick.created_at)]
    return sealer.mac("pick", fields)


def undo_seal(sealer: Sealer, pick: Pick) -> str:
    """The keyed seal of a pick's undo."""
    return sealer.mac("pick undone", pick.pick_id, _stamp(pick.undone_at))


def _pick(sealer: Sealer, row: tuple[Any, ...]) -> Pick:
    *fields, seal, undone = row
    values = dict(zip(_NAMES, fields, strict=True))
    values["created_at"] = _aware(values["created_at"])
    values["undone_at"] = _aware(values["undone_at"])
    pick = Pick(**values)
    check(seal, pick_seal(sealer, pick), f"pick {pick.pick_id}")
    if pick.undone or undone is not None:
        check(undone, undo_seal(sealer, pick), f"the undo of pick {pick.pick_id}")
    return pick


class DuckDBPicks:
    """People's picks, kept in DuckDB."""

    def __init__(self, db: Database, *, clock: Callable[[], datetime] | None = None) -> None:
        self.db = db
        self._clock = clock or (lambda: datetime.now(UTC))

    def _now(self) -> datetime:
        """Now, as it reads back (UTC, naive in the table): what a seal covers."""
        return _aware(_naive(self._clock())) or datetime.now(UTC)

    def _read(self, where: str, params: list[Any]) -> list[Pick]:
        rows = self.db.query(f"SELECT {_COLS}, seal, undo_seal FROM human_picks WHERE {where}", params)
        return [_pick(self.db.sealer, r) for r in rows]

    def _get(self, pick_id: str) -> Pick | None:
        found = self._read("pick_id = ?", [pick_id])
        return found[0] if found else None

    def add(self, pick: Pick) -> Pick:
        row = replace(pick, created_at=self._now(), undone_at=None)
        assert row.created_at is not None
        values = [getattr(row, name) for name in _NAMES[:-2]] + [_naive(row.created_at)]

        def insert(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                f"INSERT INTO human_picks ({_COLS}, seal) SELECT {', '.join(['?'] * len(_NAMES[:-1]))}, NULL, ?"
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
                [_naive(now), seal, pick_id],
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
