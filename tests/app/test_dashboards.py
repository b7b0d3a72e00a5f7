"""The Compare page's dashboards on a home with two finished experiments (AppTest)."""

from __future__ import annotations

import pytest

from .helpers import no_errors, run_small_experiments


@pytest.fixture(scope="module")
def experiments(app_home) -> list[str]:
    return run_small_experiments(app_home)


def test_compare_the_top_two_opens_the_side_by_side_comparison(app_unrun, experiments):
    at = app_unrun.switch_page("screens/compare.py").run()
    no_errors(at)
    at.selectbox(key="compare_experiment").set_value(experiments[0]).run()
    at.button(key="compare_top").click().run()
    no_errors(at)
    assert len([m for m in at.metric if m.label == "Fitness"]) == 2
    assert len(at.multiselect(key="compare_ids").value) == 2
    # the side-by-side scores are this page's own: the caption says where the run's figures are
    assert any("experiment's leaderboard" in c.value and "can differ" in c.value for c in at.caption), [
        c.value for c in at.caption
    ]


def test_an_error_on_a_page_is_a_message_not_a_traceback(app_unrun, experiments, monkeypatch):
    import furnace.views.experiments as views

    def broken(*_args, **_kwargs):
        raise RuntimeError("the generations table is unreadable")

    monkeypatch.setattr(views, "generation_rows", broken)
    at = app_unrun.switch_page("screens/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("the generations table is unreadable" in e.value for e in at.error), [e.value for e in at.error]
    monkeypatch.setenv("FURNACE_DEBUG", "1")
    at.run()
    assert at.exception  # with FURNACE_DEBUG the traceback reaches Streamlit


def _charts(at) -> list[dict]:
    """Each Altair chart's Vega-Lite spec, its datasets (name → rows) under "datasets"."""
    import json

    from streamlit import dataframe_util

    charts = []
    for c in at.get("vega_lite_chart"):
        spec = json.loads(c.proto.spec)
        spec["datasets"] = {
            d.name: dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data).to_dict("records")
            for d in c.proto.datasets
        }
        charts.append(spec)
    return charts


def _layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def test_two_experiments_overlaid_with_axes_scaled_to_the_data(app_unrun, app_home, experiments):
    at = app_unrun.switch_page("screens/compare.py").run()
    no_errors(at)
    assert set(at.multiselect(key="compare_experiments").value) == set(experiments)
    titles = {s.get("title"): s for s in _charts(at)}
    for title, x in (("Fitness per generation", "generation"), ("Fitness vs model calls spent", "calls_spent")):
        spec = titles[title]
        lines = next(layer for layer in _layers(spec) if layer["mark"]["type"] == "line")
        assert lines["encoding"]["x"]["field"] == x and lines["encoding"]["color"]["field"] == "experiment"
        rows = spec["datasets"][lines["data"]["name"]]
        values = [r["fitness"] for r in rows] + [r["test_low"] for r in rows if r["measure"] == "test"]
        lo, hi = lines["encoding"]["y"]["scale"]["domain"]
        assert 0 < lo <= min(values) and max(values) <= hi <= 1.0 + 1e-9  # not pinned at 0
        assert {r["experiment"] for r in rows} == set(experiments)
    [totals] = [d.value for d in at.dataframe if {"experiment", "cost_usd"} <= set(d.value.columns)]
    assert set(totals["experiment"]) == set(experiments) and (totals["model_calls"] > 0).all()
    from furnace.runtime import Runtime

    rt = Runtime.from_env(home=app_home)
    try:  # the figures are the call ledger's, the same as the CLI report's
        for row in totals.to_dict("records"):
            ledger = rt.llm.for_run(row["experiment"]).run_totals().as_dict()
            assert row["source"] == "call ledger"
            assert {k: row[k] for k in ("model_calls", "cached_calls", "failed_calls", "attempts", "tokens")} == {
                k: ledger[k] for k in ("model_calls", "cached_calls", "failed_calls", "attempts", "tokens")
            }
    finally:
        rt.close()
    assert any("Operator success" in str(s.get("title")) for s in _charts(at))


def test_fitness_charts_show_the_bests_test_fitness_with_its_interval_beside_train(app_unrun, experiments):
    """Every generation's best, scored on the held-out test probes after the search: a test line beside
    the train line, each test point with its 95% interval drawn as a bar; the figures are the view's
    (the same rows as the report's generations)."""
    from furnace.runtime import Runtime
    from furnace.views.experiments import generation_rows

    at = app_unrun.switch_page("screens/compare.py").run()
    no_errors(at)
    spec = next(s for s in _charts(at) if s.get("title") == "Fitness per generation")
    lines = next(layer for layer in _layers(spec) if layer["mark"]["type"] == "line")
    bars = next(layer for layer in _layers(spec) if layer["mark"]["type"] == "errorbar")
    assert lines["encoding"]["strokeDash"]["field"] == "measure"
    assert (bars["encoding"]["y"]["field"], bars["encoding"]["y2"]["field"]) == ("test_low", "test_high")
    rows = spec["datasets"][lines["data"]["name"]]
    drawn = {(r["experiment"], r["generation"]): r for r in spec["datasets"][bars["data"]["name"]]}
    rt = Runtime.from_env()
    try:
        for exp in experiments:
            for g in generation_rows(rt.results, exp):
                assert g["best_test_fitness"] is not None  # every generation's best was scored on test
                by = {r["measure"]: r for r in rows if (r["experiment"], r["generation"]) == (exp, g["generation"])}
                assert by["best"]["fitness"] == g["best_fitness"]
                assert by["train"]["fitness"] == g["best_train_fitness"]
                test = by["test"]
                assert (test["fitness"], test["test_low"], test["test_high"]) == (
                    g["best_test_fitness"],
                    g["best_test_low"],
                    g["best_test_high"],
                )
                assert test["test_low"] <= test["fitness"] <= test["test_high"]
                assert test["train_test_gap"] == g["best_train_test_gap"]
                bar = drawn[(exp, g["generation"])]
                assert (bar["test_low"], bar["test_high"]) == (g["best_test_low"], g["best_test_high"])
    finally:
        rt.close()


def test_pareto_scatter_highlights_the_front_and_a_click_opens_the_agent(app_unrun, experiments):
    at = app_unrun.switch_page("screens/compare.py").run()
    at.selectbox(key="pareto_x").set_value("brief_fit").run()
    at.selectbox(key="pareto_y").set_value("tone").run()
    no_errors(at)
    [spec] = [s for s in _charts(at) if "front in orange" in str(s.get("title"))]
    dots = next(layer for layer in _layers(spec) if layer["mark"].get("filled"))
    rows = spec["datasets"][dots["data"]["name"]]
    front = {r["agent_id"] for r in rows if r["front"]}
    assert front and len(front) < len(rows)
    for r in rows:  # a front member is beaten on both axes by nobody; everyone else is
        beaten = any(o["x"] >= r["x"] and o["y"] >= r["y"] and (o["x"], o["y"]) != (r["x"], r["y"]) for o in rows)
        assert beaten == (r["agent_id"] not in front), r
    best = max(rows, key=lambda r: r["x"])
    at.session_state["pareto_chart"] = {"selection": {"agent": [{"agent_id": best["agent_id"]}]}}
    at.run()
    no_errors(at)
    assert any(best["agent_id"] in m.value for m in at.markdown), "the clicked agent is not shown"


def test_leaderboard_has_objective_columns_and_the_judges_feedback(app_unrun, experiments):
    at = app_unrun.switch_page("screens/compare.py").run()
    at.selectbox(key="compare_experiment").set_value(experiments[1]).run()
    no_errors(at)
    [board] = [d.value for d in at.dataframe if "judge_feedback" in d.value.columns]
    assert {"fitness", "brief_fit", "tone", "fidelity", "constraints"} <= set(board.columns)
    assert board["fitness"].is_monotonic_decreasing
    assert board["judge_feedback"].str.contains("tone: ").any()
    # beside the fitness (validation): train, held-out test with its 95% interval, and the gap; the
    # leaderboard is scored on test after the search (docs/methods.md)
    assert board["test_fitness"].notna().all()
    assert (board["test_low"] <= board["test_fitness"]).all() and (board["test_fitness"] <= board["test_high"]).all()
    gap = board["train_fitness"] - board["test_fitness"]
    assert ((board["train_test_gap"] - gap).abs() <= 1.5e-4 + 1e-9).all()  # three figures, each rounded to 4 places
    from furnace.runtime import Runtime
    from furnace.views.experiments import held_out

    rt = Runtime.from_env()
    try:
        tested = held_out(rt.results, experiments[1])["agents"]
    finally:
        rt.close()
    for row in board.to_dict("records"):
        assert row["test_fitness"] == round(tested[row["agent_id"]]["test"], 6)


@pytest.fixture(scope="module")
def big_family(app_home) -> tuple[str, list[str]]:
    """120 mutations of viral-copywriter v1 (the library then moves it to v3): a 121-node lineage."""
    from .helpers import seed_family

    return seed_family(app_home, 120)


def test_lineage_explorer_stays_readable_at_120_nodes(app_unrun, big_family):
    root, children = big_family
    app_unrun.session_state["lineage_pick"] = root
    at = app_unrun.switch_page("screens/lineage.py").run()
    no_errors(at)
    [spec] = [s for s in _charts(at) if s.get("layer")]
    layers = _layers(spec)
    nodes = spec["datasets"][next(layer for layer in layers if layer["mark"]["type"] == "circle")["data"]["name"]]
    edges = spec["datasets"][next(layer for layer in layers if layer["mark"]["type"] == "rule")["data"]["name"]]
    assert len(nodes) == 121 and len({(n["depth"], n["row"]) for n in nodes}) == 121  # no two nodes overlap
    assert spec["height"] >= 24 * 120  # a row per node: labels never collide
    assert any(p.get("bind") == "scales" for p in spec.get("params", []))  # pan/zoom
    [root_node] = [n for n in nodes if n["id"] == root]
    assert root_node["label"].endswith("v1 (now v3)")  # the version bred from, not the current one
    assert len(edges) == 120 and {e["label"] for e in edges} == {"mutation · v1"}  # every edge pinned
    at.text_input(key="lineage_search").input(children[7]).run()
    no_errors(at)
    [spec] = [s for s in _charts(at) if s.get("layer")]
    ring = next(layer for layer in _layers(spec) if layer["mark"]["type"] == "point")
    assert [n["id"] for n in spec["datasets"][ring["data"]["name"]]] == [children[7]]
    assert len(at.dataframe[0].value) == 1  # the table is filtered too
    at.slider(key="lineage_depths").set_value((0, 0)).run()
    [spec] = [s for s in _charts(at) if s.get("layer")]
    dots = next(layer for layer in _layers(spec) if layer["mark"]["type"] == "circle")
    assert [n["id"] for n in spec["datasets"][dots["data"]["name"]]] == [root]
    # collapse: the root folds its 120 children into one labelled node; a click on it expands them again
    at.slider(key="lineage_depths").set_value((0, 1)).run()
    at.text_input(key="lineage_search").input("").run()
    at.multiselect(key="lineage_collapsed").select(root).run()
    no_errors(at)
    [spec] = [s for s in _charts(at) if s.get("layer")]
    dots = spec["datasets"][next(x for x in _layers(spec) if x["mark"]["type"] == "circle")["data"]["name"]]
    assert [(n["id"], n["collapsed"]) for n in dots] == [(root, 120)] and dots[0]["label"].endswith("(+120 collapsed)")
    from furnace_app.charts import LINEAGE_SELECTION

    at.session_state["lineage_chart"] = {"selection": {LINEAGE_SELECTION: [{"id": root}]}}
    at.run()
    at.button(key="lineage_toggle_clicked").click().run()
    no_errors(at)
    assert at.multiselect(key="lineage_collapsed").value == []
    [spec] = [s for s in _charts(at) if s.get("layer")]
    dots = spec["datasets"][next(x for x in _layers(spec) if x["mark"]["type"] == "circle")["data"]["name"]]
    assert len(dots) == 121


def test_links_out_to_mlflow_only_when_its_ui_is_configured(app_unrun, experiments, monkeypatch):
    import furnace.adapters.mlflow_store as store
    import furnace.adapters.mlflow_tracker as tracker

    summary = {"run_id": "r1", "mlflow_experiment_id": "4", "status": "FINISHED", "children": 2, "tags": {}}
    monkeypatch.setattr(store, "holds_runs", lambda _uri: True)  # the fake run below is in a tracked home
    monkeypatch.setattr(
        tracker, "run_summary", lambda *_: {**summary, "best_fitness_steps": [], "params": {}, "artifacts": []}
    )
    at = app_unrun.switch_page("screens/compare.py").run()
    no_errors(at)
    assert not at.get("link_button")  # no FURNACE_MLFLOW_UI_URL: hidden
    monkeypatch.setenv("FURNACE_MLFLOW_UI_URL", "http://127.0.0.1:5000")
    at = app_unrun.switch_page("screens/compare.py").run()
    no_errors(at)
    [link] = at.get("link_button")
    assert link.proto.url == "http://127.0.0.1:5000/#/experiments/4/runs/r1"


def test_an_unscored_individual_is_listed_apart_with_its_reason_never_ranked(app_unrun, app_home, experiments):
    from furnace.evolution.records import IndividualRecord, ScoreRow
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    results = Runtime(FurnaceSettings(home=app_home)).results
    failed = (ScoreRow("p1", "fidelity", 0.0, "judge failed: LLMRateLimit", failed=True), ScoreRow("p1", "tone", 1, ""))
    results.save_individual(
        IndividualRecord(
            experiments[0],
            2,
            "agt-judge-failed",
            9,
            "mutation",
            (),
            None,
            {},
            "",
            1.0,
            {"tone": 1.0},
            failed,
            1,
            ("judge failed: 429 from the provider",),
        )
    )
    at = app_unrun.switch_page("screens/compare.py").run()
    at.selectbox(key="compare_experiment").set_value(experiments[0]).run()
    no_errors(at)
    [board] = [d.value for d in at.dataframe if "judge_feedback" in d.value.columns]
    assert "agt-judge-failed" not in set(board["agent_id"])  # fitness 1.0 over what was scored: still not ranked
    [unscored] = [d.value for d in at.dataframe if "unscored" in d.value.columns]
    assert unscored.to_dict("records") == [
        {
            "agent_id": "agt-judge-failed",
            "generation": 2,
            "operator": "mutation",
            "unscored": "fidelity",
            "reason": "judge failed: 429 from the provider",
        }
    ]
    assert any("**Unscored** (1)" in m.value for m in at.markdown)


def test_a_chart_drawn_again_after_another_process_writes_shows_the_write(app_unrun, app_home):
    """Charts are cached on their rows (furnace_app.charts.chart_spec): a child bred by another process (its own
    store) between two renders of the same session is on the next render's chart, never the cached one."""
    from furnace.domain.agent import Agent, agent_id_for
    from furnace.domain.elixir import edit
    from furnace.domain.lineage import Lineage

    from .helpers import store_for

    def drawn(at) -> list[str]:
        [spec] = [s for s in _charts(at) if s.get("layer")]
        return [
            n["id"]
            for n in spec["datasets"][next(x for x in _layers(spec) if x["mark"]["type"] == "circle")["data"]["name"]]
        ]

    app_unrun.session_state["lineage_pick"] = "data-science-mentor"
    at = app_unrun.switch_page("screens/lineage.py").run()
    no_errors(at)
    before = drawn(at)
    at.run()  # the same rows: the cached spec, the same chart
    assert drawn(at) == before
    store = store_for(app_home)
    parent = store.get_elixir("data-science-mentor")
    lineage = Lineage(parents=(parent.ref,), operator="mutation", params={"seed": 99}, op_version="1")
    child = Agent(
        id=agent_id_for(lineage.lineage_hash),
        elixir=edit(parent, identity="A mentor, bred between two renders."),
        lineage=lineage,
        system_prompt="between renders",
    )
    assert child.id not in before
    store.save_agent(child)
    at.run()
    no_errors(at)
    after = drawn(at)
    assert child.id in after and len(after) == len(before) + 1
