"""Plain-text tables for the terminal (CJK characters count two columns)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _cell(value: Any, limit: int) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M")
    elif value is None:
        text = ""
    else:
        text = str(value).replace("\n", " ")
    while _width(text) > limit:
        text = text[:-2] + "…"
    return text


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, max_col: int = 40) -> str:
    """Rows as an aligned text table with a header line."""
    cells = [[_cell(r.get(c), max_col) for c in columns] for r in rows]
    widths = [max([_width(c)] + [_width(row[i]) for row in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v + " " * (w - _width(v)) for v, w in zip(values, widths, strict=False)).rstrip()

    out = [line(list(columns)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)
