"""Compare: 2–4 agents side by side on the same probes; experiments over generations (the live store and MLflow)."""

from __future__ import annotations

import contextlib
from typing import Any

import pandas as pd
import streamlit as st

from furnace.domain.errors import FurnaceError
from furnace.domain.text import signed
from furnace.evolution.report import interval_text
from furnace.runtime import self_judging_warning
from furnace.scoring.probes import PROBES_DIR, load_probe_set
from furnace.settings import FurnaceSettings
from furnace.views.compare import MAX_AGENTS, compare_agents, load_subject, objective_rows, prompt_diff
from furnace.views.experiments import (
    MAX_OVERLAY,
    agent_feedback,
    generation_rows,
    leaderboard_rows,
    objective_names,
    operator_rows,
    operator_totals,
    overlay_rows,
    pareto_points,
    ranked,
    run_links,
    totals_rows,
    unscored_rows,
)
from furnace.views.judges import experiment_judges
from furnace.views.picking import grading_judge
from furnace.views.reads import ReadsOnce
from furnace_app.charts import PARETO_SELECTION, chart_spec
from furnace_app.services import UNKNOWN, for_table, known_sum, services, show_error, subject_labels


def pareto_section(svc: Any, experiment_ids: list[str]) -> None:
    """Agents on any two objectives with the front highlighted; a clicked point opens that agent."""
    objectives = objective_names(reads, experiment_ids)
    if len(objectives) < 2:
        return
    st.markdown("**Pareto front**")
    x_col, y_col = st.columns(2)
    x = x_col.selectbox("x objective", objectives, key="pareto_x")
    y = y_col.selectbox("y objective", objectives, index=1, key="pareto_y")
    points = pareto_points(reads, experiment_ids, x, y)
    if not points:
        st.info("No scored agents on these objectives.")
        return
    event = st.vega_lite_chart(
        spec=chart_spec("pareto_scatter", points, x, y),
        width="stretch",
        on_select="rerun",
        selection_mode=PARETO_SELECTION,
        key="pareto_chart",
    )
    picked_points = (event.get("selection") or {}).get(PARETO_SELECTION) or []  # VegaLiteState is a dict
    chosen = [p["agent_id"] for p in picked_points if p.get("agent_id")]
    front = [p for p in points if p["front"]]
    st.caption(f"{len(front)} of {len(points)} agents on the front of {x} and {y}.")
    if chosen:
        agent_panel(svc, chosen[0], points)


def agent_panel(svc: Any, agent_id: str, points: list[dict[str, Any]]) -> None:
    """The agent picked in a chart: its figures, prompt and ways on (lineage, side by side)."""
    point = next((p for p in points if p["agent_id"] == agent_id), {})
    with st.container(border=True):
        try:
            elixir, prompt, kind = load_subject(svc.store, agent_id)
        except FurnaceError as err:
            show_error(err)
            return
        fitness = point.get("fitness")
        fitness_text = UNKNOWN if fitness is None else f"{fitness:.3f}"
        held = interval_text(point) if point.get("test_fitness") is not None else UNKNOWN
        gap = point.get("train_test_gap")
        st.markdown(
            f"**{elixir.name}** · `{agent_id}` · {kind} · fitness {fitness_text} · test {held}"
            + (f" · train − test {signed(gap)}" if gap is not None else "")
        )
        st.caption(f"{point.get('experiment', '')} · generation {point.get('generation')} · {point.get('operator')}")
        with st.expander("System prompt"):
            st.code(prompt, language="markdown", wrap_lines=True)
        if st.button("Open in the lineage explorer", key="pareto_open_lineage"):
            st.session_state["lineage_pick"] = agent_id
            st.switch_page("screens/lineage.py")


def judges_section(svc: Any, exp_id: str) -> None:
    """A panel of judges (``judges: [a, b]``): how fitness reads them, their agreement in words and each
    ranked agent's fitness by judge. Nothing for a one-judge experiment."""
    exp = reads.get_experiment(exp_id)
    view = experiment_judges(exp, ranked(reads, exp_id)) if exp is not None else None
    if view is None:
        return
    st.markdown(f"**Judges**: {', '.join(view.judges)} (fitness: {view.agreement.get('fitness', UNKNOWN)})")
    for text in view.agreement.get("readings", []):
        st.caption(text)
    st.dataframe(view.rows(), width="stretch", hide_index=True)


def experiment_detail(svc: Any, exp_id: str) -> None:
    """One experiment: leaderboard with per-objective columns and the judge's feedback, generations, MLflow."""
    exp = reads.get_experiment(exp_id)
    warning = self_judging_warning(exp.model, grading_judge(exp)) if exp is not None else None
    if warning:  # the agent model graded itself (a real model, no separate judge)
        st.warning(warning.removeprefix("warning: "), icon=":material/warning:")
    gens = pd.DataFrame(generation_rows(reads, exp_id))
    if gens.empty:
        st.info("This experiment has no finished generation yet.")
    else:
        st.markdown(
            "**Leaderboard** (fitness on validation; train and held-out test fitness with its 95% interval and "
            "the train–test gap; per-objective scores and the judge's feedback)"
        )
        board = leaderboard_rows(reads, exp_id)
        st.dataframe(
            board,
            width="stretch",
            hide_index=True,
            column_config={
                "judge_feedback": st.column_config.TextColumn("judge's feedback", width="large"),
                "fitness": st.column_config.NumberColumn("fitness", help="on the validation probes (selection)"),
                "test_fitness": st.column_config.NumberColumn("test", help="on the held-out test probes"),
                "test_low": st.column_config.NumberColumn("test 95% low", help="the test fitness's 95% interval"),
                "test_high": st.column_config.NumberColumn("test 95% high", help="the test fitness's 95% interval"),
                "train_test_gap": st.column_config.NumberColumn("train − test", help="train fitness minus test"),
            },
        )
        st.button(
            "Compare the top two",
            key="compare_top",
            disabled=len(board) < 2,
            on_click=_compare_top_two,
            args=([r["agent_id"] for r in board[:2]],),
        )
        judges_section(svc, exp_id)
        unscored = unscored_rows(reads, exp_id)
        if unscored:
            st.markdown(
                f"**Unscored** ({len(unscored)}): a failure, not a score — not ranked, kept out of selection; "
                "a rerun evaluates them again"
            )
            st.dataframe(unscored, width="stretch", hide_index=True)
        if board:
            with st.expander("Judge feedback (what was missing or wrong, per probe)"):
                agent = st.selectbox(
                    "Agent", [r["agent_id"] for r in board], key="feedback_agent", label_visibility="collapsed"
                )
                notes = agent_feedback(reads, exp_id, agent)
                if notes:
                    st.dataframe(notes, width="stretch", hide_index=True)
                else:
                    st.caption("No judge feedback recorded for this agent (its judges found nothing to fix).")
        ops = pd.DataFrame(operator_rows(reads, exp_id))
        if not ops.empty:
            with st.expander("Operator success per generation"):
                st.dataframe(ops, width="stretch", hide_index=True)
        with st.expander("Generations table"):
            st.dataframe(gens, width="stretch", hide_index=True)
    try:
        from furnace.adapters.mlflow_store import holds_runs

        summary, unavailable = None, ""
        if holds_runs(svc.settings.tracking_uri):  # else MLflow is not even imported (seconds of CPU)
            from furnace.adapters.mlflow_tracker import run_summary

            summary = run_summary(svc.settings.tracking_uri, exp_id)
    except Exception as err:  # MLflow is for comparison only; the live store above is the record
        summary, unavailable = None, f"MLflow unavailable: {err.__class__.__name__}"
    ui = FurnaceSettings()  # read per render: a UI configured later shows up without restarting the app
    links = run_links(summary, mlflow_ui=ui.mlflow_ui_url, prefect_ui=ui.prefect_ui_url)
    if links:  # only for the UIs configured in settings, and runs that exist
        for column, (label, url) in zip(st.columns(len(links)), links.items(), strict=True):
            column.link_button(f"Open the {label}", url)
    with st.expander("MLflow run"):
        if summary:
            st.caption(f"run {summary['run_id']} · {summary['status']} · {summary['children']} child run(s)")
            steps = pd.DataFrame(summary["best_fitness_steps"], columns=["step", "best_fitness"]).set_index("step")
            for key in ("best_train_fitness", "best_test_fitness", "best_test_low", "best_test_high"):
                held = pd.DataFrame(summary.get("held_out_steps", {}).get(key, []), columns=["step", key])
                steps = steps.join(held.set_index("step"), how="left") if not held.empty else steps
            if not steps.empty:
                st.line_chart(steps)  # the best's train and test fitness (with its interval) once the run has finished
            st.json({"params": summary["params"], "artifacts": summary["artifacts"]}, expanded=False)
        else:
            st.caption(unavailable or "No MLflow run recorded for this experiment.")


st.title("Compare")
svc = services()
reads = ReadsOnce(svc.results)  # this render's reads of the experiments, each made once
AGENTS_TAB, EXPERIMENTS_TAB = "Agents side by side", "Experiments"
agents_tab, experiments_tab = st.tabs([AGENTS_TAB, EXPERIMENTS_TAB], key="compare_tab", on_change="rerun")


def _compare_top_two(agent_ids: list[str]) -> None:
    """A button callback (runs before any widget): pick the agents and show the side-by-side tab."""
    st.session_state["compare_pick"] = agent_ids
    st.session_state["compare_tab"] = AGENTS_TAB


with agents_tab:
    labels = subject_labels(svc)
    for extra in st.session_state.get("compare_pick") or []:  # picked elsewhere (e.g. an older experiment's agents)
        if extra not in labels:
            with contextlib.suppress(FurnaceError):
                labels[extra] = f"{load_subject(svc.store, extra)[0].name} ({extra})"
    preset = [i for i in st.session_state.get("compare_pick") or [] if i in labels][:MAX_AGENTS]
    if preset and st.session_state.get("_applied_compare_pick") != preset:  # picked elsewhere: move the widget
        st.session_state["compare_ids"] = preset
        st.session_state["_applied_compare_pick"] = preset
    chosen = st.multiselect(
        "Agents or elixirs (2–4)",
        list(labels),
        max_selections=MAX_AGENTS,
        format_func=lambda i: labels.get(i, i),
        key="compare_ids",
    )
    sets = sorted(p.stem for p in PROBES_DIR.glob("*.yaml"))
    set_col, n_col = st.columns([3, 1])
    probe_set = set_col.selectbox(
        "Probe set", sets, index=sets.index("writing-en") if "writing-en" in sets else 0, key="compare_probes"
    )
    limit = n_col.number_input("Probes", 1, 20, 3, key="compare_limit")
    clicked = st.button("Compare", type="primary", key="compare_run", disabled=len(chosen) < 2)
    shown = [c.id for c in st.session_state.get("compare_cards") or []]
    if len(chosen) >= 2 and (
        clicked or (preset and chosen == preset and shown != chosen)
    ):  # a pick from elsewhere runs at once
        st.session_state["compare_pick"] = chosen
        try:
            probes = load_probe_set(probe_set).head(int(limit))
            with st.spinner("Answering and scoring the probes…"):
                st.session_state["compare_cards"] = compare_agents(svc.store, svc.llm, chosen, probes)
        except FurnaceError as err:
            show_error(err)
    elif len(chosen) < 2:
        st.info("Pick two to four agents or elixirs.")
    cards = st.session_state.get("compare_cards") or []
    if cards:
        st.dataframe(for_table(objective_rows(cards)), width="stretch", hide_index=True)
        st.caption(
            "Scored here, now, on the probes shown, with this page's own samples and scorers: an agent's figures "
            "in its experiment's leaderboard (the Experiments tab) are that run's, on its own probes and "
            "objectives, and can differ."
        )
        if any(c.held_out for c in cards):
            st.caption(
                "fitness (weighted) is over every probe shown; the rows below split off the probe set's held-out "
                "test probes: the fitness outside them, on them with its 95% interval, and the gap (docs/methods.md)."
            )
        for col, card in zip(st.columns(len(cards)), cards, strict=False):
            with col:
                st.subheader(card.name)
                st.caption(f"{card.id} · {card.kind} v{card.version}")
                st.metric("Fitness", f"{card.fitness:.3f}")
                for answer in card.answers:
                    with st.container(border=True):
                        st.markdown(f"**{answer.probe_id}** — {answer.message}")
                        if answer.error:
                            st.error(answer.error)
                        else:
                            st.write(answer.answer)
        with st.expander("System prompts diffed"):
            for other in cards[1:]:
                st.code(prompt_diff(cards[0], other) or "(identical)", language="diff")

with experiments_tab:
    try:
        experiments = reads.list_experiments()
    except FurnaceError as err:
        show_error(err)
        experiments = []
    if not experiments:
        st.info(
            "No experiments yet: run `furnace experiment run furnace/resources/experiments/demo.yaml` "
            "(or `furnace demo`)."
        )
    else:
        names = {e.experiment_id: f"{e.name} · {e.experiment_id} · {e.status}" for e in experiments}

        def label(experiment_id: str) -> str:
            return names.get(experiment_id, experiment_id)

        if not st.session_state.get("compare_experiments"):
            st.session_state["compare_experiments"] = list(names)[:2]  # the two newest
        picked = st.multiselect(
            f"Experiments to overlay (1–{MAX_OVERLAY})",
            list(names),
            max_selections=MAX_OVERLAY,
            format_func=label,
            key="compare_experiments",
        )
        overlay = overlay_rows(reads, picked)
        if not overlay:
            st.info("Pick an experiment with at least one finished generation.")
        else:
            gen_col, calls_col = st.columns(2)
            gen_col.vega_lite_chart(
                spec=chart_spec("fitness_overlay", overlay, "generation", "Fitness per generation"), width="stretch"
            )
            calls_col.vega_lite_chart(
                spec=chart_spec("fitness_overlay", overlay, "calls_spent", "Fitness vs model calls spent"),
                width="stretch",
            )
            st.caption(
                "Lines by dash and point shape: best (validation, what selection used), mean, and the best's "
                "train and held-out test fitness; the bars on the test line are its 95% interval (the train–test "
                "gap is in the tooltip). Test is scored after the search: a run still going has no test line. Axes are "
                "scaled to the data; drag to pan, scroll to zoom."
            )
            st.markdown("**Calls and cost** (a finished run: from the call ledger, as in its report)")
            totals: list[dict[str, Any]] | None
            try:  # a finished run's totals are its ledger's rows, held to the totals sealed at its finish
                totals = totals_rows(reads, picked, lambda e: svc.llm.ledger.totals(e, family=True))
            except FurnaceError as err:
                show_error(err)  # a thinned or edited ledger: said, never shown as numbers
                totals = None
            if totals is not None:
                st.dataframe(for_table(totals), width="stretch", hide_index=True)
                cost = [t["cost_usd"] for t in totals if t["cost_usd"] is not None]
                st.caption(
                    f"total: {known_sum(totals, 'model_calls')} model calls "
                    f"(+{known_sum(totals, 'cached_calls')} served from the cache), "
                    f"{known_sum(totals, 'tokens')} tokens, " + (f"${sum(cost):.4f}" if cost else UNKNOWN)
                )
            ops = operator_totals(reads, picked)
            if ops:
                st.vega_lite_chart(
                    spec=chart_spec(
                        "grouped_bars",
                        ops,
                        "operator",
                        "success_rate",
                        "experiment",
                        "Operator success (children fitter than parents)",
                    ),
                    width="stretch",
                )
            pareto_section(svc, picked)
        exp_id = st.selectbox(
            "Experiment in detail", picked or list(names), format_func=label, key="compare_experiment"
        )
        if exp_id is not None:  # never None here: the options are not empty
            experiment_detail(svc, exp_id)
