"""Matplotlib helpers for the analysis notebooks (matplotlib is imported lazily)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

OPERATOR_COLOURS = {"seed": "#7f7f7f", "crossover": "#1f77b4", "mutation": "#ff7f0e", "ensemble": "#2ca02c"}


def plot_lineage(layout: pd.DataFrame, *, highlight: Iterable[str] = (), ax: Any = None, title: str = "") -> Any:
    """Draw an experiment's DAG from :func:`furnace.analysis.lineage.lineage_layout`: one dot per
    agent (colour = operator, size = fitness), a line from each parent; ``highlight`` ids ringed in red."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4.5))
    pos = {a: (x, y) for a, x, y in layout[["agent_id", "x", "y"]].itertuples(index=False)}
    marked = set(highlight)
    for child, parents in layout[["agent_id", "parents"]].itertuples(index=False):
        for parent in parents or []:
            if parent in pos:
                (x0, y0), (x1, y1) = pos[parent], pos[child]
                on_path = parent in marked and child in marked
                ax.plot(
                    [x0, x1],
                    [y0, y1],
                    color="#d62728" if on_path else "#cccccc",
                    linewidth=2.0 if on_path else 0.8,
                    zorder=1,
                )
    low, high = layout["fitness"].min(), layout["fitness"].max()
    spread = (layout["fitness"] - low) / (high - low) if high > low else layout["fitness"] * 0 + 0.5
    size: pd.Series = 30 + 320 * spread  # dot sizes spread over the fitness range seen
    for op, group in layout.groupby("operator"):
        ax.scatter(
            group["x"],
            group["y"],
            s=size[group.index],
            label=op,
            color=OPERATOR_COLOURS.get(str(op), "#9467bd"),
            zorder=2,
            edgecolors="white",
        )
    ringed = layout["agent_id"].isin(marked)
    ax.scatter(
        layout["x"][ringed],
        layout["y"][ringed],
        s=size[ringed] + 40,
        facecolors="none",
        edgecolors="#d62728",
        linewidths=2,
        zorder=3,
    )
    ax.set_xlabel("generation")
    ax.set_yticks([])
    ax.set_xticks(sorted(layout["x"].unique()))
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(title or "lineage DAG (size = fitness; red = ancestry of the best agent)")
    return ax


CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "PingFang SC",
    "Microsoft YaHei",
    "SimHei",
    "Heiti SC",
    "Arial Unicode MS",
)


def use_cjk_font() -> str | None:
    """Prefer an installed font that has Chinese glyphs (zh titles and suggestions in plots).

    Returns the font used, or None when none is installed; then the missing-glyph
    warnings are silenced (zh labels show as boxes, the tables keep the text).
    """
    import warnings

    import matplotlib
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    found = next((name for name in CJK_FONTS if name in installed), None)
    if found:
        matplotlib.rcParams["font.sans-serif"] = [found, *matplotlib.rcParams["font.sans-serif"]]
        return found
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
    return None
