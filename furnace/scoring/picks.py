"""People's picks: which of two candidates' replies to one probe a person prefers, and where they are kept.

A :class:`Pick` records who picked, when, the pair as it was shown (``agent_a``
shown as A, ``agent_b`` as B: the blind order), the probe, the choice (``A``,
``B`` or ``tie``), an optional reason and the seed that drew the order. Picks
are only ever added: undoing one marks it undone (``undone_at``) and keeps the
row, so no pick is ever lost; two people picking at once add two rows (each
pick has its own id) and never overwrite each other.

Two implementations pass one contract suite (``tests/judges/test_picks_store.py``):
:class:`MemoryPicks` and ``furnace.storage.sql.picks.SQLPicks``. The stored one is a
:class:`SealedPicks`: a row per pick (:data:`PICK_COLUMNS`, timestamps as naive
UTC) with a keyed seal of the pick and of its undo (:func:`pick_seal`,
:func:`undo_seal`), checked on every read (:func:`sealed_pick`).
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from furnace.domain.errors import InputError, NotFound
from furnace.domain.guarded import Guarded, serialized
from furnace.storage.protocols import PickStore as PickStore  # declared with every store protocol
from furnace.storage.seals import Sealer, check

Choice = Literal["A", "B", "tie"]
CHOICES: tuple[Choice, ...] = ("A", "B", "tie")


def new_pick_id() -> str:
    return "pick-" + uuid.uuid4().hex[:20]


@dataclass(frozen=True)
class Pick:
    """One person's verdict on one blind pair (see the module doc)."""

    pick_id: str
    experiment_id: str
    probe: str
    agent_a: str
    generation_a: int
    agent_b: str
    generation_b: int
    choice: Choice
    who: str
    reason: str = ""
    order_seed: int = 0
    created_at: datetime | None = None
    undone_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.choice not in CHOICES:
            raise InputError(f"a pick is A, B or tie, got {self.choice!r}", field="choice")
        if self.agent_a == self.agent_b and self.generation_a == self.generation_b:
            raise InputError("a pick compares two different candidates", field="agent_b")
        if not self.who.strip():
            raise InputError("a pick needs the name of who made it", field="who")

    @property
    def undone(self) -> bool:
        return self.undone_at is not None

    @property
    def winner(self) -> str | None:
        """The chosen agent's id (None for a tie)."""
        return {"A": self.agent_a, "B": self.agent_b}.get(self.choice)

    def outcome(self) -> tuple[str, str, float]:
        """(agent shown as A, agent shown as B, 1 if A won, 0 if B won, 0.5 for a tie): a Bradley–Terry input."""
        return self.agent_a, self.agent_b, {"A": 1.0, "B": 0.0, "tie": 0.5}[self.choice]


def check_undo(pick: Pick | None, pick_id: str, who: str) -> Pick:
    if pick is None:
        raise NotFound(f"no pick {pick_id!r}", field="pick_id")
    if pick.who != who:
        raise InputError(f"pick {pick_id} was made by {pick.who}; only they can undo it", field="who")
    return pick


# --- a pick as a stored row (table ``human_picks``) and its seals ---------------------------------------

PICK_COLUMNS: tuple[str, ...] = (
    "pick_id", "experiment_id", "probe", "agent_a", "generation_a", "agent_b", "generation_b", "choice", "who",
    "reason", "order_seed", "created_at", "undone_at",
)  # fmt: skip
"""The columns of a pick's row, in order (then ``seal`` and ``undo_seal``)."""


def _naive(moment: datetime) -> datetime:
    """``moment`` as the table holds it: UTC without a zone."""
    return moment.astimezone(UTC).replace(tzinfo=None)


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=UTC)


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def pick_seal(sealer: Sealer, pick: Pick) -> str:
    """The keyed seal of a pick as made (every field but its undo)."""
    fields = [getattr(pick, name) for name in PICK_COLUMNS[:-2]] + [_stamp(pick.created_at)]
    return sealer.mac("pick", fields)


def undo_seal(sealer: Sealer, pick: Pick) -> str:
    """The keyed seal of a pick's undo."""
    return sealer.mac("pick undone", pick.pick_id, _stamp(pick.undone_at))


def sealed_pick(sealer: Sealer, row: Sequence[Any]) -> Pick:
    """The pick of one stored row (:data:`PICK_COLUMNS`, then ``seal`` and ``undo_seal``), its seals checked:
    SealError naming the pick when it or its undo was written or changed outside furnace."""
    *fields, seal, undone = row
    values = dict(zip(PICK_COLUMNS, fields, strict=True))
    values["created_at"] = _aware(values["created_at"])
    values["undone_at"] = _aware(values["undone_at"])
    pick = Pick(**values)
    check(seal, pick_seal(sealer, pick), f"pick {pick.pick_id}")
    if pick.undone or undone is not None:
        check(undone, undo_seal(sealer, pick), f"the undo of pick {pick.pick_id}")
    return pick


class SealedPicks(ABC):
    """A :class:`PickStore` kept as sealed rows of ``human_picks``: the timestamps and seals of an add and an
    undo, the same in every database; a subclass runs the guarded insert, the undo's update and the reads."""

    def __init__(self, sealer: Callable[[], Sealer], clock: Callable[[], datetime] | None) -> None:
        self._sealer = sealer  # read on first use (a database makes its key file when first asked)
        self._clock = clock or (lambda: datetime.now(UTC))

    def _now(self) -> datetime:
        """Now, as it reads back (UTC, to the microsecond): what a seal covers."""
        return _naive(self._clock()).replace(tzinfo=UTC)

    @abstractmethod
    def _insert(self, row: dict[str, Any]) -> None:
        """Insert ``row`` (every column, ``seal`` included) unless its ``pick_id`` is there already."""

    @abstractmethod
    def _mark_undone(self, pick_id: str, undone_at: datetime, seal: str) -> None:
        """Set ``undone_at`` and ``undo_seal`` of ``pick_id`` where ``undone_at`` is still empty."""

    @abstractmethod
    def _get(self, pick_id: str) -> Pick | None:
        """The stored pick ``pick_id`` (seals checked), if any."""

    def add(self, pick: Pick) -> Pick:
        now = self._now()
        row = replace(pick, created_at=now, undone_at=None)
        values = {name: getattr(row, name) for name in PICK_COLUMNS}
        values.update(created_at=_naive(now), seal=pick_seal(self._sealer(), row))
        self._insert(values)
        stored = self._get(pick.pick_id)
        assert stored is not None  # just inserted, or there already
        return stored

    def undo(self, pick_id: str, *, who: str) -> Pick:
        pick = check_undo(self._get(pick_id), pick_id, who)
        if pick.undone:
            return pick
        now = self._now()
        self._mark_undone(pick_id, _naive(now), undo_seal(self._sealer(), replace(pick, undone_at=now)))
        stored = self._get(pick_id)
        assert stored is not None
        return stored


class MemoryPicks(Guarded):
    """In-memory :class:`PickStore` (same semantics, for tests)."""

    def __init__(self, *, clock: Callable[[], datetime] | None = None) -> None:
        self._rows: dict[str, Pick] = {}
        self._clock = clock or (lambda: datetime.now(UTC))

    @serialized
    def add(self, pick: Pick) -> Pick:
        if pick.pick_id not in self._rows:
            self._rows[pick.pick_id] = replace(pick, created_at=self._clock(), undone_at=None)
        return self._rows[pick.pick_id]

    @serialized
    def undo(self, pick_id: str, *, who: str) -> Pick:
        pick = check_undo(self._rows.get(pick_id), pick_id, who)
        if not pick.undone:
            pick = self._rows[pick_id] = replace(pick, undone_at=self._clock())
        return pick

    @serialized
    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        rows = [p for p in self._rows.values() if p.experiment_id == experiment_id]
        rows = [p for p in rows if include_undone or not p.undone]
        return sorted(rows, key=lambda p: (p.created_at or datetime.min.replace(tzinfo=UTC), p.pick_id))

    @serialized
    def last(self, experiment_id: str, who: str) -> Pick | None:
        mine = [p for p in self.picks(experiment_id) if p.who == who]
        return mine[-1] if mine else None
