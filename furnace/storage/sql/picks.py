"""People's picks in the relational store (table ``human_picks``, migration 0002): a
:class:`~furnace.scoring.picks.PickStore`.

Insert-only, one guarded insert per pick (``ON CONFLICT (pick_id) DO NOTHING``), so two processes adding
picks at once both land and the same id added twice keeps the first; undo is one ``UPDATE`` that sets
``undone_at`` where it is still empty. Each pick carries the same keyed seals as in DuckDB (and its undo
another), checked on every read: a pick written or changed outside furnace is refused, named
(docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update

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
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import human_picks

_ROW = [*(human_picks.c[name] for name in PICK_COLUMNS), human_picks.c.seal, human_picks.c.undo_seal]


class SQLPicks:
    """People's picks, kept in SQLite or PostgreSQL."""

    def __init__(self, db: SQLDatabase, *, clock: Callable[[], datetime] | None = None) -> None:
        self.db = db
        self._clock = clock or (lambda: datetime.now(UTC))

    def _read(self, *where: Any, order: tuple[Any, ...] = (), limit: int | None = None) -> list[Pick]:
        query = select(*_ROW).where(*where).order_by(*order).limit(limit)
        return [sealed_pick(self.db.sealer, row) for row in self.db.query(query)]

    def _get(self, pick_id: str) -> Pick | None:
        found = self._read(human_picks.c.pick_id == pick_id)
        return found[0] if found else None

    def add(self, pick: Pick) -> Pick:
        row = replace(pick, created_at=as_stored(self._clock()), undone_at=None)
        values = {**pick_row(row), "seal": pick_seal(self.db.sealer, row)}
        insert = self.db.insert(human_picks).values(values).on_conflict_do_nothing(index_elements=["pick_id"])
        self.db.write(lambda conn: conn.execute(insert))
        stored = self._get(pick.pick_id)
        assert stored is not None  # just inserted, or there already
        return stored

    def undo(self, pick_id: str, *, who: str) -> Pick:
        pick = check_undo(self._get(pick_id), pick_id, who)
        if pick.undone:
            return pick
        now = as_stored(self._clock())
        seal = undo_seal(self.db.sealer, replace(pick, undone_at=now))
        mark = (
            update(human_picks)
            .where(human_picks.c.pick_id == pick_id, human_picks.c.undone_at.is_(None))
            .values(undone_at=naive_utc(now), undo_seal=seal)
        )
        self.db.write(lambda conn: conn.execute(mark))
        stored = self._get(pick_id)
        assert stored is not None
        return stored

    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        where = [human_picks.c.experiment_id == experiment_id]
        if not include_undone:
            where.append(human_picks.c.undone_at.is_(None))
        return self._read(*where, order=(human_picks.c.created_at, human_picks.c.pick_id))

    def last(self, experiment_id: str, who: str) -> Pick | None:
        found = self._read(
            human_picks.c.experiment_id == experiment_id,
            human_picks.c.who == who,
            human_picks.c.undone_at.is_(None),
            order=(human_picks.c.created_at.desc(), human_picks.c.pick_id.desc()),
            limit=1,
        )
        return found[0] if found else None
