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
# # Revision analysis
#
# Revision chains per content item, the size of each edit (difflib similarity of the text before and after), which preferences each suggestion taught, and how often they were reinforced.
#
# Data: `$FURNACE_HOME` (or the repo's `data/`) when it holds revisions; otherwise an offline sample.

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
rt = analysis_runtime("revisions")
settings = rt.settings
db = fa.connect(settings.home)  # Parquet snapshots: never blocks a running experiment
print("data from", settings.home)

# %% [markdown]
# ## Revision chains

# %%
contents = q.contents(db)
versions = q.content_versions(db)
chains = fa.revision_chains(versions).merge(
    contents[["content_id", "persona_id", "topic", "language"]], on="content_id", how="left"
)
display(chains)
fig, ax = plt.subplots(figsize=(8, 3.5))
for content_id, group in versions.groupby("content_id"):
    topic = contents.set_index("content_id").loc[content_id, "topic"]
    ax.plot(group["version"], group["word_count"], marker="o", label=topic)
ax.set_xlabel("version")
ax.set_ylabel("words (zh: characters)")
ax.legend(fontsize="small")
ax.set_title("length along each revision chain")
plt.show()

# %% [markdown]
# ## Edit size per suggestion

# %%
revisions = q.revisions(db)
edits = fa.edit_sizes(revisions)
display(edits[["revision_id", "suggestion", "similarity", "edit_size", "char_delta"]])
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.barh([s[:40] for s in edits["suggestion"]], edits["edit_size"])
ax.set_xlabel("edit size (1 - difflib ratio)")
ax.invert_yaxis()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Preferences learned, and how often they were reinforced

# %%
processed = q.processed_revisions(db)
taught = fa.extracted_preferences(processed, revisions)
display(taught[["revision_id", "suggestion", "dimension", "value", "weight"]])
writers = set(contents["persona_id"])
preferences = q.persona_preferences(db)
preferences = preferences[preferences["persona_id"].isin(writers)]
summary = fa.preference_summary(preferences)
display(summary)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
labels = summary["persona_id"] + ": " + summary["dimension"] + "=" + summary["value"]
axes[0].barh(labels, summary["count"])
axes[0].set_xlabel("times seen (1 + reinforcements)")
axes[0].invert_yaxis()
for (persona, dim, value), group in preferences.groupby(["persona_id", "dimension", "value"]):
    axes[1].plot(group["version"], group["weight"], marker="o", label=f"{persona[:16]} {dim}={value}")
axes[1].set_xlabel("persona version")
axes[1].set_ylabel("weight")
axes[1].legend(fontsize="x-small")
plt.tight_layout()
plt.show()
print(
    f"SUMMARY chains={len(chains)} edits={len(edits)} taught={len(taught)} preferences={len(summary)} "
    f"reinforced={int(summary['reinforced'].sum()) if len(summary) else 0}"
)
