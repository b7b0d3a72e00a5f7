"""People's picks in the relational store (table ``human_picks``, Alembic revision 0002): a
:class:`~furnace.scoring.picks.PickStore`.

Insert-only, one guarded insert per pick (``ON CONFLICT (pick_id) DO NOTHING``), so two processes adding
picks at once both land and the same id added twice keeps the first; undo is one ``UPDATE`` that sets
``undone_at`` where it is still empty. Each pick carries the same keyed seals as in an old home's DuckDB file
(:class:`~furnace.scoring.picks.SealedPicks`), checked on every read: a pick written or changed outside
furnace is refused, named (docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from furnace.scoring.picks import PICK_COLUMNS, Pick, SealedPicks, sealed_pick
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import human_picks

_ROW = [*(human_picks.c[name] for name in PICK_COLUMNS), human_picks.c.seal, human_picks.c.undo_seal]


class SQLPicks(SealedPicks):
    """People's picks, kept in SQLite or PostgreSQL."""

    def __init__(self, db: SQLDatabase, *, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(lambda: db.sealer, clock)
        self.db = db

    def _read(self, *where: Any, order: tuple[Any, ...] = (), limit: int | None = None) -> list[Pick]:
        query = select(*_ROW).where(*where).order_by(*order).limit(limit)
        return [sealed_pick(self.db.sealer, row) for row in self.db.query(query)]

    def _get(self, pick_id: str) -> Pick | None:
        found = self._read(human_picks.c.pick_id == pick_id)
        return found[0] if found else None

    def _insert(self, row: dict[str, Any]) -> None:
        insert = self.db.insert(human_picks).values(row).on_conflict_do_nothing(index_elements=["pick_id"])
        self.db.write(lambda conn: conn.execute(insert))

    def _mark_undone(self, pick_id: str, undone_at: datetime, seal: str) -> None:
        mark = (
            update(human_picks)
            .where(human_picks.c.pick_id == pick_id, human_picks.c.undone_at.is_(None))
            .values(undone_at=undone_at, undo_seal=seal)
        )
        self.db.write(lambda conn: conn.execute(mark))

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
