"""Altair charts for the app's dashboards (Vega-Lite, rendered by Streamlit: pan/zoom and selection, no fetch).

Each function takes view-model rows (furnace.views) and returns a chart; axes are scaled to
the data (``axis_domain``), never pinned at 0, so 0.76 → 0.90 is not flattened. Pages draw them
with :func:`chart_spec`: the chart's Vega-Lite spec, cached on the chart's name and rows (Altair's
encoding and validation were most of a dashboard render's CPU, ~0.1 s per chart).

Fields are given as channel objects (``alt.Tooltip("x")``), never shorthand strings: Altair turns
each string into its channel class through a lookup it rebuilds over its whole schema per string
(~8 ms each, dozens per chart).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st
from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec

from furnace.views.experiments import axis_domain

PARETO_SELECTION = "agent"  # the point selection's name (st.vega_lite_chart on_select state key)


def _tips(*fields: str) -> list[alt.Tooltip]:
    return [alt.Tooltip(f) for f in fields]


MEASURES = ["best", "mean", "train", "test"]  # validation best and mean; the best's train and test fitness
DASHES = [[1, 0], [6, 4], [1, 3], [10, 3, 2, 3]]  # solid, dashed, dotted, dash-dot: one per measure


def fitness_overlay(rows: Sequence[dict[str, Any]], x: str, title: str) -> alt.LayerChart | alt.FacetChart:
    """Per experiment against ``x`` (generation or calls_spent): best (validation) and mean fitness, and
    the best's train and held-out test fitness, the test line with its 95% interval as a bar per point
    (the train–test gap in the tooltip)."""
    data = pd.DataFrame(rows)
    tested = data[data["measure"] == "test"]
    spread = data["fitness"].tolist() + tested["test_low"].tolist() + tested["test_high"].tolist()
    y_scale = alt.Scale(domain=list(axis_domain(spread)), zero=False)
    x_scale = alt.Scale(domain=list(axis_domain(data[x].tolist(), pad=0.02, min_span=1)), zero=False, nice=False)
    x_axis = alt.X(f"{x}:Q", scale=x_scale, title=x.replace("_", " "), axis=alt.Axis(tickMinStep=1))
    color = alt.Color("experiment:N", legend=alt.Legend(orient="bottom", columns=1))
    tooltip = ["experiment:N", "generation:Q", "calls_spent:Q", "cost_spent_usd:Q", "measure:N", "fitness:Q"]
    tooltip += ["test_low:Q", "test_high:Q", "train_test_gap:Q"]  # typed: a train row has none of these
    legend = alt.Legend(orient="bottom", columns=2, symbolStrokeColor="#495057", symbolFillColor="#495057")
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=x_axis,
            y=alt.Y("fitness:Q", scale=y_scale, title="fitness"),
            color=color,
            strokeDash=alt.StrokeDash("measure:N", scale=alt.Scale(domain=MEASURES, range=DASHES), legend=legend),
            shape=alt.Shape("measure:N", scale=alt.Scale(domain=MEASURES), legend=legend),  # one legend, both
            tooltip=_tips(*tooltip),
        )
    )
    intervals = (
        alt.Chart(tested)
        .mark_errorbar(ticks=True, thickness=2)
        .encode(
            x=x_axis,
            y=alt.Y("test_low:Q", scale=y_scale, title="fitness"),
            y2=alt.Y2("test_high:Q"),
            color=color,
            tooltip=_tips(*tooltip),
        )
    )
    return alt.layer(lines, intervals, title=title).interactive()


def grouped_bars(rows: Sequence[dict[str, Any]], x: str, y: str, group: str, title: str) -> alt.Chart:
    """Bars of ``y`` per ``x``, one bar per ``group`` side by side."""
    return (
        alt.Chart(pd.DataFrame(rows), title=title)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:N", title=x.replace("_", " ")),
            xOffset=alt.XOffset(f"{group}:N"),
            y=alt.Y(f"{y}:Q", title=y.replace("_", " ")),
            color=alt.Color(f"{group}:N", legend=alt.Legend(orient="bottom", columns=1)),
            tooltip=_tips(*rows[0]) if rows else [],
        )
    )


def pareto_scatter(points: Sequence[dict[str, Any]], x: str, y: str) -> alt.LayerChart | alt.FacetChart:
    """Agents on two objectives: the Pareto front filled, joined by a line and ringed; click a point to select it."""
    data = pd.DataFrame(points)
    pick = alt.selection_point(name=PARETO_SELECTION, fields=["agent_id"], on="click")
    x_axis = alt.X("x:Q", title=x, scale=alt.Scale(domain=list(axis_domain(data["x"].tolist())), zero=False))
    y_axis = alt.Y("y:Q", title=y, scale=alt.Scale(domain=list(axis_domain(data["y"].tolist())), zero=False))
    tooltip = ["agent_id:N", "experiment:N", "generation:Q", "operator:N", "fitness:Q", "train_fitness:Q"]
    tooltip += ["test_fitness:Q", "test_low:Q", "test_high:Q", "train_test_gap:Q", "x:Q", "y:Q", "front:N"]
    dots = (
        alt.Chart(data)
        .mark_point(filled=True, size=90)
        .encode(
            x=x_axis,
            y=y_axis,
            color=alt.Color("experiment:N", legend=alt.Legend(orient="bottom", columns=1)),
            shape=alt.Shape("front:N", title="on the front", scale=alt.Scale(domain=[True, False])),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.35)),
            tooltip=_tips(*tooltip),
        )
        .add_params(pick)
    )
    front = data[data["front"]].sort_values(["x", "y"])
    line = alt.Chart(front).mark_line(color="#e8590c", strokeWidth=2).encode(x=x_axis, y=y_axis, order=alt.Order("x:Q"))
    rings = alt.Chart(front).mark_point(size=260, color="#e8590c", strokeWidth=2).encode(x=x_axis, y=y_axis)
    return alt.layer(line, rings, dots, title=f"{y} vs {x} — front in orange").interactive()


LINEAGE_SELECTION = "node"
ROW_PX = 24  # vertical space per node: labels never overlap (and at most views.lineage.LABEL_CHARS wide)


def lineage_explorer(
    nodes: Sequence[dict[str, Any]], edges: Sequence[dict[str, Any]]
) -> alt.LayerChart | alt.FacetChart:
    """The lineage as a pannable, zoomable layered graph: edges as lines labelled ``operator · vN``,
    nodes labelled with name and the version bred from; search matches ringed; click selects a node."""
    data = pd.DataFrame(nodes)
    rows = int(data["row"].max()) + 1 if len(data) else 1
    x_scale = alt.Scale(domain=[float(data["depth"].min()) - 0.3, float(data["depth"].max()) + 0.9], nice=False)
    y_scale = alt.Scale(reverse=True, domain=[-0.5, rows - 0.5], nice=False)
    x_axis = alt.Axis(title="depth (ancestors < 0 < descendants)", tickMinStep=1)
    x = alt.X("depth:Q", scale=x_scale, axis=x_axis)
    y = alt.Y("row:Q", scale=y_scale, axis=None)
    pick = alt.selection_point(name=LINEAGE_SELECTION, fields=["id"], on="click")
    links = (
        alt.Chart(pd.DataFrame(edges, columns=["parent", "child", "label", "x", "y", "x2", "y2"]))
        .mark_rule(color="#868e96", opacity=0.6)
        .encode(
            x=alt.X("x:Q", scale=x_scale, axis=x_axis),
            y=alt.Y("y:Q", scale=y_scale, axis=None),
            x2=alt.X2("x2:Q"),
            y2=alt.Y2("y2:Q"),
            tooltip=_tips("parent:N", "child:N", "label:N"),
        )
    )
    dots = (
        alt.Chart(data)
        .mark_circle(size=140)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=["root", "agent", "elixir"], range=["#e8590c", "#1c7ed6", "#868e96"]),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=_tips("id:N", "name:N", "label:N", "depth:Q"),
        )
        .add_params(pick)
    )
    rings = (
        alt.Chart(data[data["match"]] if len(data) else data)
        .mark_point(size=420, color="#f59f00", strokeWidth=3)
        .encode(x=x, y=y)
    )
    labels = (
        alt.Chart(data)
        .mark_text(align="left", dx=9, fontSize=11)
        .encode(x=x, y=y, text=alt.Text("short:N"), tooltip=_tips("id:N", "label:N"))
    )
    return alt.layer(links, rings, dots, labels).properties(height=max(240, ROW_PX * rows)).interactive()


CHARTS: dict[str, Callable[..., alt.LayerChart | alt.FacetChart | alt.Chart]] = {
    "fitness_overlay": fitness_overlay,
    "grouped_bars": grouped_bars,
    "pareto_scatter": pareto_scatter,
    "lineage_explorer": lineage_explorer,
}


@st.cache_data(show_spinner=False, max_entries=64)
def chart_spec(chart: str, *args: Any) -> dict[str, Any]:
    """The Vega-Lite spec of ``CHARTS[chart](*args)`` exactly as ``st.altair_chart`` would send it (its data as
    Arrow datasets, Streamlit's theme), for ``st.vega_lite_chart``. Cached on the chart's name and its rows,
    the data it is drawn from: a render whose rows changed draws a new spec, one whose rows did not reuses it
    (a copy: Streamlit moves the datasets out of the spec it is given)."""
    return _convert_altair_to_vega_lite_spec(CHARTS[chart](*args))
