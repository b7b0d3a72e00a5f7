"""What an import read and what it wrote."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from furnace.domain.elixir import Elixir, ElixirRef


@dataclass(frozen=True)
class ReadResult:
    """Elixirs read (and validated) from one file, plus the rows that were skipped.

    ``elixirs`` pairs each elixir with where it came from (``"row 12"``,
    ``"item 2"``, ``"file"``); ``skipped`` holds ``(row number, reason)``.
    ``row_wise`` formats (the CSV corpus) import their valid rows and report the
    rest; the others are all-or-nothing.
    """

    elixirs: list[tuple[str, Elixir]] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    row_wise: bool = False


@dataclass
class ImportReport:
    """The outcome of :func:`furnace.interop.importers.import_file`.

    ``created``: new ids (version 1); ``updated``: existing ids that got a new
    version (``--new-version``); ``unchanged``: identical content already stored (the
    store's no-op); ``conflicts``: ``(stored ref, message)`` for existing ids whose stored
    content was left as it is; ``skipped``: ``(row number, reason)`` for rows that could
    not be imported.
    """

    created: list[ElixirRef] = field(default_factory=list)
    updated: list[ElixirRef] = field(default_factory=list)
    unchanged: list[ElixirRef] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    conflicts: list[tuple[ElixirRef, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """Plain data for ``--json`` output."""

        def refs(rs: list[ElixirRef]) -> list[dict[str, Any]]:
            return [r.model_dump(mode="json") for r in rs]

        return {
            "created": refs(self.created),
            "updated": refs(self.updated),
            "unchanged": refs(self.unchanged),
            "skipped": [{"row": row, "reason": reason} for row, reason in self.skipped],
            "conflicts": [{"stored": ref.model_dump(mode="json"), "message": m} for ref, m in self.conflicts],
        }

    def summary(self) -> str:
        """One human line, e.g. ``created 12, updated 0, unchanged 0, skipped 2, conflicts 1``."""
        return (
            f"created {len(self.created)}, updated {len(self.updated)}, "
            f"unchanged {len(self.unchanged)}, skipped {len(self.skipped)}, conflicts {len(self.conflicts)}"
        )
