"""furnace.analysis.distance: drift as field and embedding distance (exact values)."""

from __future__ import annotations

import pandas as pd
import pytest

import furnace.analysis as fa
from furnace.domain.elixir import Elixir, edit
from furnace.domain.render import render_prompt
from furnace.fusion.embedding import HashEmbedder, cosine

BASE = Elixir(
    id="base", name="Base", identity="A careful editor.", expertise=["editing"], principles=["Cut every needless word."]
)
CHILD = edit(
    BASE,
    tone={"formality": 0.5, "conciseness": 0.5, "humor": 0.9, "empathy": 0.5},
    principles=["Cut every needless word.", "Prefer the active voice."],
)


def test_field_distance_counts_changes_and_names_fields() -> None:
    assert fa.field_distance(BASE, CHILD) == (2, "principles,tone")
    assert fa.field_distance(BASE, BASE) == (0, "")


def test_drift_rows_skip_unknown_ids_and_measure_embedding_distance() -> None:
    pairs = pd.DataFrame(
        {"descendant": ["child", "same", "ghost"], "ancestor": ["base", "base", "base"], "depth": [1, 2, 1]}
    )
    same = BASE.model_copy(update={"id": "same"})
    emb = HashEmbedder()
    out = fa.drift(pairs, {"base": BASE, "child": CHILD.model_dump(mode="json"), "same": same}, emb)
    assert list(out["descendant"]) == ["child", "same"]
    a, b = emb.embed([render_prompt(CHILD), render_prompt(BASE)])
    row = out.iloc[0]
    assert row["field_changes"] == 2 and row["fields"] == "principles,tone"
    assert row["embedding_distance"] == pytest.approx(round(1 - cosine(a, b), 6)) and row["embedding_distance"] > 0
    assert out.iloc[1]["field_changes"] == 0 and out.iloc[1]["embedding_distance"] == pytest.approx(0.0, abs=1e-9)
    by_depth = fa.drift_by_depth(out)
    assert list(by_depth["depth"]) == [1, 2] and list(by_depth["field_changes"]) == [2, 0]


def test_drift_of_nothing_known_is_an_empty_frame() -> None:
    pairs = pd.DataFrame({"descendant": ["x"], "ancestor": ["y"], "depth": [1]})
    assert fa.drift(pairs, {}, HashEmbedder()).empty


def test_elixirs_from_individuals_keeps_the_earliest_record() -> None:
    frame = pd.DataFrame(
        {
            "agent_id": ["base", "base", "empty"],
            "generation": [1, 0, 0],
            "elixir": [CHILD.model_dump(mode="json"), BASE.model_dump(mode="json"), {}],
        }
    )
    found = fa.elixirs_from_individuals(frame)
    assert list(found) == ["base"] and found["base"].content_hash == BASE.content_hash
