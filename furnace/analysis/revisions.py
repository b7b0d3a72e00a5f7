"""Revision and preference analysis over DataFrames (pure pandas, no I/O).

Inputs are the frames of :mod:`furnace.storage.duckdb.analysis`:
``content_versions`` (content_id, version, word_count, source, ...),
``revisions`` (revision_id, suggestions, original_/revised_ title and body),
``processed_revisions`` and ``persona_preferences``.
"""

from __future__ import annotations

import difflib

import pandas as pd

CHAIN_COLUMNS = [
    "content_id",
    "versions",
    "revisions",
    "rollbacks",
    "chain",
    "words_first",
    "words_last",
    "word_change",
]
EDIT_COLUMNS = [
    "revision_id",
    "content_id",
    "from_version",
    "to_version",
    "suggestion",
    "similarity",
    "edit_size",
    "chars_before",
    "chars_after",
    "char_delta",
]
SUMMARY_COLUMNS = [
    "persona_id",
    "dimension",
    "value",
    "first_version",
    "last_version",
    "count",
    "reinforced",
    "weight",
    "current",
]


def _text(title: str, body: str) -> str:
    return f"{title}\n\n{body}"


def similarity(before: str, after: str) -> float:
    """difflib's ratio of two texts in [0, 1] (1 = identical), without the autojunk heuristic."""
    return difflib.SequenceMatcher(None, before, after, autojunk=False).ratio()


def revision_chains(versions: pd.DataFrame) -> pd.DataFrame:
    """Per content item: version count, revisions, rollbacks, the chain ``V1→V2→…`` and word counts."""
    rows = []
    for content_id, group in versions.sort_values(["content_id", "version"]).groupby("content_id", sort=True):
        marks = {"revise": "", "generate": "", "rollback": "↺"}
        chain = "→".join(f"V{v}{marks.get(s, '')}" for v, s in group[["version", "source"]].itertuples(index=False))
        first, last = int(group["word_count"].iloc[0]), int(group["word_count"].iloc[-1])
        rows.append(
            [
                content_id,
                len(group),
                int((group["source"] == "revise").sum()),
                int((group["source"] == "rollback").sum()),
                chain,
                first,
                last,
                last - first,
            ]
        )
    return pd.DataFrame(rows, columns=CHAIN_COLUMNS)


def edit_sizes(revisions: pd.DataFrame) -> pd.DataFrame:
    """Per revision: its suggestion(s), difflib similarity of before/after (title + body), edit size
    (``1 - similarity``) and the change in characters."""
    rows = []
    for r in revisions.itertuples(index=False):
        before, after = _text(r.original_title, r.original_body), _text(r.revised_title, r.revised_body)
        ratio = similarity(before, after)
        suggestions = r.suggestions if isinstance(r.suggestions, (list, tuple)) else [str(r.suggestions)]
        rows.append(
            [
                r.revision_id,
                r.content_id,
                int(r.from_version),
                int(r.to_version),
                " / ".join(suggestions),
                round(ratio, 6),
                round(1.0 - ratio, 6),
                len(before),
                len(after),
                len(after) - len(before),
            ]
        )
    return pd.DataFrame(rows, columns=EDIT_COLUMNS)


def extracted_preferences(processed: pd.DataFrame, revisions: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per preference extracted from a revision (revision_id, dimension, value, weight),
    with the revision's suggestion when ``revisions`` is given."""
    rows = []
    for r in processed.itertuples(index=False):
        for p in r.preferences or []:
            rows.append([r.revision_id, r.persona_id, p.get("dimension"), p.get("value"), p.get("weight")])
    out = pd.DataFrame(rows, columns=["revision_id", "persona_id", "dimension", "value", "weight"])
    if revisions is not None and not out.empty:
        sugg = revisions[["revision_id", "suggestions"]].copy()
        sugg["suggestion"] = [" / ".join(s) if isinstance(s, (list, tuple)) else str(s) for s in sugg["suggestions"]]
        out = out.merge(sugg[["revision_id", "suggestion"]], on="revision_id", how="left")
    return out


def preference_summary(preferences: pd.DataFrame) -> pd.DataFrame:
    """Per persona, dimension and value: the persona versions where it was held, how often it was
    seen (``count``; ``reinforced = count - 1``), its latest weight, and whether the latest version
    of the persona still holds it (a different value for the same dimension replaces it)."""
    if preferences.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    latest = preferences.groupby("persona_id")["version"].max().to_dict()
    rows = []
    ordered = preferences.sort_values(["persona_id", "dimension", "value", "version"])
    for (persona, dim, value), group in ordered.groupby(["persona_id", "dimension", "value"], sort=True):
        last = group.iloc[-1]
        count = int(group["count"].max())
        rows.append(
            [
                persona,
                dim,
                value,
                int(group["version"].iloc[0]),
                int(last["version"]),
                count,
                count - 1,
                float(last["weight"]),
                bool(int(last["version"]) == latest[persona]),
            ]
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
