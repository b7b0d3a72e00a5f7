"""Lineage: an agent's ancestors and descendants as a graph (operators and versions on the edges) and a table."""

from __future__ import annotations

import streamlit as st

from furnace.domain.errors import FurnaceError
from furnace.views.lineage import MAX_NODES, collapsible, explorer_layout, graph_rows, lineage_graph, to_dot
from furnace_app.charts import LINEAGE_SELECTION, chart_spec
from furnace_app.services import RECENT_AGENTS, services, show_error


def pinned_versions(children: list[str]) -> dict[tuple[str, str], int]:
    """(parent, child) → the parent version bred from, for edges into ``children`` (one read of the live
    store: an agent bred a moment ago, in another process, is drawn with its version)."""
    if not children:
        return {}
    marks = ", ".join("?" * len(children))
    rows = svc.sql.query(
        f"SELECT parent, child, parent_version FROM lineage_edges WHERE child IN ({marks}) AND parent_version > 0",
        list(children),
    )
    return {(parent, child): int(version) for parent, child, version in rows}


st.title("Lineage")
svc = services()

try:
    agents = svc.store.list_agents(limit=RECENT_AGENTS)
except FurnaceError as err:
    show_error(err)
    st.stop()

choices = [a.id for a in agents]
names = {a.id: f"{a.elixir.name} ({a.id}, {a.lineage.operator})" for a in agents}
picked = st.session_state.get("lineage_pick")
if picked and picked not in choices:
    choices.insert(0, picked)
pick_col, depth_col = st.columns([3, 1])
if picked and st.session_state.get("_applied_lineage_pick") != picked:  # picked on another page
    st.session_state["lineage_typed"] = picked
    st.session_state["_applied_lineage_pick"] = picked
typed = pick_col.text_input(
    "Agent or elixir id", key="lineage_typed", help="Any agent id (agt-…) or library elixir id."
)
if not typed and choices:
    typed = pick_col.selectbox(
        "…or pick an agent", choices, format_func=lambda i: names.get(i, i), key="lineage_select"
    )
depth = depth_col.number_input("Max depth (0 = all)", 0, 50, 0, key="lineage_depth")

if not typed:
    st.info("No agents yet: fuse some in the Furnace page or run an experiment (`furnace demo`).")
    st.stop()

try:
    graph = lineage_graph(svc.store, typed.strip(), max_depth=int(depth) or None, edge_versions=pinned_versions)
except FurnaceError as err:
    show_error(err)
    st.stop()

ancestors = sum(1 for n in graph.nodes if n.depth < 0)
descendants = sum(1 for n in graph.nodes if n.depth > 0)
c1, c2, c3 = st.columns(3)
c1.metric("Ancestors", ancestors)
c2.metric("Descendants", descendants)
c3.metric("Edges", len(graph.edges))
if graph.truncated:
    st.warning(f"{graph.total_nodes} nodes in this lineage; the graph shows the nearest {MAX_NODES}.")
low, high = min(n.depth for n in graph.nodes), max(n.depth for n in graph.nodes)
filter_col, search_col = st.columns([2, 2])
shown = (
    filter_col.slider("Depths shown (ancestors < 0 < descendants)", low, high, (low, high), key="lineage_depths")
    if low < high
    else (low, high)
)
search = search_col.text_input("Search (id or name)", key="lineage_search")
foldable = collapsible(graph)
if st.session_state.get("_lineage_collapse_root") != graph.root:  # a new root starts expanded
    st.session_state["lineage_collapsed"] = []
    st.session_state["_lineage_collapse_root"] = graph.root
st.session_state["lineage_collapsed"] = [i for i in st.session_state.get("lineage_collapsed", []) if i in foldable]
collapsed = st.multiselect(
    "Collapse (hide what lies beyond these nodes, away from the root)",
    foldable,
    key="lineage_collapsed",
    format_func=lambda i: next((f"{n.name or i} ({i})" for n in graph.nodes if n.id == i), i),
)
nodes, edges = explorer_layout(graph, depths=shown, search=search, collapsed=set(collapsed))
matches = [n for n in nodes if n["match"]]
if search:
    search_col.caption(f"{len(matches)} match(es), ringed in orange" if matches else "no match in the shown depths")
event = st.vega_lite_chart(
    spec=chart_spec("lineage_explorer", nodes, edges),
    width="stretch",
    on_select="rerun",
    selection_mode=LINEAGE_SELECTION,
    key="lineage_chart",
)
st.caption(
    "Drag to pan, scroll to zoom, double-click to reset; edges read `operator · vN` (the parent version bred from), "
    "nodes show the version(s) their children were bred from. Click a node to open it."
)
clicked = [p["id"] for p in ((event.get("selection") or {}).get(LINEAGE_SELECTION) or []) if p.get("id")]
opened = clicked and clicked[0] != graph.root
if opened and st.button(f"Open {clicked[0]} as the root", key="lineage_open_clicked"):
    st.session_state["lineage_pick"] = clicked[0]
    st.rerun()


def _toggle_collapse(node_id: str) -> None:
    now = list(st.session_state.get("lineage_collapsed", []))
    st.session_state["lineage_collapsed"] = [i for i in now if i != node_id] if node_id in now else [*now, node_id]


if clicked and clicked[0] in foldable:
    verb = "Expand" if clicked[0] in collapsed else "Collapse"
    st.button(f"{verb} {clicked[0]}", key="lineage_toggle_clicked", on_click=_toggle_collapse, args=(clicked[0],))
if len(graph.nodes) <= 30:
    with st.expander("As a Graphviz diagram"):
        st.graphviz_chart(to_dot(graph), width="stretch")
rows = graph_rows(graph)
if search:
    rows = [r for r in rows if search.strip().lower() in f"{r['id']} {r['name']}".lower()]
st.dataframe(rows, width="stretch", hide_index=True)
