"""The app's read models (furnace.views): pure functions over in-memory stores."""

from __future__ import annotations

import pytest

from furnace.domain.agent import Agent, agent_id_for
from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError, NotFound, SealError
from furnace.domain.lineage import Lineage
from furnace.domain.render import render_prompt
from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord, MemoryResults, ScoreRow
from furnace.llm.cache import CallTotals
from furnace.llm.offline import OfflineEngine
from furnace.scoring.probes import load_probe_set
from furnace.storage.memory import MemoryStore
from furnace.views.compare import compare_agents, objective_rows, prompt_diff
from furnace.views.experiments import (
    agent_feedback,
    generation_rows,
    leaderboard_rows,
    operator_rows,
    unscored_rows,
)
from furnace.views.lineage import lineage_graph, to_dot


def _elixir(id: str, name: str, expertise: str) -> Elixir:
    return Elixir.model_validate(
        dict(
            id=id,
            name=name,
            language="en",
            identity=f"A careful {expertise} expert.",
            expertise=[expertise],
            principles=[f"Explain {expertise} plainly."],
        )
    )


def _agent(store: MemoryStore, parents: list[str], operator: str = "crossover", name: str = "child") -> Agent:
    refs = tuple(store.get_elixir(p).ref for p in parents)
    lineage = Lineage(parents=refs, operator=operator, params={"seed": len(name)}, op_version="1")
    child = _elixir("x", name, "fusion")
    agent = Agent(
        id=agent_id_for(lineage.lineage_hash), elixir=child, lineage=lineage, system_prompt=render_prompt(child)
    )
    store.save_agent(agent)
    return store.get_agent(agent.id)


@pytest.fixture()
def family() -> tuple[MemoryStore, Agent, Agent]:
    """a + b (b at v2) → child; child + c → grandchild."""
    store = MemoryStore()
    for id_, name, topic in (("a", 'Ann "the" Analyst', "statistics"), ("b", "Bo", "baking"), ("c", "Cy", "chess")):
        store.save_elixir(_elixir(id_, name, topic))
    store.save_elixir(_elixir("b", "Bo", "bread"))  # v2
    child = _agent(store, ["a", "b"], name="child")
    grandchild = _agent(store, [child.id, "c"], operator="mutation", name="grandchild")
    return store, child, grandchild


def test_graph_has_every_parent_with_operator_and_version(family) -> None:
    store, child, grandchild = family
    graph = lineage_graph(store, child.id)
    assert {n.id: n.depth for n in graph.nodes} == {child.id: 0, "a": -1, "b": -1, grandchild.id: 1}
    labels = {(e.parent, e.child): e.label for e in graph.edges}
    assert labels[("a", child.id)] == "crossover · v1"
    assert labels[("b", child.id)] == "crossover · v2"  # the pinned parent version, not the latest only
    assert labels[(child.id, grandchild.id)] == "mutation · v1"
    assert not graph.truncated


def test_graph_is_cut_to_the_nearest_nodes(family) -> None:
    store, child, _ = family
    graph = lineage_graph(store, child.id, max_nodes=2)
    assert len(graph.nodes) == 2 and graph.truncated and graph.total_nodes == 4


def test_dot_quotes_names_and_marks_the_root(family) -> None:
    store, child, grandchild = family
    dot = to_dot(lineage_graph(store, grandchild.id))
    assert dot.startswith("digraph lineage {") and dot.rstrip().endswith("}")
    assert '"a" [label="Ann \\"the\\" Analyst v1\\na"' in dot  # quotes escaped, id on a second line
    assert f'"{grandchild.id}" [label=' in dot and '"#ffd8a8"' in dot
    assert f'"{child.id}" -> "{grandchild.id}" [label="mutation · v1"];' in dot


def test_unknown_id_is_not_found() -> None:
    with pytest.raises(NotFound):
        lineage_graph(MemoryStore(), "nobody")


def test_compare_two_agents_on_the_same_probes(family) -> None:
    store, child, _ = family
    probes = load_probe_set("writing-en").head(2)
    cards = compare_agents(store, OfflineEngine(), [child.id, "a"], probes)
    assert [c.id for c in cards] == [child.id, "a"] and [c.kind for c in cards] == ["agent", "elixir"]
    assert all(len(c.answers) == 2 and all(a.answer for a in c.answers) for c in cards)
    assert all(set(c.objectives) == {"brief_fit", "constraints", "fidelity", "tone"} for c in cards)
    rows = objective_rows(cards)
    assert rows[-1]["objective"] == "fitness (weighted)" and rows[-1][child.id] == round(cards[0].fitness, 3)
    diff = prompt_diff(cards[0], cards[1])
    assert diff.startswith(f"--- {child.id}\n+++ a") and "statistics" in diff
    with pytest.raises(InputError):
        compare_agents(store, OfflineEngine(), ["a"], probes)


def test_compare_shows_test_fitness_with_its_interval_beside_the_rest(family) -> None:
    """Probes that include test-split ones: each card's fitness outside them, on them (interval) and the gap,
    the same figures an experiment's held-out evaluation gives (split_held_out)."""
    from furnace.evolution.evaluate import combine
    from furnace.views.compare import DEFAULT_SCORERS as DEFAULT_WEIGHTS

    store, child, _ = family
    probes = load_probe_set("writing-en").head(4)
    [test_id] = [p.id for p in probes.splits()["test"]]
    cards = compare_agents(store, OfflineEngine(), [child.id, "a"], probes)
    rows = {r["objective"]: r for r in objective_rows(cards)}
    for card in cards:
        held = card.held_out
        outside = combine([s for s in card.scores if s.probe != test_id], DEFAULT_WEIGHTS)
        inside = combine([s for s in card.scores if s.probe in (test_id, "*")], DEFAULT_WEIGHTS)
        assert held["train_fitness"] == pytest.approx(outside.fitness, abs=1e-6)
        assert held["test_fitness"] == pytest.approx(inside.fitness, abs=1e-6)
        assert held["test_low"] <= held["test_fitness"] <= held["test_high"]
        assert held["train_test_gap"] == pytest.approx(held["train_fitness"] - held["test_fitness"], abs=1e-6)
        assert rows["test fitness"][card.id] == round(held["test_fitness"], 3)
        assert rows["train − test gap"][card.id] == round(held["train_test_gap"], 3)
    two = compare_agents(store, OfflineEngine(), [child.id, "a"], load_probe_set("writing-en").head(2))
    assert all(not c.held_out for c in two) and "test fitness" not in {r["objective"] for r in objective_rows(two)}


def _ind(gen: int, agent: str, fitness: float, parents: tuple[str, ...] = (), op: str = "seed") -> IndividualRecord:
    return IndividualRecord("x", gen, agent, 0, op, parents, None, {}, "", fitness, {"tone": fitness})


def test_experiment_rows() -> None:
    results = MemoryResults()
    for record in (
        _ind(0, "p", 0.5),
        _ind(0, "q", 0.6),
        _ind(1, "r", 0.7, ("p", "q"), "crossover"),
        _ind(1, "s", 0.4, ("q",), "mutation"),
        _ind(1, "q", 0.6),
    ):
        results.save_individual(record)
    results.save_generation(GenerationRecord("x", 0, ("p", "q"), 0.6, 0.55, {"crossover": 0.5}, calls=10))
    results.save_generation(GenerationRecord("x", 1, ("r", "q"), 0.7, 0.65, {"crossover": 0.6}, calls=8))
    assert [(g["generation"], g["best_fitness"], g["calls"]) for g in generation_rows(results, "x")] == [
        (0, 0.6, 10),
        (1, 0.7, 8),
    ]
    ops = {
        (r["operator"], r["generation"]): (r["children"], r["fitter_than_parents"]) for r in operator_rows(results, "x")
    }
    assert ops == {("crossover", 1): (1, 1), ("mutation", 1): (1, 0)}
    assert [r["agent_id"] for r in leaderboard_rows(results, "x")] == ["r", "q", "p", "s"]
    assert unscored_rows(results, "x") == []
    # a judge failure: the agent leaves the ranking and is listed with what is unknown and why
    failed = (ScoreRow("a", "fidelity", 0.0, "judge failed: LLMRateLimit", failed=True), ScoreRow("a", "tone", 0.9, ""))
    results.save_individual(
        IndividualRecord(
            "x", 1, "t", 1, "mutation", ("p",), None, {}, "", 0.9, {"tone": 0.9}, failed, 1, ("judge failed: 429",)
        )
    )
    assert "t" not in [r["agent_id"] for r in leaderboard_rows(results, "x")]
    ops = {
        (r["operator"], r["generation"]): (r["children"], r["fitter_than_parents"]) for r in operator_rows(results, "x")
    }
    assert ops[("mutation", 1)] == (2, 0)  # t's partial 0.9 beats p's 0.5, but it is no score
    assert unscored_rows(results, "x") == [
        {
            "agent_id": "t",
            "generation": 1,
            "operator": "mutation",
            "unscored": "fidelity",
            "reason": "judge failed: 429",
        }
    ]


def test_agent_feedback_is_the_first_scoring_weakest_first() -> None:
    results = MemoryResults()
    first = (
        ScoreRow("b", "fidelity", 0.7, "r", feedback="missing: x"),
        ScoreRow("a", "tone", 0.3, "r", feedback="tone: too formal"),
        ScoreRow("a", "constraints", 1.0, "r"),
    )
    results.save_individual(IndividualRecord("x", 0, "p", 0, "seed", (), None, {}, "", 0.5, {}, scores=first))
    again = (ScoreRow("a", "tone", 0.1, "r", feedback="later"),)
    results.save_individual(IndividualRecord("x", 1, "p", 0, "seed", (), None, {}, "", 0.5, {}, scores=again))
    rows = agent_feedback(results, "x", "p")
    assert [(r["probe"], r["feedback"]) for r in rows] == [("a", "tone: too formal"), ("b", "missing: x")]
    assert agent_feedback(results, "x", "nobody") == []


def test_overlay_totals_pareto_and_axis_domain() -> None:
    from furnace.views.experiments import axis_domain, overlay_rows, pareto_points, totals_rows

    results = MemoryResults()
    for exp, calls in (("x", (10, 8)), ("y", (5, 5))):
        for gen, (best, mean) in enumerate(((0.76, 0.7), (0.9, 0.8))):
            results.save_generation(GenerationRecord(exp, gen, (), best, mean, calls=calls[gen], cost_usd=0.01))
    rows = overlay_rows(results, ["x", "y", "x"])
    assert [(r["experiment"], r["generation"], r["calls_spent"]) for r in rows if r["measure"] == "best"] == [
        ("x", 0, 10),
        ("x", 1, 18),  # cumulative calls spent
        ("y", 0, 5),
        ("y", 1, 10),
    ]
    results.start_experiment(ExperimentRecord("z", "z", {}, 1, "m"))  # started, no generation finished
    rows_of = {"x": CallTotals(calls=28, cached_calls=3, failed_calls=2, attempts=27, prompt_tokens=900, cost_usd=0.5)}

    def ledger(experiment_id: str) -> CallTotals:
        return rows_of.get(experiment_id, CallTotals())

    [started] = totals_rows(results, ["z"], ledger)
    assert started["best_fitness"] is None and started["failed_calls"] is None  # unknown, never 0
    from furnace_app.services import for_table, known_sum

    assert for_table([started])[0]["best_fitness"] == "—" and known_sum([started], "attempts") == "—"
    running = totals_rows(results, ["x", "y"], ledger)  # no summary yet: the finished generations' sums
    assert [(t["model_calls"], t["failed_calls"]) for t in running] == [(18, None), (10, None)]
    assert {t["source"] for t in running} == {"finished generations (run in progress)"}
    sealed = {"model_calls": 25, "cached_calls": 3, "failed_calls": 2, "attempts": 27, "tokens": 900, "cost_usd": 0.5}
    results.start_experiment(ExperimentRecord("x", "x", {}, 1, "m"))
    results.finish_experiment("x", "finished", {"best_fitness": 0.9, "calls": 25, **sealed})
    finished = totals_rows(results, ["x"], ledger)[0]  # the ledger's totals win (failed attempts included)
    assert {k: finished[k] for k in sealed} == sealed and finished["source"] == "call ledger"
    rows_of["x"] = CallTotals(calls=20, cached_calls=3, failed_calls=2, attempts=22, prompt_tokens=700, cost_usd=0.4)
    with pytest.raises(SealError, match="experiment x: its call ledger holds 17 calls"):
        totals_rows(results, ["x"], ledger)  # ledger rows deleted: an error, not the sealed numbers
    lo, hi = axis_domain([0.76, 0.9])
    assert 0.7 < lo < 0.76 and 0.9 < hi < 0.95  # scaled to the data, not from 0
    assert axis_domain([0.5, 0.5]) == (0.488, 0.512)  # a flat series still gets a readable span
    scores = (ScoreRow("p", "tone", 0.5, "ok"),)
    for agent, a, b in (("p", 0.9, 0.1), ("q", 0.5, 0.5), ("r", 0.4, 0.4), ("s", 0.1, 0.9)):
        results.save_individual(
            IndividualRecord("x", 0, agent, 0, "seed", (), None, {}, "", a, {"a": a, "b": b}, scores=scores)
        )
    points = {p["agent_id"]: p["front"] for p in pareto_points(results, ["x"], "a", "b")}
    assert points == {"p": True, "q": True, "r": False, "s": True}


def test_nodes_show_the_version_bred_from_and_the_explorer_never_overlaps(family) -> None:
    from furnace.views.lineage import explorer_layout, node_version_labels

    store, child, grandchild = family
    store.save_elixir(_elixir("a", "Ann", "statistics again"))  # a is now v2; child was bred from a v1
    graph = lineage_graph(store, grandchild.id)
    labels = node_version_labels(graph)
    assert labels["a"] == "v1 (now v2)" and labels["b"] == "v2"
    assert '"a" [label="Ann v1 (now v2)\\na"' in to_dot(graph)
    nodes, edges = explorer_layout(graph)
    assert len({(n["depth"], n["row"]) for n in nodes}) == len(nodes) == len(graph.nodes)
    assert {(e["parent"], e["child"], e["label"]) for e in edges} >= {("a", child.id, "crossover · v1")}
    only_parents, _ = explorer_layout(graph, depths=(-1, 0), search="ann")
    assert {n["id"] for n in only_parents} == {child.id, "c", grandchild.id}  # depth -1 and the root
    found, _ = explorer_layout(graph, search="ANN")
    assert [n["id"] for n in found if n["match"]] == ["a"]


def test_collapse_hides_what_lies_beyond_a_node_and_counts_it(family) -> None:
    from furnace.views.lineage import collapsible, explorer_layout

    store, child, grandchild = family
    down = lineage_graph(store, "a")  # a → child → grandchild
    assert collapsible(down) == sorted(["a", child.id])
    nodes, edges = explorer_layout(down, collapsed={child.id})
    assert [n["id"] for n in nodes] == ["a", child.id] and [(e["parent"], e["child"]) for e in edges] == [
        ("a", child.id)
    ]
    folded = next(n for n in nodes if n["id"] == child.id)
    assert folded["collapsed"] == 1 and folded["label"].endswith("(+1 collapsed)")
    root_only, _ = explorer_layout(down, collapsed={"a"})
    assert [(n["id"], n["collapsed"]) for n in root_only] == [("a", 2)]
    up = lineage_graph(store, grandchild.id)  # ancestors: child and c (-1), a and b (-2)
    assert collapsible(up) == [child.id]
    nodes, _ = explorer_layout(up, collapsed={child.id, "unknown-id"})
    assert {n["id"] for n in nodes} == {grandchild.id, child.id, "c"}  # a and b folded into child
    assert explorer_layout(up, collapsed=set())[0] == explorer_layout(up)[0]


def test_bulk_edge_versions_pin_edges_beyond_the_detailed_nodes(family) -> None:
    store, child, grandchild = family
    bare = lineage_graph(store, "a", max_details=0)
    assert all(e.parent_version is None for e in bare.edges)
    asked: list[list[str]] = []

    def versions(children: list[str]) -> dict[tuple[str, str], int]:
        asked.append(children)
        return {("a", child.id): 1, (child.id, grandchild.id): 1}

    pinned = lineage_graph(store, "a", max_details=0, edge_versions=versions)
    assert {(e.parent, e.child): e.label for e in pinned.edges} == {
        ("a", child.id): "crossover · v1",
        (child.id, grandchild.id): "mutation · v1",
    }
    assert asked == [sorted([child.id, grandchild.id])]  # one bulk read


def test_run_links_only_for_configured_uis_and_known_runs() -> None:
    from furnace.views.experiments import PREFECT_FLOW_RUN_TAG, run_links

    summary = {"run_id": "r1", "mlflow_experiment_id": "3", "tags": {PREFECT_FLOW_RUN_TAG: "f-9"}}
    assert run_links(summary, mlflow_ui=None, prefect_ui=None) == {}
    assert run_links(None, mlflow_ui="http://127.0.0.1:5000", prefect_ui="http://127.0.0.1:4200") == {}
    assert run_links(summary, mlflow_ui="http://127.0.0.1:5000/", prefect_ui="http://127.0.0.1:4200") == {
        "MLflow run": "http://127.0.0.1:5000/#/experiments/3/runs/r1",
        "Prefect flow run": "http://127.0.0.1:4200/runs/flow-run/f-9",
    }
    assert list(run_links({**summary, "tags": {}}, mlflow_ui="u", prefect_ui="p")) == ["MLflow run"]


def test_fifty_nodes_keep_short_distinct_labels() -> None:
    """50 bred children of one pair share a name: each chart label is still distinct and short."""
    from furnace.views.lineage import LABEL_CHARS, explorer_layout

    store = MemoryStore()
    store.save_elixir(_elixir("a", "Ann the Very Long-Named Statistical Analyst", "statistics"))
    store.save_elixir(_elixir("b", "Bo", "baking"))
    refs = tuple(store.get_elixir(p).ref for p in ("a", "b"))
    for seed in range(48):  # 48 children of one pair, one shared (long) name
        lineage = Lineage(parents=refs, operator="crossover", params={"seed": seed}, op_version="1")
        child = _elixir("x", "Ann the Very Long-Named Statistical Analyst × Bo", "fusion")
        store.save_agent(
            Agent(
                id=agent_id_for(lineage.lineage_hash), elixir=child, lineage=lineage, system_prompt=render_prompt(child)
            )
        )
    graph = lineage_graph(store, "a")
    nodes, _ = explorer_layout(graph)
    assert len(nodes) >= 49
    shorts = [str(n["short"]) for n in nodes]
    assert len(set(shorts)) == len(shorts) and max(map(len, shorts)) <= LABEL_CHARS
    shared = [n for n in nodes if str(n["label"]).startswith("Ann the Very Long-Named Statistical Analyst × Bo")]
    assert len(shared) >= 30  # most children carry the one long name (the rest are shown by id)


def test_reads_once_reads_each_thing_once_per_render_and_the_next_render_afresh() -> None:
    """The Compare page wraps the store in ReadsOnce per render: the views' many reads of one experiment go
    to the store once, and the next render (a new ReadsOnce) sees what was written since."""
    from furnace.views.reads import ReadsOnce

    results = MemoryResults()
    counted: list[tuple[str, tuple]] = []

    class Counting:
        def __getattr__(self, name: str):
            read = getattr(results, name)

            def counted_read(*args):
                counted.append((name, args))
                return read(*args)

            counted_read.__name__ = name
            return counted_read

    results.save_individual(_ind(0, "p", 0.5))
    results.save_individual(_ind(0, "q", 0.6))
    results.save_generation(GenerationRecord("x", 0, ("p", "q"), 0.6, 0.55, {}, calls=10))
    render = ReadsOnce(Counting())
    first = leaderboard_rows(render, "x")
    assert first == leaderboard_rows(results, "x")  # the same rows as straight from the store
    assert operator_rows(render, "x") == operator_rows(results, "x")
    assert unscored_rows(render, "x") == [] and generation_rows(render, "x") == generation_rows(results, "x")
    assert counted.count(("individuals", ("x", None))) == 1 and counted.count(("generations", ("x",))) == 1
    render.individuals("x").clear()  # a caller's list is its own copy
    assert len(render.individuals("x")) == 2
    results.save_individual(_ind(1, "r", 0.9, ("p",), "mutation"))  # written after this render read
    assert [r["agent_id"] for r in leaderboard_rows(ReadsOnce(Counting()), "x")] == ["r", "q", "p"]
    assert counted.count(("individuals", ("x", None))) == 2  # the next render read the store again


def test_held_out_figures_print_as_the_runs_report_prints_them() -> None:
    from furnace.evolution.report import held_out_columns, interval_text
    from furnace.views.experiments import held_out_fields

    stored = {"train": 0.8105, "test": 0.689, "test_low": 0.681535, "test_high": 0.6955, "gap": 0.1215}
    shown = held_out_fields({"agents": {"agt-a": stored}}, "agt-a")
    # rounded to 4 places and then to 3, 0.681535 printed as 0.681 where the run's report printed 0.682
    assert interval_text(shown) == interval_text(held_out_columns(stored)) == "0.689 [0.682, 0.696]"
    assert f"{shown['train_fitness']:.3f}" == f"{stored['train']:.3f}"


def test_the_leaderboards_feedback_names_each_scorer_once() -> None:
    from furnace.views.experiments import judge_feedback

    scores = (
        ScoreRow("a", "tone", 0.3, "r", feedback="tone: needs humour"),
        ScoreRow("b", "fidelity", 0.7, "r", feedback="missing: x"),
    )
    record = IndividualRecord("x", 0, "p", 0, "seed", (), None, {}, "", 0.5, {}, scores=scores)
    # the tone judge's note begins with its name: the column said "tone: tone: needs humour"
    assert judge_feedback(record) == "fidelity: missing: x · tone: needs humour"
