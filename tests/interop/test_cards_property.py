"""Property: any valid elixir survives furnace → card (V2, V3, PNG) → furnace with the same content_hash."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import InputError
from furnace.interop.cards import card_for, elixir_from_card, export_card_png, read_card_bytes

# Fragments chosen to collide with the card text formats (bullets, speakers, <START>, macros, paragraphs).
TOKENS = [
    "word",
    "Ünïcode",
    "茶馆",
    "。",
    ".",
    " ",
    "\n",
    "\n\n",
    "- ",
    "* ",
    "1. ",
    "{{user}}:",
    "{{char}}: ",
    "<START>",
    "<bot>",
    "<USER>",
    "  ",
    ":",
    "…",
    "You are",
    "!",
]
text = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=12).map("".join)


@st.composite
def elixirs(draw: st.DrawFn) -> Elixir:
    data = {
        "name": draw(text),
        "language": draw(st.sampled_from(["en", "zh"])),
        "identity": draw(text),
        "expertise": draw(st.lists(text, min_size=1, max_size=4)),
        "principles": draw(st.lists(text, min_size=1, max_size=4)),
        "few_shots": [{"input": i, "output": o} for i, o in draw(st.lists(st.tuples(text, text), max_size=3))],
        "tone": {"humor": draw(st.floats(0, 1)), "empathy": draw(st.sampled_from([0, 0.25, 1]))},
        "style_notes": draw(text),
    }
    try:
        return parse_elixir(data)
    except InputError:
        assume(False)
        raise


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(elixirs(), st.sampled_from(["v2", "v3"]))
def test_any_elixir_round_trips_through_a_card(elixir: Elixir, spec: str) -> None:
    assert elixir_from_card(card_for(elixir, spec)).elixir.content_hash == elixir.content_hash  # type: ignore[arg-type]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(elixirs())
def test_any_elixir_round_trips_through_a_png(elixir: Elixir) -> None:
    assert read_card_bytes(export_card_png(elixir)).elixir.content_hash == elixir.content_hash


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), text)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "x_y"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def foreign_cards(draw: st.DrawFn) -> dict:
    spec = draw(st.sampled_from(["chara_card_v2", "chara_card_v3"]))
    data = {
        key: draw(text)
        for key in (
            "description",
            "personality",
            "scenario",
            "first_mes",
            "mes_example",
            "system_prompt",
            "creator_notes",
        )
    }
    data["name"] = draw(text.filter(lambda t: t.strip()))
    data["tags"] = draw(st.lists(text, max_size=5))
    data["alternate_greetings"] = draw(st.lists(text, max_size=2))
    data["extensions"] = draw(
        st.dictionaries(st.sampled_from(["depth_prompt", "some_tool", "fav"]), json_value, max_size=3)
    )
    if draw(st.booleans()):
        data["character_book"] = {
            "entries": [
                {
                    "keys": draw(st.lists(text, max_size=2)),
                    "content": draw(text),
                    "extensions": {},
                    "enabled": True,
                    "insertion_order": 1,
                }
            ]
        }
    if spec == "chara_card_v3":
        data["group_only_greetings"] = draw(st.lists(text, max_size=2))
    return {"spec": spec, "spec_version": "3.0" if spec.endswith("v3") else "2.0", "data": data}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(foreign_cards())
def test_any_foreign_card_keeps_every_field(original: dict) -> None:
    import copy

    imported = elixir_from_card(copy.deepcopy(original)).elixir
    spec = "v3" if original["spec"].endswith("v3") else "v2"
    exported = card_for(imported, spec)  # type: ignore[arg-type]
    assert elixir_from_card(exported).elixir.content_hash == imported.content_hash
    exported["data"]["extensions"].pop("furnace")
    assert exported == original
