"""Field-level diff between elixirs."""

from __future__ import annotations

from furnace.domain.diff import FieldChange, diff_elixirs, format_diff
from furnace.domain.elixir import edit, parse_elixir

BASE = parse_elixir(
    {
        "name": "Editor",
        "identity": "You are a rigorous editor.",
        "expertise": ["academic writing", "citations"],
        "principles": ["Cite sources.", "Prefer the active voice."],
        "tone": {"formality": 0.9, "humor": 0.1},
        "constraints": {"max_length": 800, "forbidden_topics": ["politics"]},
        "few_shots": [{"input": "Fix this.", "output": "Fixed."}],
    }
)


def test_identical_and_non_content_fields_give_no_changes() -> None:
    assert diff_elixirs(BASE, BASE) == []
    later = BASE.model_copy(update={"version": 4})
    assert diff_elixirs(BASE, later) == []
    assert format_diff([]) == "no differences"


def test_nested_scalar_fields_use_dotted_paths() -> None:
    other = edit(
        BASE, tone={"formality": 0.9, "humor": 0.6}, constraints={"max_length": None, "forbidden_topics": ["politics"]}
    )
    changes = diff_elixirs(BASE, other)
    assert FieldChange("tone.humor", 0.1, 0.6) in changes
    assert FieldChange("constraints.max_length", 800, None) in changes
    assert len(changes) == 2


def test_lists_report_added_and_removed_items() -> None:
    other = edit(
        BASE,
        expertise=["academic writing", "peer review"],
        principles=["Cite sources.", "Prefer the active voice.", "Flag hedging."],
        few_shots=[],
    )
    changes = diff_elixirs(BASE, other)
    assert FieldChange("expertise", "citations", None, "removed") in changes
    assert FieldChange("expertise", None, "peer review", "added") in changes
    assert FieldChange("principles", None, "Flag hedging.", "added") in changes
    assert FieldChange("few_shots", {"input": "Fix this.", "output": "Fixed."}, None, "removed") in changes
    assert len(changes) == 4


def test_reordered_list_is_one_change() -> None:
    other = edit(BASE, principles=["Prefer the active voice.", "Cite sources."])
    (change,) = diff_elixirs(BASE, other)
    assert change.kind == "reordered" and change.field == "principles"


def test_float_noise_below_canonical_precision_is_no_change() -> None:
    other = edit(BASE, tone={"formality": 0.9 + 1e-12, "humor": 0.1})
    assert diff_elixirs(BASE, other) == []


def test_format_diff_is_readable() -> None:
    other = edit(
        BASE, identity="你是一位严谨的编辑。", tone={"formality": 0.9, "humor": 0.6}, expertise=["academic writing"]
    )
    text = format_diff(diff_elixirs(BASE, other))
    assert text.splitlines() == [
        '~ identity: "You are a rigorous editor." → "你是一位严谨的编辑。"',
        '- expertise: "citations"',
        "~ tone.humor: 0.1 → 0.6",
    ]


def test_long_values_are_shortened_in_text_only() -> None:
    long_identity = "You are " + "very " * 60 + "careful."
    change = diff_elixirs(BASE, edit(BASE, identity=long_identity))[0]
    assert change.after == long_identity
    assert format_diff([change]).endswith("…")


def test_nested_lists_use_dotted_paths_too() -> None:
    other = edit(BASE, constraints={"max_length": 800, "forbidden_topics": ["politics", "medicine"]})
    assert diff_elixirs(BASE, other) == [FieldChange("constraints.forbidden_topics", None, "medicine", "added")]
    assert format_diff(diff_elixirs(other, BASE)) == '- constraints.forbidden_topics: "medicine"'
