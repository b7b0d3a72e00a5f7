"""What changed in the lineage tables between two of SQLite's lineage stamps, read from their change log.

Migration 0005 keeps ``lineage_changes``: one row per move of ``lineage_stamp`` (``seq`` its ``n`` after the
move, ``token`` its token then) naming the keys that move touched. :func:`read_changes` reads the rows
between a stamp seen before and the stamp just read, in the same read transaction, and gives the keys --
or None whenever the log cannot vouch for every change in between (then a reader forgets everything):
another schema, a stamp not after the one seen, rows pruned or missing, a first row whose token is not the
one seen (a state a rolled-back transaction showed), a last row not of the stamp read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

READ_LIMIT = 10_000  # moves read at most (the log keeps at least as many): past it, a reader forgets everything
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Changes:
    """The keys a run of stamp moves touched: ``agents`` (ids inserted, updated or deleted), the edges'
    ``children`` and ``parents``, the ``elixirs`` ``(id, version)``; ``naming``: every parent id the
    lineage record of a logged agent still stored names (None: one of them cannot be read, or they were
    not read)."""

    agents: frozenset[str]
    children: frozenset[str]
    parents: frozenset[str]
    elixirs: frozenset[tuple[str, int]]
    naming: frozenset[Any] | None
    records: frozenset[str] = field(init=False)
    """Ids whose verification may read another value now: the agents, the edges' children (the edges into
    them) and the elixirs' ids (a persona, or a parent's stored hash)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", self.agents | self.children | {id for id, _ in self.elixirs})


def named_parents(lineage_json: Any) -> set[Any] | None:
    """The parent ids an agent row's lineage record names; None when it cannot be read."""
    try:
        return {p.get("id") for p in json.loads(lineage_json)["parents"]}
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def read_changes(conn: Connection, seen: Sequence[Any], now: Sequence[Any], *, naming: bool = True) -> Changes | None:
    """The keys the moves from stamp ``seen`` to stamp ``now`` (each ``(n, token, schema_version)``, ``now``
    read on ``conn`` in its current read transaction) touched; None when the log cannot tell them all.
    Without ``naming`` the logged agents' rows are not read (``Changes.naming`` None: "may name anything")."""
    (seen_n, seen_token, seen_schema), (n, token, schema) = seen, now
    if schema != seen_schema or not seen_n < n <= seen_n + READ_LIMIT:
        return None
    try:
        rows = conn.exec_driver_sql(
            "SELECT seq, token, kind, id, other, version FROM lineage_changes WHERE seq BETWEEN ? AND ? ORDER BY seq",
            (seen_n, n),
        ).all()
    except OperationalError as err:
        if "no such table" not in str(err.orig):
            raise
        return None
    if len(rows) != n - seen_n + 1 or rows[0][:2] != (seen_n, seen_token) or rows[-1][:2] != (n, token):
        return None  # seq is the key: as many rows as moves in the range are every move in it
    agents: set[str] = set()
    children: set[str] = set()
    parents: set[str] = set()
    elixirs: set[tuple[str, int]] = set()
    for _, _, kind, id, other, version in rows[1:]:
        if kind == "agent":
            agents.add(id)
        elif kind == "edge":
            children.add(id)
            parents.add(other)
        elif kind == "elixir":
            elixirs.add((id, version))
        else:
            return None  # not a row the triggers write
    named = _naming(conn, agents) if naming or not agents else None
    return Changes(frozenset(agents), frozenset(children), frozenset(parents), frozenset(elixirs), named)


def _naming(conn: Connection, agents: set[str]) -> frozenset[Any] | None:
    """Every parent id named by the lineage of the ``agents`` still stored (None: one is unreadable)."""
    named: set[Any] = set()
    ids = sorted(agents)
    for start in range(0, len(ids), _CHUNK):
        part = ids[start : start + _CHUNK]
        marks = ", ".join("?" * len(part))
        for (lineage_json,) in conn.exec_driver_sql(f"SELECT lineage FROM agents WHERE id IN ({marks})", tuple(part)):
            found = named_parents(lineage_json)
            if found is None:
                return None
            named |= found
    return frozenset(named)
