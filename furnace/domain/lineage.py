"""Lineage: how an agent was made, content-addressed and verified on read.

``lineage_hash = sha256(canonical JSON of parents, operator, params, op_version)``.
It keys the synthesis cache, so anything that shapes a fusion result
(rates, seed, temperature, model) must be in ``params``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from furnace.domain.canonical import content_key
from furnace.domain.elixir import ElixirRef
from furnace.domain.errors import LineageError


class ResolutionNote(BaseModel):
    """How a soft conflict on one field was resolved, and why."""

    model_config = ConfigDict(frozen=True)

    field: str
    chose: str
    reason: str


class Lineage(BaseModel):
    """The recorded making of one fusion product."""

    model_config = ConfigDict(frozen=True)

    parents: tuple[ElixirRef, ...] = Field(min_length=1)
    operator: str
    params: dict[str, Any] = {}
    op_version: str
    resolution_notes: tuple[ResolutionNote, ...] = ()

    def hashed_part(self) -> dict[str, Any]:
        return {
            "parents": [p.model_dump() for p in self.parents],
            "operator": self.operator,
            "params": self.params,
            "op_version": self.op_version,
        }

    @computed_field  # type: ignore[prop-decorator]
    @property
    def lineage_hash(self) -> str:
        return content_key(self.hashed_part())


def verify_lineage(data: dict[str, Any], *, what: str = "lineage") -> Lineage:
    """Rebuild a stored lineage record and check its ``lineage_hash``.

    Raises :class:`LineageError` naming the record and both hashes when the
    stored hash does not match the recomputed one (a tampered record).
    """
    data = dict(data)
    stored = data.pop("lineage_hash", None)
    try:
        lineage = Lineage.model_validate(data)
    except Exception as err:  # a corrupt record is a lineage error, not a crash
        raise LineageError(f"{what}: unreadable lineage record ({err.__class__.__name__})") from None
    if stored is None:
        raise LineageError(f"{what}: lineage record has no lineage_hash")
    if stored != lineage.lineage_hash:
        raise LineageError(
            f"{what}: lineage_hash mismatch — stored {stored[:12]}…, recomputed "
            f"{lineage.lineage_hash[:12]}… from parents "
            f"{', '.join(str(p) for p in lineage.parents)}, operator {lineage.operator!r}, "
            f"op_version {lineage.op_version!r}: the record was altered"
        )
    return lineage
