"""People's picks: which of two candidates' replies to one probe a person prefers, and where they are kept.

A :class:`Pick` records who picked, when, the pair as it was shown (``agent_a``
shown as A, ``agent_b`` as B: the blind order), the probe, the choice (``A``,
``B`` or ``tie``), an optional reason and the seed that drew the order. Picks
are only ever added: undoing one marks it undone (``undone_at``) and keeps the
row, so no pick is ever lost; two people picking at once add two rows (each
pick has its own id) and never overwrite each other.

Two implementations pass one contract suite (``tests/judges/test_picks_store.py``):
:class:`MemoryPicks` and ``furnace.storage.duckdb.picks.DuckDBPicks``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal, Protocol

from furnace.domain.errors import InputError, NotFound

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


class PickStore(Protocol):
    """Where people's picks are kept (DuckDB in a furnace home)."""

    def add(self, pick: Pick) -> Pick:
        """Store a new pick (its ``created_at`` set by the store); adding the same ``pick_id`` again
        returns the stored pick unchanged."""
        ...

    def undo(self, pick_id: str, *, who: str) -> Pick:
        """Mark a pick undone (kept, left out of every figure); only its author may. Undoing an undone
        pick changes nothing. NotFound for an unknown id, InputError for someone else's pick."""
        ...

    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        """An experiment's picks, oldest first."""
        ...

    def last(self, experiment_id: str, who: str) -> Pick | None:
        """The newest pick of ``who`` in the experiment that is not undone."""
        ...


def check_undo(pick: Pick | None, pick_id: str, who: str) -> Pick:
    if pick is None:
        raise NotFound(f"no pick {pick_id!r}", field="pick_id")
    if pick.who != who:
        raise InputError(f"pick {pick_id} was made by {pick.who}; only they can undo it", field="who")
    return pick


class MemoryPicks:
    """In-memory :class:`PickStore` (same semantics, for tests)."""

    def __init__(self, *, clock: Callable[[], datetime] | None = None) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, Pick] = {}
        self._clock = clock or (lambda: datetime.now(UTC))

    def add(self, pick: Pick) -> Pick:
        with self._lock:
            if pick.pick_id not in self._rows:
                self._rows[pick.pick_id] = replace(pick, created_at=self._clock(), undone_at=None)
            return self._rows[pick.pick_id]

    def undo(self, pick_id: str, *, who: str) -> Pick:
        with self._lock:
            pick = check_undo(self._rows.get(pick_id), pick_id, who)
            if not pick.undone:
                pick = self._rows[pick_id] = replace(pick, undone_at=self._clock())
            return pick

    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        with self._lock:
            rows = [p for p in self._rows.values() if p.experiment_id == experiment_id]
        rows = [p for p in rows if include_undone or not p.undone]
        return sorted(rows, key=lambda p: (p.created_at or datetime.min.replace(tzinfo=UTC), p.pick_id))

    def last(self, experiment_id: str, who: str) -> Pick | None:
        mine = [p for p in self.picks(experiment_id) if p.who == who]
        return mine[-1] if mine else None
