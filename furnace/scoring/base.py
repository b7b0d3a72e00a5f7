"""The score value every scorer returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from furnace.domain.elixir import Elixir


@dataclass(frozen=True)
class Score:
    """A value in [0, 1] with the reason for it. ``failed`` marks a failure score
    (the answer or the judge call failed), which counts as 0. ``feedback`` is a judge's
    short structured note on what was missing or wrong (see :mod:`furnace.scoring.feedback`)."""

    value: float
    reason: str
    failed: bool = False
    feedback: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:
            object.__setattr__(self, "value", min(1.0, max(0.0, float(self.value))))

    @classmethod
    def failure(cls, reason: str) -> Score:
        """A failure score: value 0 and the reason."""
        return cls(0.0, reason, failed=True)


def persona_inputs(elixir: Elixir) -> dict[str, Any]:
    """The persona as request inputs: the elixir's JSON without timestamps, so a request's
    cache key depends on content (and id/version), never on when a copy was stored."""
    return elixir.model_dump(mode="json", exclude={"created_at", "deleted_at"})
