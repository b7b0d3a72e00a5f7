"""How far descendants drift from their ancestors: field changes and embedding distance.

Field distance counts :func:`furnace.domain.diff.diff_elixirs` changes (and names the
top-level fields touched); embedding distance is ``1 - cosine`` of the two
rendered prompts under the embedder passed in (``HashEmbedder`` offline, or the
real one from ``furnace.runtime.Runtime.embedder``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from furnace.domain.diff import diff_elixirs
from furnace.domain.elixir import Elixir
from furnace.domain.render import render_prompt
from furnace.fusion.embedding import Embedder, cosine

DRIFT_COLUMNS = ["descendant", "ancestor", "depth", "field_changes", "fields", "embedding_distance"]


def as_elixir(value: Elixir | Mapping[str, Any]) -> Elixir:
    """An Elixir from an Elixir or its JSON data (e.g. ``experiment_individuals.elixir``)."""
    return value if isinstance(value, Elixir) else Elixir.model_validate(dict(value))


def elixirs_from_individuals(individuals: pd.DataFrame) -> dict[str, Elixir]:
    """agent id → elixir, from the individuals' stored elixir JSON (earliest record wins)."""
    out: dict[str, Elixir] = {}
    for agent_id, data in individuals.sort_values("generation", kind="stable")[["agent_id", "elixir"]].itertuples(
        index=False
    ):
        if agent_id not in out and isinstance(data, Mapping) and data:
            out[agent_id] = as_elixir(data)
    return out


def field_distance(a: Elixir, b: Elixir) -> tuple[int, str]:
    """(number of field changes, comma-separated top-level fields touched) from ``a`` to ``b``."""
    changes = diff_elixirs(a, b)
    fields = sorted({c.field.split(".")[0] for c in changes})
    return len(changes), ",".join(fields)


def drift(
    pairs: pd.DataFrame,
    elixirs: Mapping[str, Elixir | Mapping[str, Any]],
    embedder: Embedder,
    *,
    text: Callable[[Elixir], str] = render_prompt,
) -> pd.DataFrame:
    """Field and embedding distance for each (descendant, ancestor, depth) row of ``pairs``.

    Pairs whose descendant or ancestor is missing from ``elixirs`` are skipped.
    All texts are embedded in one call.
    """
    known = {k: as_elixir(v) for k, v in elixirs.items()}
    usable = pairs[pairs["descendant"].isin(list(known)) & pairs["ancestor"].isin(list(known))]
    if usable.empty:
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    ids = sorted(set(usable["descendant"]) | set(usable["ancestor"]))
    vectors = dict(zip(ids, embedder.embed([text(known[i]) for i in ids]), strict=False))
    rows = []
    for desc, anc, depth in usable[["descendant", "ancestor", "depth"]].itertuples(index=False):
        count, fields = field_distance(known[anc], known[desc])
        rows.append([desc, anc, int(depth), count, fields, round(1.0 - cosine(vectors[desc], vectors[anc]), 6)])
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


def drift_by_depth(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean field changes and embedding distance per ancestry depth (does drift grow with distance?)."""
    out = frame.groupby("depth", sort=True).agg(
        pairs=("descendant", "size"),
        field_changes=("field_changes", "mean"),
        embedding_distance=("embedding_distance", "mean"),
    )
    return out.reset_index()
