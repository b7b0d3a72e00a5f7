"""Terminal tables: aligned columns, CJK counted double-width, long cells cut, times to the minute."""

from __future__ import annotations

from datetime import datetime

from furnace.cli.table import format_table


def test_columns_align_with_wide_characters_and_cut_long_cells() -> None:
    rows = [
        {"name": "小夏", "fitness": 0.912345, "at": datetime(2026, 11, 30, 1, 2, 3, 456)},
        {"name": "x" * 80, "fitness": None, "at": None},
    ]
    lines = format_table(rows, ["name", "fitness", "at"], max_col=20).splitlines()
    assert lines[0].split() == ["name", "fitness", "at"]
    assert "0.9123" in lines[2] and "2026-11-30 01:02" in lines[2] and ".000456" not in lines[2]
    assert "…" in lines[3] and "x" * 21 not in lines[3]
    # the fitness column starts at the same display column in every row (小夏 is 4 columns wide)
    assert lines[2].index("0.9123") + 2 == lines[0].index("fitness")
