"""Lineage: an agent's ancestors and descendants as a graph (operators and versions on the edges) and a table."""

from __future__ import annotations

import streamlit as st

from furnace.app.services import RECENT_AGENTS, services, show_error
from furnace.domain.errors import FurnaceError
from furnace.views.lineage import MAX_NODES, graph_rows, lineage_graph, to_dot

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
    graph = lineage_graph(svc.store, typed.strip(), max_depth=int(depth) or None)
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
st.graphviz_chart(to_dot(graph), width="stretch")
st.dataframe(graph_rows(graph), width="stretch", hide_index=True)
