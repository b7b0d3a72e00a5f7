"""Lineage and experiment analysis over DataFrames (pure pandas, no I/O).

Inputs are the frames of :mod:`furnace.storage.duckdb.analysis` (or any frame
with the same columns): ``edges`` (parent, child, operator, ...) and
``individuals`` (experiment_id, generation, agent_id, operator, parents,
fitness, ...). Hand-built frames work the same, which is how the tests use them.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from furnace.domain.errors import InputError
from furnace.evolution.report import HELD_OUT_FIELDS, held_out_columns

SEED_OPERATOR = "seed"


def ancestry(edges: pd.DataFrame, node: str, *, max_depth: int | None = None) -> pd.DataFrame:
    """The ancestors of ``node`` as rows (id, depth, via, operator), breadth first.

    Each ancestor keeps its shortest depth; ``via`` is the (smallest) descendant
    it was reached through and ``operator`` the operator of that edge — the same
    answer as :meth:`furnace.storage.store.ElixirStore.ancestors`.
    """
    by_child: dict[str, list[tuple[str, str]]] = {}
    for parent, child, op in edges[["parent", "child", "operator"]].itertuples(index=False):
        by_child.setdefault(child, []).append((parent, op))
    seen = {node}
    rows: list[dict[str, object]] = []
    frontier, depth = [node], 0
    while frontier and (max_depth is None or depth < max_depth):
        depth += 1
        found: dict[str, tuple[str, str]] = {}
        for child in sorted(frontier):
            for parent, op in sorted(by_child.get(child, [])):
                if parent not in seen and (parent not in found or (child, op) < found[parent]):
                    found[parent] = (child, op)
        for parent in sorted(found):
            seen.add(parent)
            rows.append({"id": parent, "depth": depth, "via": found[parent][0], "operator": found[parent][1]})
        frontier = list(found)
    return pd.DataFrame(rows, columns=["id", "depth", "via", "operator"])


def ancestor_pairs(edges: pd.DataFrame, nodes: Iterable[str] | None = None) -> pd.DataFrame:
    """Every (descendant, ancestor, depth) pair for ``nodes`` (default: every child in ``edges``)."""
    targets = sorted(set(edges["child"]) if nodes is None else set(nodes))
    frames = []
    for node in targets:
        anc = ancestry(edges, node)
        if not anc.empty:
            frames.append(pd.DataFrame({"descendant": node, "ancestor": anc["id"], "depth": anc["depth"]}))
    if not frames:
        return pd.DataFrame(columns=["descendant", "ancestor", "depth"])
    return pd.concat(frames, ignore_index=True)


def has_score(individuals: pd.DataFrame) -> pd.Series:
    """Per row, whether its fitness is a score: nothing failed (``failures`` 0) and not a reflected child that
    lost on its minibatch (``rejected``: never evaluated on validation, its stored 0 is no score):
    ``IndividualRecord.has_score`` over a frame, the rule every ranking reads. A frame without those columns
    (hand-built) is all scored."""
    keep = pd.Series(True, index=individuals.index)
    if "failures" in individuals.columns:
        keep &= individuals["failures"].fillna(0).astype(int) == 0
    if "rejected" in individuals.columns:
        keep &= ~individuals["rejected"].fillna(False).astype(bool)
    return keep


def _scores_only(individuals: pd.DataFrame) -> pd.DataFrame:
    """``individuals`` with the fitness of each row that has none (:func:`has_score`) as NaN: counted, and left
    out of every mean, best and worst."""
    return individuals.assign(fitness=individuals["fitness"].where(has_score(individuals)))


def first_records(individuals: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, agent): its earliest evaluation (a child bred again later is the same agent)."""
    ordered = individuals.sort_values(["experiment_id", "generation", "agent_id"], kind="stable")
    return ordered.drop_duplicates(["experiment_id", "agent_id"], keep="first").reset_index(drop=True)


def best_agent(individuals: pd.DataFrame, experiment_id: str | None = None, *, bred_only: bool = False) -> pd.Series:
    """The fittest :func:`has_score` individual (ties: earlier generation, then smaller agent id); ``bred_only``
    leaves out the seeds (library elixirs), e.g. to pick an agent for the prompt registry."""
    frame = individuals if experiment_id is None else individuals[individuals["experiment_id"] == experiment_id]
    if bred_only:
        frame = frame[frame["operator"] != SEED_OPERATOR]
    frame = frame[has_score(frame)]
    if frame.empty:
        raise InputError("no scored individuals to rank" + (f" in {experiment_id}" if experiment_id else ""))
    ranked = frame.sort_values(["fitness", "generation", "agent_id"], ascending=[False, True, True], kind="stable")
    return ranked.iloc[0]


def with_parent_fitness(individuals: pd.DataFrame) -> pd.DataFrame:
    """Bred individuals (not seeds) with ``parent_best`` (the fittest :func:`has_score` parent's fitness),
    ``gain`` (child minus that; none for a child without a score) and ``success`` (a scored child strictly
    fitter than every parent: a failed or rejected child is no success)."""
    firsts = first_records(individuals)
    scored = has_score(firsts)
    ranked = firsts[scored]
    fitness = {(e, a): f for e, a, f in ranked[["experiment_id", "agent_id", "fitness"]].itertuples(index=False)}
    bred = firsts[firsts["operator"] != SEED_OPERATOR].copy()
    bred["parent_best"] = [
        max((fitness.get((exp, p), 0.0) for p in parents), default=0.0)
        for exp, parents in bred[["experiment_id", "parents"]].itertuples(index=False)
    ]
    bred["gain"] = (bred["fitness"] - bred["parent_best"]).where(scored)  # aligned on the index bred kept
    bred["success"] = bred["gain"] > 0  # NaN (no score) is no success
    return bred.reset_index(drop=True)


def operator_success(individuals: pd.DataFrame) -> pd.DataFrame:
    """Per operator: children bred, successes (child fitter than its parents), success rate, mean gain."""
    bred = with_parent_fitness(individuals)
    cols = ["operator", "children", "successes", "success_rate", "mean_gain"]
    if bred.empty:
        return pd.DataFrame(columns=cols)
    out = bred.groupby("operator", sort=True).agg(
        children=("agent_id", "size"), successes=("success", "sum"), mean_gain=("gain", "mean")
    )
    out["success_rate"] = out["successes"] / out["children"]
    out["successes"] = out["successes"].astype(int)
    return out.reset_index()[cols]


def held_out_agents(experiments: pd.DataFrame) -> pd.DataFrame:
    """Every agent scored on the held-out test probes after its experiment's search (every generation's
    best, the leaderboard, the champion): its ``fitness`` (validation), train fitness, test fitness with
    its 95% interval and the train-test gap, as the report names them (``experiments`` is the
    ``experiments`` table; its summary keeps the figures). Empty for runs that have not finished."""
    cols = ["experiment_id", "agent_id", "fitness", *HELD_OUT_FIELDS, "champion"]
    rows = []
    for exp, summary in experiments[["experiment_id", "summary"]].itertuples(index=False):
        held = dict((summary or {}).get("held_out") or {})
        for agent, row in sorted(held.get("agents", {}).items()):
            figures = held_out_columns(row)
            rows.append(
                {
                    "experiment_id": exp,
                    "agent_id": agent,
                    "fitness": row.get("validation"),
                    **{k: figures.get(k) for k in HELD_OUT_FIELDS},
                    "champion": agent == held.get("champion"),
                }
            )
    return pd.DataFrame(rows, columns=cols)


def held_out_by_generation(generations: pd.DataFrame, experiments: pd.DataFrame) -> pd.DataFrame:
    """Per experiment and generation: the generation's best (its first survivor) and that agent's
    held-out figures (``best_train_fitness``, ``best_test_fitness`` with ``best_test_low``/``best_test_high``,
    ``best_train_test_gap``: None where it was not scored on test), as the report, `experiment show`,
    the app and MLflow show them."""
    tested = held_out_agents(experiments).set_index(["experiment_id", "agent_id"])
    cols = ["experiment_id", "generation", "best_agent", *(f"best_{k}" for k in HELD_OUT_FIELDS)]
    rows = []
    for exp, gen, survivors in generations[["experiment_id", "generation", "survivors"]].itertuples(index=False):
        best = survivors[0] if len(survivors) else None
        found = tested.loc[(exp, best)] if (exp, best) in tested.index else None
        figures = {f"best_{k}": (None if found is None or pd.isna(found[k]) else found[k]) for k in HELD_OUT_FIELDS}
        rows.append({"experiment_id": exp, "generation": gen, "best_agent": best, **figures})
    return pd.DataFrame(rows, columns=cols)


def fitness_by_generation(
    generations: pd.DataFrame, individuals: pd.DataFrame, experiments: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per experiment and generation: the population's best and mean fitness (survivors included, as the
    store, the report, MLflow and the app show them: ``generations`` is the ``experiment_generations``
    table) beside the individuals *evaluated* in that generation (survivors carried over unevaluated are
    not among them): their count, best and worst (of the :func:`has_score` ones). With ``experiments``, the best's
    held-out figures too (:func:`held_out_by_generation`)."""
    keys = ["experiment_id", "generation"]
    population = generations[keys + ["best_fitness", "mean_fitness"]].rename(
        columns={"best_fitness": "best", "mean_fitness": "mean"}
    )
    evaluated = (
        _scores_only(individuals)  # no score: out of best/worst
        .groupby(keys, sort=True)["fitness"]
        .agg(evaluated="size", evaluated_best="max", evaluated_worst="min")
    )
    out = population.merge(evaluated.reset_index(), on=keys, how="left")
    out["evaluated"] = out["evaluated"].fillna(0).astype(int)
    if experiments is not None:
        out = out.merge(held_out_by_generation(generations, experiments), on=keys, how="left")
    return out.sort_values(keys).reset_index(drop=True)


def fitness_by_operator(individuals: pd.DataFrame) -> pd.DataFrame:
    """Per operator (``seed`` = the initial population): count, mean and best fitness of first evaluations (the
    mean and best over :func:`has_score` ones: a failed or rejected child is counted, its figure is no score)."""
    out = (
        _scores_only(first_records(individuals))
        .groupby("operator", sort=True)["fitness"]
        .agg(count="size", mean="mean", best="max")
    )
    return out.reset_index()


def lineage_layout(individuals: pd.DataFrame, experiment_id: str) -> pd.DataFrame:
    """Plot positions for an experiment's DAG: x = first generation, y = rank within it (fittest on top)."""
    firsts = first_records(individuals[individuals["experiment_id"] == experiment_id])
    firsts = firsts.sort_values(["generation", "fitness", "agent_id"], ascending=[True, False, True])
    firsts["x"] = firsts["generation"].astype(float)
    firsts["y"] = -firsts.groupby("generation").cumcount().astype(float)
    return firsts[["agent_id", "generation", "operator", "fitness", "parents", "x", "y"]].reset_index(drop=True)
