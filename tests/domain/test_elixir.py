"""The elixir model: every validation limit, content_hash stability, immutability."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from furnace.domain import elixir as elixir_module
from furnace.domain.elixir import (
    MAX_FEW_SHOT_TEXT,
    MAX_FEW_SHOTS,
    MAX_IDENTITY,
    MAX_ITEM,
    MAX_LENGTH_LIMIT,
    MAX_LIST,
    MAX_NAME,
    MAX_PREFERENCES,
    MAX_STYLE_NOTES,
    Elixir,
    Tone,
    edit,
    parse_elixir,
    slugify,
)
from furnace.domain.errors import InputError
from furnace.resources import LIBRARY_DIR as ELIXIRS

BASE: dict[str, Any] = {
    "id": "ada",
    "name": "Ada",
    "identity": "A careful helper.",
    "expertise": ["python"],
    "principles": ["Answer precisely."],
}


def make(**changes: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        if value is _DROP:
            data.pop(key, None)
        else:
            data[key] = value
    return data


_DROP = object()


def rejects(data: Any, field: str | None, *fragments: str) -> InputError:
    with pytest.raises(InputError) as info:
        parse_elixir(data)
    err = info.value
    message = str(err)
    assert "\n" not in message
    if field is not None:
        assert err.field == field, message
        assert field in message
    for fragment in fragments:
        assert fragment in message, message
    return err


# --- validation --------------------------------------------------------------


@pytest.mark.parametrize("dim", Tone.DIMENSIONS)
@pytest.mark.parametrize("value", [1.7, -0.1, 1.0000001, float("nan"), float("inf")])
def test_tone_out_of_range(dim: str, value: float) -> None:
    rejects(make(tone={dim: value}), f"tone.{dim}", "must be between 0 and 1")


def test_tone_message_is_the_documented_one() -> None:
    err = rejects(make(tone={"humor": 1.7}), "tone.humor")
    assert str(err) == "invalid elixir: tone.humor must be between 0 and 1, got 1.7"


@pytest.mark.parametrize("value", [0, 1, 0.0, 1.0, 0.5])
def test_tone_bounds_inclusive(value: float) -> None:
    assert parse_elixir(make(tone={"empathy": value})).tone.empathy == value


@pytest.mark.parametrize("identity", ["", "   ", "\n\t"])
def test_empty_identity(identity: str) -> None:
    rejects(make(identity=identity), "identity", "must not be empty")


@pytest.mark.parametrize("field", ["identity", "expertise", "principles", "name"])
def test_missing_required(field: str) -> None:
    rejects(make(**{field: _DROP}), field, "is required")


def test_id_derived_from_name_when_missing() -> None:
    assert parse_elixir(make(id=_DROP, name="Terse Go Reviewer")).id == "terse-go-reviewer"
    assert parse_elixir(make(id=_DROP, name="小夏")).id.startswith("elixir-")


@pytest.mark.parametrize("field", ["expertise", "principles"])
def test_required_lists_need_one_item(field: str) -> None:
    rejects(make(**{field: []}), field, "needs at least 1 item")


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"tone": {"humor": "high"}}, "tone.humor", "must be a number, got str"),
        ({"tone": {"humor": True}}, "tone.humor", "must be a number, got bool"),
        ({"tone": [0.5]}, "tone", "must be a mapping"),
        ({"expertise": "python"}, "expertise", "must be a list, got str"),
        ({"principles": [1]}, "principles.0", "must be a string, got int"),
        ({"name": 5}, "name", "must be a string, got int"),
        ({"constraints": {"max_length": "ten"}}, "constraints.max_length", "must be an integer"),
        ({"constraints": {"max_length": 10.5}}, "constraints.max_length", "must be an integer"),
        ({"constraints": {"max_length": True}}, "constraints.max_length", "must be an integer"),
        ({"constraints": {"must_use_markdown": "yes"}}, "constraints.must_use_markdown", "true or false"),
        ({"priority": "5"}, "priority", "must be an integer"),
        ({"few_shots": "hello"}, "few_shots", "must be a list"),
        ({"few_shots": [{"input": "a"}]}, "few_shots.0.output", "is required"),
        (
            {"style_preferences": [{"dimension": "d", "value": "v", "weight": "heavy"}]},
            "style_preferences.0.weight",
            "must be a number",
        ),
        ({"colour": "red"}, "colour", "is not a known field"),
        ({"tone": {"warmth": 0.5}}, "tone.warmth", "is not a known field"),
    ],
)
def test_wrong_types(changes: dict[str, Any], field: str, fragment: str) -> None:
    rejects(make(**changes), field, fragment)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": "n" * (MAX_NAME + 1)}, "name"),
        ({"identity": "i" * (MAX_IDENTITY + 1)}, "identity"),
        ({"expertise": ["e" * (MAX_ITEM + 1)]}, "expertise.0"),
        ({"principles": ["p" * (MAX_ITEM + 1)]}, "principles.0"),
        ({"style_notes": "s" * (MAX_STYLE_NOTES + 1)}, "style_notes"),
        ({"few_shots": [{"input": "q" * (MAX_FEW_SHOT_TEXT + 1), "output": "a"}]}, "few_shots.0.input"),
        ({"constraints": {"forbidden_topics": ["t" * (MAX_ITEM + 1)]}}, "constraints.forbidden_topics.0"),
    ],
)
def test_oversized_text(changes: dict[str, Any], field: str) -> None:
    rejects(make(**changes), field, "is too long")


@pytest.mark.parametrize(
    ("changes", "field", "limit"),
    [
        ({"expertise": [f"e{i}" for i in range(MAX_LIST + 1)]}, "expertise", MAX_LIST),
        ({"principles": [f"p{i}" for i in range(MAX_LIST + 1)]}, "principles", MAX_LIST),
        ({"tools": [f"t{i}" for i in range(MAX_LIST + 1)]}, "tools", MAX_LIST),
        ({"conflicts_with": [f"c{i}" for i in range(MAX_LIST + 1)]}, "conflicts_with", MAX_LIST),
        (
            {"few_shots": [{"input": f"q{i}", "output": "a"} for i in range(MAX_FEW_SHOTS + 1)]},
            "few_shots",
            MAX_FEW_SHOTS,
        ),
        (
            {"style_preferences": [{"dimension": f"d{i}", "value": "v"} for i in range(MAX_PREFERENCES + 1)]},
            "style_preferences",
            MAX_PREFERENCES,
        ),
    ],
)
def test_oversized_lists(changes: dict[str, Any], field: str, limit: int) -> None:
    rejects(make(**changes), field, f"has too many items ({limit + 1}, at most {limit})")


def test_limits_are_inclusive() -> None:
    parse_elixir(
        make(
            name="n" * MAX_NAME,
            identity="i" * MAX_IDENTITY,
            expertise=[f"e{i}" for i in range(MAX_LIST)],
            style_notes="s" * MAX_STYLE_NOTES,
            constraints={"max_length": MAX_LENGTH_LIMIT},
        )
    )


@pytest.mark.parametrize("value", [0, -5, MAX_LENGTH_LIMIT + 1])
def test_max_length_range(value: int) -> None:
    rejects(make(constraints={"max_length": value}), "constraints.max_length")


def test_duplicate_few_shots() -> None:
    shots = [{"input": "Hi", "output": "Hello"}, {"input": "hi ", "output": "HELLO"}]
    rejects(make(few_shots=shots), "few_shots", "duplicate example")


@pytest.mark.parametrize(
    ("field", "items"),
    [("expertise", ["Go", "go"]), ("principles", ["Be brief.", "be brief."]), ("tools", ["grep", "grep"])],
)
def test_duplicate_list_entries(field: str, items: list[str]) -> None:
    rejects(make(**{field: items}), field, "duplicate")


@pytest.mark.parametrize("language", ["fr", "ZH", "", "chinese"])
def test_unknown_language(language: str) -> None:
    rejects(make(language=language), "language", "must be 'zh' or 'en'")


@pytest.mark.parametrize("other", ["ada", "Ada", " ADA ", unicodedata.normalize("NFD", "Ada")])
def test_conflicts_with_naming_itself(other: str) -> None:
    rejects(make(conflicts_with=["someone-else", other]), "conflicts_with", "names the elixir itself")


def test_conflicts_with_itself_by_name() -> None:
    rejects(
        make(id="x1", name="Café Critic", conflicts_with=[unicodedata.normalize("NFD", "café critic")]),
        "conflicts_with",
    )


@pytest.mark.parametrize("id", ["Bad Id", "-leading", "a" * 81, "ünïcode", "a/b"])
def test_bad_ids(id: str) -> None:
    rejects(make(id=id), "id", "must be lowercase")


@pytest.mark.parametrize("tool", ["bad tool", "1abc", "a;rm"])
def test_bad_tool_names(tool: str) -> None:
    rejects(make(tools=[tool]), "tools", "invalid tool name")


def test_priority_and_version_ranges() -> None:
    rejects(make(priority=-1), "priority", "greater than or equal to 0")
    rejects(make(priority=10_001), "priority")
    rejects(make(version=0), "version")


def test_not_a_mapping() -> None:
    for data in (None, [], "x", 3):
        with pytest.raises(InputError, match="must be a mapping"):
            parse_elixir(data)


def test_several_problems_in_one_line() -> None:
    err = rejects(make(identity="", tone={"humor": 2}), None)
    assert "identity must not be empty" in str(err) and "tone.humor must be between 0 and 1" in str(err)


def test_content_hash_in_input_is_ignored() -> None:
    e = parse_elixir(make(content_hash="0" * 64))
    assert e.content_hash != "0" * 64 and e.content_hash == parse_elixir(make()).content_hash


# --- content_hash ------------------------------------------------------------

RICH = make(
    tone={"formality": 0.3, "humor": 1, "conciseness": 0.25, "empathy": 0.9},
    few_shots=[{"input": "q", "output": "a"}],
    style_preferences=[{"dimension": "tone", "value": "lively", "weight": 0.7}],
    style_notes="Café notes",
)


def _hash(data: dict[str, Any]) -> str:
    return parse_elixir(data).content_hash


def test_hash_stable_across_processes(tmp_path: Path) -> None:
    script = (
        "import json, sys; from furnace.domain.elixir import parse_elixir; "
        "print(parse_elixir(json.load(sys.stdin)).content_hash)"
    )
    hashes = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script], input=json.dumps(RICH), capture_output=True, text=True, env=env, check=True
        )
        hashes.add(out.stdout.strip())
    assert hashes == {_hash(RICH)}


def test_hash_is_sha256_of_the_documented_canonical_form() -> None:
    """Pinned: changing the canonical form (and so every stored hash) must be deliberate."""
    expected = (
        '{"conflicts_with":[],"constraints":{"forbidden_topics":[],"max_length":null,"must_use_markdown":false},'
        '"expertise":["python"],"few_shots":[],"identity":"A careful helper.","language":"en","name":"Ada",'
        '"principles":["Answer precisely."],"priority":100,"style_notes":"","style_preferences":[],'
        '"tone":{"conciseness":0.5,"empathy":0.5,"formality":0.5,"humor":0.5},"tools":[]}'
    )
    assert _hash(BASE) == hashlib.sha256(expected.encode("utf-8")).hexdigest()


def test_hash_ignores_key_order() -> None:
    reordered = dict(reversed(list(RICH.items())))
    reordered["tone"] = dict(reversed(list(RICH["tone"].items())))
    assert _hash(reordered) == _hash(RICH)


@pytest.mark.parametrize(
    ("a", "b"),
    [(0.3, 0.1 + 0.2), (0.3, 0.30000000000000004), (1, 1.0), (0, 0.0), (0.7, 0.7000000000000001)],
)
def test_hash_normalises_floats(a: float, b: float) -> None:
    assert _hash(make(tone={"humor": a})) == _hash(make(tone={"humor": b}))


def test_hash_distinguishes_real_float_changes() -> None:
    assert _hash(make(tone={"humor": 0.3})) != _hash(make(tone={"humor": 0.31}))


@pytest.mark.parametrize("field", ["identity", "name", "style_notes"])
def test_hash_normalises_unicode(field: str) -> None:
    nfc = unicodedata.normalize("NFC", "Café – crème brûlée")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    assert _hash(make(**{field: nfc})) == _hash(make(**{field: nfd}))


def test_hash_normalises_unicode_in_lists_and_nested() -> None:
    nfc, nfd = "naïve", unicodedata.normalize("NFD", "naïve")
    a = make(expertise=[nfc], few_shots=[{"input": nfc, "output": nfc}], conflicts_with=[nfc])
    b = make(expertise=[nfd], few_shots=[{"input": nfd, "output": nfd}], conflicts_with=[nfd])
    assert _hash(a) == _hash(b)


def test_hash_ignores_non_content_fields() -> None:
    base = _hash(RICH)
    assert _hash({**RICH, "id": "other"}) == base
    assert _hash({**RICH, "version": 9}) == base
    assert _hash({**RICH, "created_at": "2020-01-01T00:00:00Z"}) == base
    assert _hash({**RICH, "deleted_at": "2021-01-01T00:00:00Z"}) == base


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "Ada 2"},
        {"identity": "A different helper."},
        {"expertise": ["python", "go"]},
        {"principles": ["Answer briefly."]},
        {"tone": {"humor": 0.9}},
        {"constraints": {"max_length": 100}},
        {"constraints": {"must_use_markdown": True}},
        {"few_shots": [{"input": "q", "output": "a"}]},
        {"tools": ["search"]},
        {"priority": 101},
        {"conflicts_with": ["other"]},
        {"style_notes": "x"},
        {"style_preferences": [{"dimension": "d", "value": "v"}]},
        {"language": "zh"},
    ],
)
def test_every_content_change_changes_the_hash(changes: dict[str, Any]) -> None:
    assert _hash(make(**changes)) != _hash(BASE)


def test_defaults_hash_like_explicit_defaults() -> None:
    explicit = make(
        tone={"formality": 0.5, "conciseness": 0.5, "humor": 0.5, "empathy": 0.5}, priority=100, language="en"
    )
    assert _hash(explicit) == _hash(BASE)


def test_whitespace_around_text_does_not_matter() -> None:
    assert _hash(make(identity="  A careful helper.\n")) == _hash(BASE)


# --- immutability and editing -------------------------------------------------


def test_frozen() -> None:
    e = parse_elixir(BASE)
    with pytest.raises(ValidationError, match="frozen"):
        e.identity = "changed"  # type: ignore[misc]


# Content hashes computed before list fields became tuples: the canonical JSON (tuples are
# written as arrays) and so every stored hash must stay exactly the same.
PINNED_HASHES = {
    "academic-editor.yaml": "bf18d965a3f43038b2cd69d58bb677c96fd65645fd4b9867b3b9b6945d1a918c",
    "classical-poetry-guide-zh.yaml": "28482250fa4bfb17274f19a208d2482a6fbc12fa11f967be0bd30a5442f52204",
    "data-science-mentor.yaml": "257f6090c3b1061a6fa70efd214ab5c2f0655d19d3a06a8c5b6d734c919493aa",
}


@pytest.mark.parametrize("name", sorted(PINNED_HASHES))
def test_shipped_elixir_hashes_are_unchanged(name: str) -> None:
    data = yaml.safe_load((ELIXIRS / name).read_text(encoding="utf-8"))
    assert parse_elixir(data).content_hash == PINNED_HASHES[name]


def test_every_list_field_hashes_as_before() -> None:
    data = make(
        **{k: v for k, v in RICH.items() if k not in BASE},
        tools=["search"],
        conflicts_with=["bob"],
        constraints={"forbidden_topics": ["x"]},
    )
    assert _hash(data) == "5818a97f16628ba53c8d41286973f800592333ea746393eb798c9045873c98b1"


LIST_FIELDS = ("expertise", "principles", "few_shots", "tools", "conflicts_with", "style_preferences")


@pytest.mark.parametrize("field", LIST_FIELDS)
def test_list_fields_are_tuples_and_cannot_be_mutated(field: str) -> None:
    e = parse_elixir(make(few_shots=RICH["few_shots"], style_preferences=RICH["style_preferences"]))
    before = e.content_hash
    value = getattr(e, field)
    assert isinstance(value, tuple)
    with pytest.raises(AttributeError):
        value.append(value[0] if value else "x")
    with pytest.raises(TypeError):
        value[0] = "changed"
    assert e.content_hash == before == Elixir.model_validate(e.model_dump()).content_hash


def test_constraint_topics_are_a_tuple_and_lists_are_still_accepted() -> None:
    e = parse_elixir(make(constraints={"forbidden_topics": ["politics"]}))
    assert e.constraints.forbidden_topics == ("politics",)
    with pytest.raises(AttributeError):
        e.constraints.forbidden_topics.append("x")  # type: ignore[attr-defined]
    assert e.model_dump(mode="json")["constraints"]["forbidden_topics"] == ["politics"]


def test_edit_revalidates_and_rehashes() -> None:
    e = parse_elixir(BASE)
    changed = edit(e, tone={"humor": 0.9})
    assert changed.content_hash != e.content_hash and changed.tone.humor == 0.9
    assert e.tone.humor == 0.5
    with pytest.raises(InputError, match="tone.humor"):
        edit(e, tone={"humor": 9})


def test_round_trip_through_json() -> None:
    e = parse_elixir(RICH)
    again = Elixir.model_validate_json(e.model_dump_json())
    assert again == e and again.content_hash == e.content_hash


def test_ref_and_slugify() -> None:
    e = parse_elixir(BASE)
    assert str(e.ref) == "ada@1" and e.ref.content_hash == e.content_hash
    assert slugify("Rigorous Academic Editor!") == "rigorous-academic-editor"
    assert slugify("小夏") == slugify(" 小夏 ")


def test_tone_dimensions_is_not_a_field() -> None:
    assert "DIMENSIONS" not in Tone.model_fields
    assert "DIMENSIONS" not in parse_elixir(BASE).content()["tone"]
    rejects(make(tone={"DIMENSIONS": ["x"]}), "tone.DIMENSIONS", "is not a known field")


def test_limits_documented_in_module() -> None:
    assert elixir_module.MAX_LIST == MAX_LIST


EXTENSIONS = {
    "card": {"data": {"name": "Ada", "tags": ["a", "b"], "book": {"entries": [{"keys": ["x"], "n": 1}]}}},
    "other": [1, 2.5, None, True],
}
# Computed before extensions became read-only: freezing changes no stored hash.
EXTENSIONS_HASH = "9062bf91f151a24dc36523622f925cd822eda85dd4c90563e32e7193c2346fba"


def test_extensions_hash_as_before_and_dump_as_plain_json() -> None:
    e = parse_elixir(make(extensions=EXTENSIONS))
    assert e.content_hash == EXTENSIONS_HASH
    dumped = e.model_dump()["extensions"]
    assert dumped == EXTENSIONS and type(dumped) is dict and type(dumped["card"]["data"]["tags"]) is list
    assert json.loads(e.model_dump_json())["extensions"] == EXTENSIONS
    assert json.loads(json.dumps(e.extensions)) == EXTENSIONS
    assert Elixir.model_validate(e.model_dump()).content_hash == EXTENSIONS_HASH


@pytest.mark.parametrize(
    "change",
    [
        lambda x: x.__setitem__("new", 1),
        lambda x: x.update(new=1),
        lambda x: x.pop("other"),
        lambda x: x.setdefault("new", 1),
        lambda x: x.clear(),
        lambda x: x["card"]["data"].__setitem__("name", "Eve"),
        lambda x: x["card"]["data"]["tags"].append("c"),
        lambda x: x["card"]["data"]["tags"].__setitem__(0, "z"),
        lambda x: x["card"]["data"]["book"]["entries"][0]["keys"].extend(["y"]),
        lambda x: x["other"].sort(key=str),
        lambda x: x["other"].__iadd__([3]),
    ],
)
def test_extensions_cannot_be_changed_at_any_depth(change) -> None:
    e = parse_elixir(make(extensions=EXTENSIONS))
    with pytest.raises(TypeError, match="read-only"):
        change(e.extensions)
    assert e.extensions == EXTENSIONS and e.content_hash == EXTENSIONS_HASH
    assert parse_elixir(e.model_dump()).content_hash == EXTENSIONS_HASH  # the cached hash is still the true one


def test_extensions_copies_are_editable_and_copies_of_the_elixir_stay_frozen() -> None:
    import copy

    e = parse_elixir(make(extensions=EXTENSIONS))
    mine = copy.deepcopy(e.extensions)
    mine["card"]["data"]["tags"].append("c")  # a deep copy is the caller's own
    assert e.extensions["card"]["data"]["tags"] == ["a", "b"]
    for other in (e.model_copy(deep=True), e.model_copy(update={"extensions": {"k": [1]}}), parse_elixir(BASE)):
        with pytest.raises(TypeError):
            other.extensions["new"] = 1
    assert e.model_copy(update={"extensions": {"k": [1]}}).content_hash != EXTENSIONS_HASH
    assert isinstance(e.extensions, dict) and isinstance(e.extensions["other"], list)  # interop's checks still hold
