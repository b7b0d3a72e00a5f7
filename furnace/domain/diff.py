"""Field-level diff between two elixirs (any two versions, or two different elixirs).

Only content fields are compared (not id, version or timestamps). Nested
fields use dotted paths (``tone.humor``, ``constraints.max_length``). Lists
are compared by item: each removed item is one change with ``after=None``
and ``kind="removed"``, each added item one with ``before=None`` and
``kind="added"``; a list whose items are the same but reordered is one
``kind="reordered"`` change carrying both lists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from furnace.domain.canonical import canonical_json, normalise
from furnace.domain.elixir import Elixir

ChangeKind = Literal["changed", "added", "removed", "reordered"]
_SYMBOL = {"changed": "~", "added": "+", "removed": "-", "reordered": "↕"}
_MAX_SHOWN = 160


@dataclass(frozen=True)
class FieldChange:
    """One difference: ``field`` (dotted path) went from ``before`` to ``after``."""

    field: str
    before: Any
    after: Any
    kind: ChangeKind = "changed"


def diff_elixirs(a: Elixir, b: Elixir) -> list[FieldChange]:
    """The field-level changes that turn ``a`` into ``b``, in field order."""
    return _diff(normalise(a.content()), normalise(b.content()), "")


def _diff(before: Any, after: Any, path: str) -> list[FieldChange]:
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[FieldChange] = []
        keys = list(before) + [k for k in after if k not in before]
        for key in keys:
            sub = f"{path}.{key}" if path else key
            changes.extend(_diff(before.get(key), after.get(key), sub))
        return changes
    if isinstance(before, list) and isinstance(after, list):
        return _diff_list(before, after, path)
    if before == after:
        return []
    return [FieldChange(path, before, after)]


def _diff_list(before: list[Any], after: list[Any], path: str) -> list[FieldChange]:
    old_keys = [canonical_json(x) for x in before]
    new_keys = [canonical_json(x) for x in after]
    if old_keys == new_keys:
        return []
    removed = [x for x, k in zip(before, old_keys, strict=False) if k not in set(new_keys)]
    added = [x for x, k in zip(after, new_keys, strict=False) if k not in set(old_keys)]
    if not removed and not added:
        return [FieldChange(path, before, after, "reordered")]
    return [FieldChange(path, x, None, "removed") for x in removed] + [
        FieldChange(path, None, x, "added") for x in added
    ]


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def format_diff(changes: list[FieldChange]) -> str:
    """Readable text, one line per change: ``~ tone.humor: 0.2 → 0.7``, ``+ expertise: "Go"``."""
    if not changes:
        return "no differences"
    lines = []
    for c in changes:
        if c.kind == "added":
            lines.append(f"+ {c.field}: {_show(c.after)}")
        elif c.kind == "removed":
            lines.append(f"- {c.field}: {_show(c.before)}")
        else:
            lines.append(f"{_SYMBOL[c.kind]} {c.field}: {_show(c.before)} → {_show(c.after)}")
    return "\n".join(lines)
