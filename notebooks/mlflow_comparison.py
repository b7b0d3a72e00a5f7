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
# # MLflow run comparison
#
# `mlflow.search_runs` across experiments, the configs that differ between runs, their fitness curves, the champion, and its prompt loaded back from MLflow's Prompt Registry (`prompts:/NAME@champion`).
#
# Data: the MLflow store of `$FURNACE_HOME` (or the repo's `data/`) when it has runs; otherwise an offline sample with two experiment configs. Browse the same runs with `mlflow ui --backend-store-uri sqlite:///…/mlflow.db`.

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
from furnace.adapters.mlflow_analysis import EXPERIMENT_TAG, fitness_curves, search_runs
from furnace.adapters.mlflow_prompts import CHAMPION, load_agent, register_agent_prompt, registered_name

rt = analysis_runtime("mlflow")
settings, store, db = rt.settings, rt.store, rt.analysis  # db: DuckDB SQL over the live store's snapshot
print("tracking URI", settings.tracking_uri)

# %% [markdown]
# ## Runs and their configs

# %%
runs = search_runs(settings.tracking_uri)
runs = runs[runs[EXPERIMENT_TAG].notna()] if EXPERIMENT_TAG in runs.columns else runs
shown = [
    "run_id",
    "tags.mlflow.runName",
    "status",
    "metrics.best_fitness",
    "metrics.mean_fitness",
    "metrics.champion_train_fitness",
    "metrics.champion_test_fitness",
    "metrics.champion_test_low",
    "metrics.champion_test_high",
    "metrics.champion_train_test_gap",
    "metrics.calls",
    "metrics.cache_hit_rate",
]
display(runs[[c for c in shown if c in runs.columns]])
configs = fa.differing_params(runs)
configs.index = runs.set_index("run_id")["tags.mlflow.runName"].reindex(configs.index)
display(configs)

# %% [markdown]
# ## Fitness curves
#
# `best_fitness` (validation, what selection used) and `mean_fitness` are logged per generation as the run goes;
# after the search, each generation's best's train fitness and held-out test fitness with its 95% interval are
# logged at the same steps (`best_train_fitness`, `best_test_fitness`, `best_test_low`, `best_test_high`,
# `best_train_test_gap`), and the champion's as `champion_*` (columns above).

# %%
uri, run_ids = settings.tracking_uri, list(runs["run_id"])
curves = fitness_curves(uri, run_ids)
table = fa.curve_table(curves)
display(table)
mean_curves = fa.curve_table(fitness_curves(uri, run_ids, "mean_fitness"))
held = {
    m: fa.curve_table(fitness_curves(uri, run_ids, f"best_{m}"))
    for m in ("train_fitness", "test_fitness", "test_low", "test_high")
}
display(pd.concat(held, axis=1))
fig, ax = plt.subplots(figsize=(8, 3.5))
for name in table.columns:
    line = ax.plot(table.index, table[name], marker="o", label=f"{name} best")[0]
    ax.plot(mean_curves.index, mean_curves[name], linestyle="--", color=line.get_color(), label=f"{name} mean")
    if name in held["test_fitness"].columns:
        test, low, high = (held[m][name] for m in ("test_fitness", "test_low", "test_high"))
        ax.errorbar(
            test.index,
            test,
            yerr=[test - low, high - test],
            linestyle="-.",
            marker="s",
            capsize=3,
            color=line.get_color(),
            label=f"{name} best's test [95%]",
        )
ax.set_xlabel("generation")
ax.set_ylabel("fitness")
ax.legend(fontsize="small")
plt.show()

# %% [markdown]
# ## The champion and its prompt
#
# The run with the best final `best_fitness` wins; its best bred agent (a library seed cannot be registered as an agent) is registered in the Prompt Registry (under the name it already has there, e.g. `furnace-demo-champion` after `make demo`, so an identical version is reused; else a new name) and the `champion` alias points at it. Loading `prompts:/NAME@champion` gives back the agent.

# %%
winner = fa.pick_champion(runs)
experiment_id = winner[EXPERIMENT_TAG]
agent_id = winner.get("tags.furnace.best_agent")
if not isinstance(agent_id, str) or not agent_id.startswith("agt-"):
    agent_id = fa.best_agent(q.individuals(db, experiment_id), bred_only=True)["agent_id"]
run_name, best = winner["tags.mlflow.runName"], winner["metrics.best_fitness"]
print(f"champion run {run_name} (best fitness {best:.3f}); agent {agent_id}")
name = registered_name(settings.tracking_uri, agent_id)  # its name if it has one (make demo registers its champion)
registered = register_agent_prompt(store, agent_id, tracking_uri=settings.tracking_uri, name=name, alias=CHAMPION)
print(registered.as_dict())

# %%
loaded = load_agent(store, f"prompts:/{registered.name}@{CHAMPION}", tracking_uri=settings.tracking_uri)
assert loaded.agent.id == agent_id
print(f"prompts:/{registered.name}@{CHAMPION} -> version {loaded.prompt.version} -> {loaded.agent.id}")
print("operator:", loaded.agent.lineage.operator, "| parents:", ", ".join(map(str, loaded.agent.lineage.parents)))
system, user = loaded.template
print(user)
print(system["content"][:600])
print(
    f"SUMMARY runs={len(runs)} curves={len(curves)} configs={configs.shape[1]} champion={loaded.agent.id} "
    f"test_curves={held['test_fitness'].notna().sum().sum()} prompt={registered.name}"
)
