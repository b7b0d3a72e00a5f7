# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lineage analysis
#
# The lineage DAG and the experiments from DuckDB, as pandas: the ancestry of the best bred agent, operator success rates (child fitter than its parents), fitness by generation and by operator, and how far descendants drift from their ancestors (field changes and embedding distance).
#
# Data: `$FURNACE_HOME` (or the repo's `data/`, e.g. after `make demo`) when it holds experiments; otherwise a small offline sample is built in a temporary home first (~20 s).

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

import furnace.analysis as fa
from furnace.storage.duckdb import analysis as q
from furnace.analysis.plots import use_cjk_font
from furnace.runtime import analysis_runtime

use_cjk_font()
pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", 60)
from furnace.analysis.plots import plot_lineage

rt = analysis_runtime("experiments")
settings = rt.settings
db = fa.connect(settings.home)  # Parquet snapshots: never blocks a running experiment
print("data from", settings.home)

# %% [markdown]
# ## The DAG and the experiments

# %%
edges = q.lineage_edges(db)
agents = q.agents(db)
individuals = q.individuals(db)
experiments = q.experiments(db)
print(
    f"{len(edges)} edges, {len(agents)} agents, {len(individuals)} evaluated individuals, "
    f"{len(experiments)} experiment(s)"
)
display(experiments[["experiment_id", "name", "model", "status"]])
display(edges.head(10))

# %% [markdown]
# ## Ancestry of the best bred agent
#
# The fittest agent the search *made* (a library seed can be the fittest overall, and has no ancestry to show). Its ancestry walks the lineage edges back to the library seeds: the first row(s) are its recorded parents, the deepest ones are seeds. How deep it goes depends on the run.

# %%
best = fa.best_agent(individuals, bred_only=True)
experiment_id = best["experiment_id"]
ancestry = fa.ancestry(edges, best["agent_id"])
parents_ok = set(ancestry.loc[ancestry["depth"] == 1, "id"]) == set(best["parents"])
roots = set(ancestry["id"]) - set(edges["child"])  # ancestors with no parent of their own
roots_are_seeds = bool(roots) and not any(r.startswith("agt-") for r in roots)
firsts = fa.first_records(individuals[individuals["experiment_id"] == experiment_id])
ancestry = ancestry.merge(firsts[["agent_id", "generation", "fitness"]], left_on="id", right_on="agent_id", how="left")
print(
    f"best: {best['agent_id']} ({best['operator']}, generation {best['generation']}, fitness {best['fitness']:.3f})"
    f" in {experiment_id}"
)
display(ancestry[["id", "depth", "via", "operator", "generation", "fitness"]])

# %%
layout = fa.lineage_layout(individuals, experiment_id)
plot_lineage(layout, highlight={best["agent_id"], *ancestry["id"]}, title=f"{experiment_id}: lineage DAG")
plt.show()

# %% [markdown]
# ## Operators: success rate and fitness

# %%
success = fa.operator_success(individuals)
by_operator = fa.fitness_by_operator(individuals)
display(success)
display(by_operator)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
success.plot.bar(
    x="operator",
    y="success_rate",
    ax=axes[0],
    legend=False,
    ylim=(0, 1),
    title="share of children fitter than their parents",
)
by_operator.plot.bar(x="operator", y=["mean", "best"], ax=axes[1], title="fitness by operator")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Fitness by generation
#
# `best` and `mean` are the population's (survivors included), the figures the report, MLflow and the app
# show; `best` is fitness on the **validation** probes, what selection used. `evaluated_best` is the best of
# the individuals evaluated in that generation alone (survivors are carried over without a new evaluation,
# so it can be lower).
#
# After the search every generation's best is scored on the held-out **test** probes (never seen by an
# operator or by selection): `best_test_fitness` with its 95% bootstrap interval (`best_test_low`,
# `best_test_high`) beside `best_train_fitness` (the probes the feedback came from), and the train–test gap
# — the same figures as the report, `experiment show`, the app and MLflow ([Methods](../docs/methods.md)).

# %%
by_generation = fa.fitness_by_generation(q.generations(db), individuals, experiments)
display(by_generation)
fig, ax = plt.subplots(figsize=(8, 3.5))
for exp, group in by_generation.groupby("experiment_id"):
    line = ax.plot(group["generation"], group["best"], marker="o", label=f"{exp} best (validation)")[0]
    ax.plot(group["generation"], group["mean"], linestyle="--", color=line.get_color(), label=f"{exp} mean")
    ax.plot(
        group["generation"],
        group["best_train_fitness"],
        linestyle=":",
        color=line.get_color(),
        label=f"{exp} best's train",
    )
    tested = group[group["best_test_fitness"].notna()]
    ax.errorbar(
        tested["generation"],
        tested["best_test_fitness"],
        yerr=[
            tested["best_test_fitness"] - tested["best_test_low"],
            tested["best_test_high"] - tested["best_test_fitness"],
        ],
        linestyle="-.",
        marker="s",
        capsize=3,
        color=line.get_color(),
        label=f"{exp} best's test [95%]",
    )
ax.set_xlabel("generation")
ax.set_ylabel("fitness")
ax.legend(fontsize="small")
plt.show()

# %% [markdown]
# Every agent scored on test (each generation's best, the leaderboard, the champion):

# %%
held_out = fa.held_out_agents(experiments)
display(held_out.sort_values(["experiment_id", "fitness"], ascending=[True, False]))

# %% [markdown]
# ## Drift of descendants from their ancestors
#
# Field changes count `diff_elixirs` differences; embedding distance is `1 - cosine` of the rendered prompts under the configured embedder (MiniLM when installed, the hash fallback otherwise).

# %%
from furnace.runtime import build_embedder

embedder = build_embedder(settings)  # no vector store: the notebook never opens the live database
elixirs = fa.elixirs_from_individuals(individuals)
pairs = fa.ancestor_pairs(edges, nodes=[a for a in elixirs if a.startswith("agt-")])
drift = fa.drift(pairs, elixirs, embedder)
print(f"embedder {embedder.name}: {len(drift)} descendant/ancestor pairs")
display(fa.drift_by_depth(drift))
display(drift.sort_values("embedding_distance", ascending=False).head(8))
fig, ax = plt.subplots(figsize=(6, 4))
points = ax.scatter(drift["field_changes"], drift["embedding_distance"], c=drift["depth"], cmap="viridis")
fig.colorbar(points, label="depth (generations apart)")
ax.set_xlabel("field changes")
ax.set_ylabel("embedding distance")
plt.show()

# %% [markdown]
# ## Model calls per run
#
# Model calls reached the model; cache hits were served from the response cache (the report's
# "800 model calls + 90 cache hits"). Calls outside a run (revision chat, arena, a fusion) have no run.

# %%
calls = q.call_totals(db)
per_run = calls.assign(run_id=calls["run_id"].replace("", "(outside a run)")).groupby("run_id")
display(per_run[["model_calls", "cached_calls", "prompt_tokens", "completion_tokens", "cost_usd"]].sum())
print(
    f"SUMMARY ancestry={len(ancestry)} parents_ok={int(parents_ok)} roots_are_seeds={int(roots_are_seeds)} "
    f"operators={len(success)} generations={len(by_generation)} "
    f"drift={len(drift)} calls={int(calls['model_calls'].sum()) if len(calls) else 0} "
    f"best_by_generation={','.join(f'{r.experiment_id}:{r.generation}:{r.best:.4f}' for r in by_generation.itertuples())} "
    f"held_out_by_generation={','.join(f'{r.experiment_id}:{r.generation}:{r.best_train_fitness:.4f}:{r.best_test_fitness:.4f}:{r.best_test_low:.4f}:{r.best_test_high:.4f}:{r.best_train_test_gap:.4f}' for r in by_generation.itertuples())} "
    f"tested={len(held_out)}"
)
