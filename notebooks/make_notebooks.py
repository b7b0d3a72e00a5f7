"""Write the analysis notebooks (without outputs) from the cells below.

Run ``.venv/bin/python notebooks/make_notebooks.py`` after editing a cell; the
``.ipynb`` files are generated, so edit here rather than in Jupyter. The
notebooks hold analysis only: everything reusable is imported from
``furnace.analysis`` and the readers in ``furnace.adapters``; each notebook gets its data
through one :class:`furnace.runtime.Runtime` (``analysis_runtime``).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = """\
%matplotlib inline
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
"""

LINEAGE = [
    new_markdown_cell(
        "# Lineage analysis\n\n"
        "The lineage DAG and the experiments from DuckDB, as pandas: the ancestry of the best bred agent, "
        "operator success rates (child fitter than its parents), fitness by generation and by operator, "
        "and how far descendants drift from their ancestors (field changes and embedding distance).\n\n"
        "Data: `$FURNACE_HOME` (or the repo's `data/`, e.g. after `make demo`) when it holds experiments; "
        "otherwise a small offline sample is built in a temporary home first (~20 s)."
    ),
    new_code_cell(
        SETUP
        + """\
from furnace.analysis.plots import plot_lineage

rt = analysis_runtime("experiments")
settings = rt.settings
db = fa.connect(settings.home)  # Parquet snapshots: never blocks a running experiment
print("data from", settings.home)"""
    ),
    new_markdown_cell("## The DAG and the experiments"),
    new_code_cell("""\
edges = q.lineage_edges(db)
agents = q.agents(db)
individuals = q.individuals(db)
experiments = q.experiments(db)
print(f"{len(edges)} edges, {len(agents)} agents, {len(individuals)} evaluated individuals, "
      f"{len(experiments)} experiment(s)")
display(experiments[["experiment_id", "name", "model", "status"]])
display(edges.head(10))"""),
    new_markdown_cell(
        "## Ancestry of the best bred agent\n\n"
        "The fittest agent the search *made* (a library seed can be the fittest overall, and has no "
        "ancestry to show). Its ancestry walks the lineage edges back to the library seeds: the first "
        "row(s) are its recorded parents, the deepest ones are seeds. How deep it goes depends on the run."
    ),
    new_code_cell("""\
best = fa.best_agent(individuals, bred_only=True)
experiment_id = best["experiment_id"]
ancestry = fa.ancestry(edges, best["agent_id"])
parents_ok = set(ancestry.loc[ancestry["depth"] == 1, "id"]) == set(best["parents"])
roots = set(ancestry["id"]) - set(edges["child"])  # ancestors with no parent of their own
roots_are_seeds = bool(roots) and not any(r.startswith("agt-") for r in roots)
firsts = fa.first_records(individuals[individuals["experiment_id"] == experiment_id])
ancestry = ancestry.merge(firsts[["agent_id", "generation", "fitness"]], left_on="id", right_on="agent_id", how="left")
print(f"best: {best['agent_id']} ({best['operator']}, generation {best['generation']}, fitness {best['fitness']:.3f})"
      f" in {experiment_id}")
display(ancestry[["id", "depth", "via", "operator", "generation", "fitness"]])"""),
    new_code_cell("""\
layout = fa.lineage_layout(individuals, experiment_id)
plot_lineage(layout, highlight={best["agent_id"], *ancestry["id"]}, title=f"{experiment_id}: lineage DAG")
plt.show()"""),
    new_markdown_cell("## Operators: success rate and fitness"),
    new_code_cell("""\
success = fa.operator_success(individuals)
by_operator = fa.fitness_by_operator(individuals)
display(success)
display(by_operator)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
success.plot.bar(x="operator", y="success_rate", ax=axes[0], legend=False, ylim=(0, 1),
                 title="share of children fitter than their parents")
by_operator.plot.bar(x="operator", y=["mean", "best"], ax=axes[1], title="fitness by operator")
plt.tight_layout()
plt.show()"""),
    new_markdown_cell("## Fitness by generation"),
    new_code_cell("""\
by_generation = fa.fitness_by_generation(individuals)
display(by_generation)
fig, ax = plt.subplots(figsize=(8, 3.5))
for exp, group in by_generation.groupby("experiment_id"):
    ax.plot(group["generation"], group["best"], marker="o", label=f"{exp} best")
    ax.plot(group["generation"], group["mean"], linestyle="--", label=f"{exp} mean")
ax.set_xlabel("generation"); ax.set_ylabel("fitness"); ax.legend(fontsize="small")
plt.show()"""),
    new_markdown_cell(
        "## Drift of descendants from their ancestors\n\n"
        "Field changes count `diff_elixirs` differences; embedding distance is `1 - cosine` of the rendered "
        "prompts under the configured embedder (MiniLM when installed, the hash fallback otherwise)."
    ),
    new_code_cell("""\
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
ax.set_xlabel("field changes"); ax.set_ylabel("embedding distance")
plt.show()"""),
    new_markdown_cell("## Model calls per run"),
    new_code_cell("""\
calls = q.call_totals(db)
display(calls.groupby("run_id")[["calls", "cached_calls", "prompt_tokens", "completion_tokens", "cost_usd"]].sum())
print(f"SUMMARY ancestry={len(ancestry)} parents_ok={int(parents_ok)} roots_are_seeds={int(roots_are_seeds)} "
      f"operators={len(success)} generations={len(by_generation)} "
      f"drift={len(drift)} calls={int(calls['calls'].sum()) if len(calls) else 0}")"""),
]

REVISION = [
    new_markdown_cell(
        "# Revision analysis\n\n"
        "Revision chains per content item, the size of each edit (difflib similarity of the text before and "
        "after), which preferences each suggestion taught, and how often they were reinforced.\n\n"
        "Data: `$FURNACE_HOME` (or the repo's `data/`) when it holds revisions; otherwise an offline sample."
    ),
    new_code_cell(
        SETUP
        + """\
rt = analysis_runtime("revisions")
settings = rt.settings
db = fa.connect(settings.home)  # Parquet snapshots: never blocks a running experiment
print("data from", settings.home)"""
    ),
    new_markdown_cell("## Revision chains"),
    new_code_cell("""\
contents = q.contents(db)
versions = q.content_versions(db)
chains = fa.revision_chains(versions).merge(
    contents[["content_id", "persona_id", "topic", "language"]], on="content_id", how="left")
display(chains)
fig, ax = plt.subplots(figsize=(8, 3.5))
for content_id, group in versions.groupby("content_id"):
    topic = contents.set_index("content_id").loc[content_id, "topic"]
    ax.plot(group["version"], group["word_count"], marker="o", label=topic)
ax.set_xlabel("version"); ax.set_ylabel("words (zh: characters)"); ax.legend(fontsize="small")
ax.set_title("length along each revision chain")
plt.show()"""),
    new_markdown_cell("## Edit size per suggestion"),
    new_code_cell("""\
revisions = q.revisions(db)
edits = fa.edit_sizes(revisions)
display(edits[["revision_id", "suggestion", "similarity", "edit_size", "char_delta"]])
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.barh([s[:40] for s in edits["suggestion"]], edits["edit_size"])
ax.set_xlabel("edit size (1 - difflib ratio)")
ax.invert_yaxis()
plt.tight_layout()
plt.show()"""),
    new_markdown_cell("## Preferences learned, and how often they were reinforced"),
    new_code_cell("""\
processed = q.processed_revisions(db)
taught = fa.extracted_preferences(processed, revisions)
display(taught[["revision_id", "suggestion", "dimension", "value", "weight"]])
writers = set(contents["persona_id"])
preferences = q.persona_preferences(db)
preferences = preferences[preferences["persona_id"].isin(writers)]
summary = fa.preference_summary(preferences)
display(summary)"""),
    new_code_cell("""\
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
labels = summary["persona_id"] + ": " + summary["dimension"] + "=" + summary["value"]
axes[0].barh(labels, summary["count"])
axes[0].set_xlabel("times seen (1 + reinforcements)")
axes[0].invert_yaxis()
for (persona, dim, value), group in preferences.groupby(["persona_id", "dimension", "value"]):
    axes[1].plot(group["version"], group["weight"], marker="o", label=f"{persona[:16]} {dim}={value}")
axes[1].set_xlabel("persona version"); axes[1].set_ylabel("weight"); axes[1].legend(fontsize="x-small")
plt.tight_layout()
plt.show()
print(f"SUMMARY chains={len(chains)} edits={len(edits)} taught={len(taught)} preferences={len(summary)} "
      f"reinforced={int(summary['reinforced'].sum()) if len(summary) else 0}")"""),
]

MLFLOW = [
    new_markdown_cell(
        "# MLflow run comparison\n\n"
        "`mlflow.search_runs` across experiments, the configs that differ between runs, their fitness "
        "curves, the champion, and its prompt loaded back from MLflow's Prompt Registry "
        "(`prompts:/NAME@champion`).\n\n"
        "Data: the MLflow store of `$FURNACE_HOME` (or the repo's `data/`) when it has runs; otherwise an "
        "offline sample with two experiment configs. Browse the same runs with "
        "`mlflow ui --backend-store-uri sqlite:///…/mlflow.db`."
    ),
    new_code_cell(
        SETUP
        + """\
from furnace.adapters.mlflow_analysis import EXPERIMENT_TAG, fitness_curves, search_runs
from furnace.adapters.mlflow_prompts import CHAMPION, load_agent, register_agent_prompt

rt = analysis_runtime("mlflow")
settings, store, db = rt.settings, rt.store, rt.db
print("tracking URI", settings.tracking_uri)"""
    ),
    new_markdown_cell("## Runs and their configs"),
    new_code_cell("""\
runs = search_runs(settings.tracking_uri)
runs = runs[runs[EXPERIMENT_TAG].notna()] if EXPERIMENT_TAG in runs.columns else runs
shown = ["run_id", "tags.mlflow.runName", "status", "metrics.best_fitness", "metrics.mean_fitness",
         "metrics.calls", "metrics.cache_hit_rate"]
display(runs[[c for c in shown if c in runs.columns]])
configs = fa.differing_params(runs)
configs.index = runs.set_index("run_id")["tags.mlflow.runName"].reindex(configs.index)
display(configs)"""),
    new_markdown_cell("## Fitness curves"),
    new_code_cell("""\
curves = fitness_curves(settings.tracking_uri, list(runs["run_id"]))
table = fa.curve_table(curves)
display(table)
mean_curves = fa.curve_table(fitness_curves(settings.tracking_uri, list(runs["run_id"]), "mean_fitness"))
fig, ax = plt.subplots(figsize=(8, 3.5))
for name in table.columns:
    ax.plot(table.index, table[name], marker="o", label=f"{name} best")
    ax.plot(mean_curves.index, mean_curves[name], linestyle="--", label=f"{name} mean")
ax.set_xlabel("generation"); ax.set_ylabel("fitness"); ax.legend(fontsize="small")
plt.show()"""),
    new_markdown_cell(
        "## The champion and its prompt\n\n"
        "The run with the best final `best_fitness` wins; its best bred agent (a library seed cannot be "
        "registered as an agent) is registered in the Prompt Registry (an identical version is reused) and "
        "the `champion` alias points at it. Loading `prompts:/NAME@champion` gives back the agent."
    ),
    new_code_cell("""\
winner = fa.pick_champion(runs)
experiment_id = winner[EXPERIMENT_TAG]
agent_id = winner.get("tags.furnace.best_agent")
if not isinstance(agent_id, str) or not agent_id.startswith("agt-"):
    agent_id = fa.best_agent(q.individuals(db, experiment_id), bred_only=True)["agent_id"]
run_name, best = winner["tags.mlflow.runName"], winner["metrics.best_fitness"]
print(f"champion run {run_name} (best fitness {best:.3f}); agent {agent_id}")
registered = register_agent_prompt(store, agent_id, tracking_uri=settings.tracking_uri, alias=CHAMPION)
print(registered.as_dict())"""),
    new_code_cell("""\
loaded = load_agent(store, f"prompts:/{registered.name}@{CHAMPION}", tracking_uri=settings.tracking_uri)
assert loaded.agent.id == agent_id
print(f"prompts:/{registered.name}@{CHAMPION} -> version {loaded.prompt.version} -> {loaded.agent.id}")
print("operator:", loaded.agent.lineage.operator, "| parents:", ", ".join(map(str, loaded.agent.lineage.parents)))
system, user = loaded.template
print(user)
print(system["content"][:600])
print(f"SUMMARY runs={len(runs)} curves={len(curves)} configs={configs.shape[1]} champion={loaded.agent.id}")"""),
]

NOTEBOOKS = {"lineage_analysis.ipynb": LINEAGE, "revision_analysis.ipynb": REVISION, "mlflow_comparison.ipynb": MLFLOW}


def build(name: str) -> nbformat.NotebookNode:
    """One notebook, without outputs, with the venv's ``python3`` kernel."""
    nb = new_notebook(cells=NOTEBOOKS[name])
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating gives the same file
        cell.id = f"{Path(name).stem.replace('_', '-')}-{i:02d}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main() -> None:
    """Write every notebook next to this script."""
    for name in NOTEBOOKS:
        nbformat.write(build(name), HERE / name)
        print(f"wrote notebooks/{name}")


if __name__ == "__main__":
    main()
