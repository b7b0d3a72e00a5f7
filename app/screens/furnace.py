"""Furnace: pick parents, operator and params; see the child, its notes, lineage and cache status; promote."""

from __future__ import annotations

import streamlit as st

from furnace.domain.errors import FurnaceError
from furnace.fusion.fuse import fuse, promote
from furnace.fusion.operators import OPERATORS
from furnace.views.lineage import lineage_graph, to_dot
from furnace_app.services import services, show_error, subject_labels

AUTO = "auto (mutation for one parent, ensemble when far apart, else crossover)"
RESULT_KEY = "furnace_result"

st.title("Furnace")
svc = services()

labels = subject_labels(svc)

with st.container(border=True):
    parents = st.multiselect(
        "Parents (elixirs or agents)",
        list(labels),
        format_func=lambda i: labels.get(i, i),
        max_selections=6,
        key="fuse_parents",
    )
    op_col, seed_col, rate_col = st.columns(3)
    operator = op_col.selectbox("Operator", [AUTO, *sorted(OPERATORS)], key="fuse_operator")
    seed = seed_col.number_input("Seed", 0, 2**31 - 1, 0, key="fuse_seed")
    rate = rate_col.slider(
        "Mutation rate",
        0.05,
        1.0,
        0.25,
        0.05,
        key="fuse_rate",
        help="Used by mutation only: how much may change (0.2–0.3 keeps the child recognisable).",
    )
    submitted = st.button("Fuse", type="primary", key="fuse_go", disabled=not parents)

if submitted:
    op = None if operator == AUTO else operator
    uses_rate = (op or ("mutation" if len(parents) == 1 else "")) == "mutation"
    try:
        with st.spinner("Fusing…"):
            result = fuse(
                svc.store,
                parents,
                llm=svc.llm,
                embedder=svc.embedder,
                cache=svc.synthesis_cache,
                operator=op,
                seed=int(seed),
                params={"rate": rate} if uses_rate else None,
                settings=svc.settings,
            )
        st.session_state[RESULT_KEY] = (result.agent.id, result.from_cache, result.model_calls)
    except FurnaceError as err:
        show_error(err)

if RESULT_KEY in st.session_state:
    agent_id, from_cache, calls = st.session_state[RESULT_KEY]
    try:
        agent = svc.store.get_agent(agent_id)
    except FurnaceError as err:
        show_error(err)
        st.stop()
    lin = agent.lineage
    st.subheader(f"Child: {agent.elixir.name}")
    m1, m2, m3 = st.columns(3)
    m1.metric("Operator", f"{lin.operator} v{lin.op_version}")
    m2.metric("From cache", "yes" if from_cache else "no")
    m3.metric("Model calls", calls)
    st.caption(
        f"agent {agent.id} · lineage_hash {agent.lineage_hash[:16]}… · parents "
        + ", ".join(str(p) for p in lin.parents)
    )
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Resolution notes**")
        if lin.resolution_notes:
            st.dataframe([n.model_dump() for n in lin.resolution_notes], width="stretch", hide_index=True)
        else:
            st.info("No conflicts needed resolving.")
        with st.expander("System prompt"):
            st.code(agent.system_prompt, language="markdown", wrap_lines=True)
        with st.expander("Params"):
            st.json(lin.params)
    with right:
        st.markdown("**Lineage**")
        try:
            st.graphviz_chart(to_dot(lineage_graph(svc.store, agent.id, max_depth=3)))
        except FurnaceError as err:
            show_error(err)
        if st.button("Open in the lineage explorer", key="fuse_open_lineage"):
            st.session_state["lineage_pick"] = agent.id
            st.switch_page("screens/lineage.py")
    with st.container(border=True):
        name = st.text_input("Library name", value=agent.elixir.name, key="promote_name")
        if st.button("Promote to library", key="promote_go"):
            try:
                ref = promote(svc.store, agent.id, name)
                st.success(f"Promoted {agent.id} → {ref.id} v{ref.version} ({ref.content_hash[:12]})")
            except FurnaceError as err:
                show_error(err)
