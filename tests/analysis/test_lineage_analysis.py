"""furnace.analysis.lineage on a small hand-built DAG and experiment (exact values)."""

from __future__ import annotations

import pandas as pd
import pytest

import furnace.analysis as fa
from furnace.domain.errors import InputError

EDGES = pd.DataFrame(
    [
        ("a", "c", "crossover"),
        ("b", "c", "crossover"),
        ("a", "d", "mutation"),
        ("c", "e", "crossover"),
        ("d", "e", "crossover"),
        ("c", "f", "mutation"),
    ],
    columns=["parent", "child", "operator"],
)


def individuals() -> pd.DataFrame:
    rows = [
        (0, "a", "seed", [], 0.5),
        (0, "b", "seed", [], 0.7),
        (1, "c", "crossover", ["a", "b"], 0.8),
        (1, "d", "mutation", ["a"], 0.4),
        (2, "e", "crossover", ["c", "d"], 0.75),
        (2, "c", "crossover", ["a", "b"], 0.8),
        (2, "f", "mutation", ["c"], 0.9),
    ]
    return pd.DataFrame(
        [("exp", g, a, op, p, f) for g, a, op, p, f in rows],
        columns=["experiment_id", "generation", "agent_id", "operator", "parents", "fitness"],
    )


def test_ancestry_is_breadth_first_with_shortest_depth_and_smallest_via() -> None:
    anc = fa.ancestry(EDGES, "e")
    assert anc.to_dict("records") == [
        {"id": "c", "depth": 1, "via": "e", "operator": "crossover"},
        {"id": "d", "depth": 1, "via": "e", "operator": "crossover"},
        {"id": "a", "depth": 2, "via": "c", "operator": "crossover"},
        {"id": "b", "depth": 2, "via": "c", "operator": "crossover"},
    ]
    assert list(fa.ancestry(EDGES, "e", max_depth=1)["id"]) == ["c", "d"]
    assert list(fa.ancestry(EDGES, "f")[["id", "depth"]].itertuples(index=False, name=None)) == [
        ("c", 1),
        ("a", 2),
        ("b", 2),
    ]
    assert fa.ancestry(EDGES, "a").empty


def test_ancestor_pairs_cover_every_child() -> None:
    pairs = fa.ancestor_pairs(EDGES)
    assert len(pairs) == 10
    assert sorted(pairs[pairs["descendant"] == "f"]["ancestor"]) == ["a", "b", "c"]
    assert set(pairs["descendant"]) == {"c", "d", "e", "f"}
    assert fa.ancestor_pairs(EDGES, nodes=["a"]).empty


def test_best_agent_and_ties() -> None:
    assert fa.best_agent(individuals())["agent_id"] == "f"
    tied = pd.DataFrame(
        {
            "experiment_id": ["x", "x", "x"],
            "generation": [2, 1, 1],
            "agent_id": ["p", "r", "q"],
            "operator": ["mutation", "crossover", "seed"],
            "fitness": [0.9, 0.9, 0.95],
        }
    )
    assert fa.best_agent(tied)["agent_id"] == "q"
    assert fa.best_agent(tied, bred_only=True)["agent_id"] == "r"  # earlier generation wins the tie
    with pytest.raises(InputError):
        fa.best_agent(tied, "nope")


def test_operator_success_counts_each_child_once() -> None:
    out = fa.operator_success(individuals()).set_index("operator")
    assert out.loc["crossover", "children"] == 2 and out.loc["crossover", "successes"] == 1
    assert out.loc["crossover", "success_rate"] == 0.5
    assert out.loc["crossover", "mean_gain"] == pytest.approx(((0.8 - 0.7) + (0.75 - 0.8)) / 2)
    assert out.loc["mutation", "children"] == 2 and out.loc["mutation", "successes"] == 1
    assert out.loc["mutation", "mean_gain"] == pytest.approx(0.0)
    bred = fa.with_parent_fitness(individuals()).set_index("agent_id")
    assert bred.loc["e", "parent_best"] == 0.8 and not bred.loc["e", "success"]
    assert bred.loc["f", "success"]


def test_fitness_by_generation_and_operator() -> None:
    # the population's best keeps a survivor's fitness (generation 1's own children peaked at 0.8 < 0.85)
    generations = pd.DataFrame(
        {
            "experiment_id": "exp",
            "generation": [2, 0, 1],
            "best_fitness": [0.9, 0.7, 0.85],
            "mean_fitness": [0.8, 0.6, 0.7],
        }
    )
    gen = fa.fitness_by_generation(generations, individuals())
    assert list(gen["generation"]) == [0, 1, 2]
    assert list(gen["best"]) == [0.7, 0.85, 0.9] and list(gen["mean"]) == [0.6, 0.7, 0.8]
    assert list(gen["evaluated"]) == [2, 2, 3]
    assert list(gen["evaluated_best"]) == [0.7, 0.8, 0.9] and list(gen["evaluated_worst"]) == [0.5, 0.4, 0.75]
    ops = fa.fitness_by_operator(individuals()).set_index("operator")
    assert ops["count"].to_dict() == {"crossover": 2, "mutation": 2, "seed": 2}
    assert ops["mean"].to_dict() == pytest.approx({"crossover": 0.775, "mutation": 0.65, "seed": 0.6})
    assert ops["best"].to_dict() == {"crossover": 0.8, "mutation": 0.9, "seed": 0.7}


def test_held_out_figures_per_generation_best_and_per_tested_agent() -> None:
    """Each generation's best (its first survivor) with the held-out figures its experiment's summary
    keeps; an agent never scored on test (or a failed test evaluation) has None, never a 0."""
    held = {
        "champion": "f",
        "agents": {
            "b": {"validation": 0.7, "train": 0.72, "test": 0.6, "test_low": 0.55, "test_high": 0.66, "gap": 0.12},
            "f": {"validation": 0.9, "train": 0.93, "test": 0.8, "test_low": 0.7, "test_high": 0.85, "gap": 0.13},
            "c": {"validation": 0.85, "train": 0.8, "test_unscored": ["judge failed"]},
        },
    }
    experiments = pd.DataFrame(
        {"experiment_id": ["exp", "running"], "summary": [{"held_out": held}, {}]},
    )
    generations = pd.DataFrame(
        {
            "experiment_id": ["exp", "exp", "exp", "running"],
            "generation": [0, 1, 2, 0],
            "survivors": [["b", "a"], ["c", "b"], ["f", "c"], ["x"]],
            "best_fitness": [0.7, 0.85, 0.9, 0.5],
            "mean_fitness": [0.6, 0.7, 0.8, 0.5],
        }
    )
    gen = fa.fitness_by_generation(generations, individuals(), experiments).set_index(["experiment_id", "generation"])
    assert list(gen.loc["exp", "best_agent"]) == ["b", "c", "f"]
    assert gen.loc[("exp", 0), "best_test_fitness"] == 0.6 and gen.loc[("exp", 2), "best_test_high"] == 0.85
    assert gen.loc[("exp", 2), "best_train_test_gap"] == 0.13 and gen.loc[("exp", 0), "best_train_fitness"] == 0.72
    assert gen.loc[("exp", 1), "best_train_fitness"] == 0.8 and pd.isna(gen.loc[("exp", 1), "best_test_fitness"])
    assert pd.isna(gen.loc[("running", 0), "best_train_fitness"])  # not finished: nothing scored on test yet
    agents = fa.held_out_agents(experiments).set_index("agent_id")
    assert list(agents.index) == ["b", "c", "f"] and list(agents["champion"]) == [False, False, True]
    assert agents.loc["f", ["fitness", "test_low", "test_fitness", "test_high"]].tolist() == [0.9, 0.7, 0.8, 0.85]
    assert pd.isna(agents.loc["c", "test_fitness"]) and agents.loc["c", "train_fitness"] == 0.8


def test_lineage_layout_ranks_within_first_generation() -> None:
    layout = fa.lineage_layout(individuals(), "exp").set_index("agent_id")
    assert layout[["x", "y"]].to_dict("index") == {
        "b": {"x": 0.0, "y": 0.0},
        "a": {"x": 0.0, "y": -1.0},
        "c": {"x": 1.0, "y": 0.0},
        "d": {"x": 1.0, "y": -1.0},
        "f": {"x": 2.0, "y": 0.0},
        "e": {"x": 2.0, "y": -1.0},
    }


def test_plot_lineage_draws_every_agent() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from furnace.analysis.plots import plot_lineage

    ax = plot_lineage(fa.lineage_layout(individuals(), "exp"), highlight={"f", "c", "a", "b"})
    dots = sum(len(c.get_offsets()) for c in ax.collections)
    assert dots == 6 + 4  # every agent, plus a ring around each highlighted one
    assert len(ax.lines) == 6  # one line per parent link of each first evaluation
    plt.close("all")


def test_all_lists_every_public_analysis_function() -> None:
    import inspect

    from furnace.analysis import distance, lineage, revisions, runs

    public = {
        name
        for module in (distance, lineage, revisions, runs)
        for name, obj in vars(module).items()
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_")
    }
    assert public - {"as_elixir"} == set(fa.__all__)


def test_a_failed_or_rejected_individual_has_no_score_to_rank() -> None:
    """A child a failure left unscored (its partial figure) and a reflected child rejected on its minibatch
    (stored 0, never evaluated on validation) are never the best agent, never a success, never a parent to
    beat, and stay out of the best and worst and the means; they are still counted."""
    frame = individuals().assign(failures=0, rejected=False)
    extra = pd.DataFrame(
        [
            ("exp", 2, "g", "mutation", ["a"], 0.99, 1, False),  # failed: its partial would top every ranking
            ("exp", 2, "h", "reflect", ["g"], 0.0, 0, True),  # rejected on its minibatch
            ("exp", 2, "i", "reflect", ["g"], 0.6, 0, False),  # its parent g has no score: 0.6 is a gain
        ],
        columns=[*frame.columns],
    )
    frame = pd.concat([frame, extra], ignore_index=True)
    assert list(fa.has_score(frame)) == [True] * 7 + [False, False, True]
    assert fa.best_agent(frame)["agent_id"] == "f"
    bred = fa.with_parent_fitness(frame).set_index("agent_id")
    assert not bred.loc["g", "success"] and not bred.loc["h", "success"] and pd.isna(bred.loc["h", "gain"])
    assert bred.loc["i", "parent_best"] == 0.0 and bred.loc["i", "success"]
    ops = fa.fitness_by_operator(frame).set_index("operator")
    assert ops.loc["reflect", "count"] == 2 and ops.loc["reflect", "mean"] == 0.6 and ops.loc["reflect", "best"] == 0.6
    assert ops.loc["mutation", "best"] == 0.9  # not g's 0.99
    generations = pd.DataFrame(
        {"experiment_id": "exp", "generation": [2], "best_fitness": [0.9], "mean_fitness": [0.8]}
    )
    gen = fa.fitness_by_generation(generations, frame).iloc[0]
    assert (gen["evaluated"], gen["evaluated_best"], gen["evaluated_worst"]) == (6, 0.9, 0.6)
    with pytest.raises(InputError, match="no scored individuals"):
        fa.best_agent(frame[frame["agent_id"].isin(["g", "h"])])
