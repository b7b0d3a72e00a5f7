"""furnace.analysis.revisions and .runs on hand-built frames (exact values)."""

from __future__ import annotations

import pandas as pd
import pytest

import furnace.analysis as fa
from furnace.domain.errors import InputError


def test_revision_chains_mark_rollbacks_and_word_change() -> None:
    versions = pd.DataFrame(
        {
            "content_id": ["x", "x", "x", "y"],
            "version": [1, 2, 3, 1],
            "word_count": [100, 90, 100, 50],
            "source": ["generate", "revise", "rollback", "generate"],
        }
    )
    out = fa.revision_chains(versions).set_index("content_id")
    assert out.loc["x"].to_dict() == {
        "versions": 3,
        "revisions": 1,
        "rollbacks": 1,
        "chain": "V1→V2→V3↺",
        "words_first": 100,
        "words_last": 100,
        "word_change": 0,
    }
    assert out.loc["y", "chain"] == "V1" and out.loc["y", "revisions"] == 0


def test_edit_sizes_use_difflib_ratio_over_title_and_body() -> None:
    revisions = pd.DataFrame(
        [
            {
                "revision_id": "r1",
                "content_id": "x",
                "from_version": 1,
                "to_version": 2,
                "suggestions": ["swap a letter", "keep it short"],
                "original_title": "T",
                "original_body": "abcd",
                "revised_title": "T",
                "revised_body": "abXd",
            }
        ]
    )
    row = fa.edit_sizes(revisions).iloc[0]
    assert row["suggestion"] == "swap a letter / keep it short"
    assert row["similarity"] == round(12 / 14, 6) and row["edit_size"] == round(1 - 12 / 14, 6)
    assert (row["chars_before"], row["chars_after"], row["char_delta"]) == (7, 7, 0)
    assert fa.similarity("", "") == 1.0 and fa.similarity("ab", "cd") == 0.0


def test_extracted_preferences_join_the_suggestion() -> None:
    processed = pd.DataFrame(
        {
            "revision_id": ["r1", "r2"],
            "persona_id": ["p", "p"],
            "preferences": [[{"dimension": "tone", "value": "lively", "weight": 0.6}], []],
        }
    )
    revisions = pd.DataFrame({"revision_id": ["r1", "r2"], "suggestions": [["make it livelier"], ["??"]]})
    out = fa.extracted_preferences(processed, revisions)
    assert out.to_dict("records") == [
        {
            "revision_id": "r1",
            "persona_id": "p",
            "dimension": "tone",
            "value": "lively",
            "weight": 0.6,
            "suggestion": "make it livelier",
        }
    ]


def test_preference_summary_counts_reinforcement_and_replacement() -> None:
    prefs = pd.DataFrame(
        [
            ("p", 2, "tone", "lively", 0.6, 1),
            ("p", 3, "tone", "lively", 0.7, 2),
            ("p", 3, "emoji", "more", 0.6, 1),
            ("p", 4, "tone", "formal", 0.6, 1),
            ("p", 4, "emoji", "more", 0.7, 2),
        ],
        columns=["persona_id", "version", "dimension", "value", "weight", "count"],
    )
    out = fa.preference_summary(prefs).set_index(["dimension", "value"])
    assert out.loc[("emoji", "more")].to_dict() == {
        "persona_id": "p",
        "first_version": 3,
        "last_version": 4,
        "count": 2,
        "reinforced": 1,
        "weight": 0.7,
        "current": True,
    }
    assert not out.loc[("tone", "lively"), "current"]  # replaced by "formal" in the latest version
    assert out.loc[("tone", "lively"), "reinforced"] == 1 and out.loc[("tone", "lively"), "last_version"] == 3
    assert out.loc[("tone", "formal"), "count"] == 1 and out.loc[("tone", "formal"), "current"]
    assert fa.preference_summary(prefs.iloc[0:0]).empty


RUNS = pd.DataFrame(
    {
        "run_id": ["r2", "r1", "r3"],
        "params.a": ["1", "1", "1"],
        "params.b": ["x", "y", "y"],
        "metrics.best_fitness": [0.7, 0.7, None],
    }
)


def test_differing_params_and_champion() -> None:
    configs = fa.differing_params(RUNS)
    assert list(configs.columns) == ["b"] and configs.loc["r1", "b"] == "y"
    assert fa.pick_champion(RUNS)["run_id"] == "r1"  # tie on fitness: the smaller run id
    with pytest.raises(InputError):
        fa.pick_champion(RUNS, "metrics.nope")
    with pytest.raises(InputError):
        fa.pick_champion(RUNS[RUNS["run_id"] == "r3"])


def test_curve_table_is_step_by_run() -> None:
    curves = pd.DataFrame(
        {"run_id": ["a", "a", "b"], "run_name": ["A", "A", "B"], "step": [0, 1, 0], "value": [0.1, 0.2, 0.3]}
    )
    table = fa.curve_table(curves)
    assert list(table.columns) == ["A", "B"] and table.loc[1, "A"] == 0.2 and pd.isna(table.loc[1, "B"])
