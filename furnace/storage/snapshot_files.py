"""What one analysis-snapshot refresh extends and what it wrote: the records the snapshots
(:mod:`furnace.storage.duckdb.snapshot`, which owns their folders and manifests) and the relational store's
Parquet writer (:mod:`furnace.storage.sql.parquet`, which extends a snapshot with the rows added since)
hand each other. Declarations only."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Base:
    """The snapshot a refresh may extend (its manifest's seal checked): where its files are, each table's
    files and rows, and the marks it recorded (:attr:`Written.marks`)."""

    folder: Path
    revision: int
    """The schema revision it was written at (a base at another is not extended)."""
    parts: dict[str, list[str]]
    rows: dict[str, int]
    marks: dict[str, list[Any]]
    stats: dict[str, list[int]]
    """Each file's ``[size, mtime_ns]`` as written: a file changed since (outside furnace) is not kept, so
    the next refresh heals a snapshot whose seal no longer checks."""


@dataclass
class Written:
    """What a refresh wrote into its folder."""

    rows: dict[str, int] = field(default_factory=dict)
    """Each table's rows."""
    parts: dict[str, list[str]] = field(default_factory=dict)
    """Each table's files in the folder, in order (``<table>.parquet``, then ``<table>.<k>.parquet``)."""
    marks: dict[str, list[Any]] = field(default_factory=dict)
    """SQLite: each stamped table's ``[highest rowid, stamp n, stamp token, schema cookie]`` (what the next
    refresh checks before it extends this snapshot)."""
    linked: set[str] = field(default_factory=set)
    """The files hard-linked from the base (their content is the base's)."""
