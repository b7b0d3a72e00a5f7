"""The orjson canonical path and the typed elixir hash write exactly the bytes of the original path.

The oracle below is the canonical form as it was first implemented and as every stored hash was
computed: a recursive normalise, then ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)``. It is kept here verbatim so that a faster path can only land if it is equal.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from furnace.domain.canonical import canonical_json, content_key, normalise
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import InputError
from furnace.interop.importers import load_elixir_file
from furnace.interop.importers.corpus import read_corpus
from furnace.resources import LIBRARY_DIR

CORPUS = Path(__file__).resolve().parents[2] / "data" / "corpus" / "awesome-chatgpt-prompts.csv"


def _oracle_float(value: float) -> float | int:
    if math.isnan(value) or math.isinf(value):
        raise ValueError("non-finite float has no canonical form")
    rounded = round(value, 9)
    if rounded == int(rounded) and abs(rounded) < 2**53:
        return int(rounded)
    return float(repr(rounded))


def _oracle_normalise(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _oracle_float(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[unicodedata.normalize("NFC", str(k))] = _oracle_normalise(v)
        if len(out) != len(value):
            raise ValueError("two keys are the same after normalisation")
        return out
    if isinstance(value, (list, tuple)):
        return [_oracle_normalise(v) for v in value]
    raise TypeError(f"cannot canonicalise {type(value).__name__}")


def oracle_json(value: Any) -> str:
    return json.dumps(_oracle_normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def oracle_key(value: Any) -> str:
    return hashlib.sha256(oracle_json(value).encode("utf-8")).hexdigest()


def assert_same(value: Any) -> None:
    assert canonical_json(value) == oracle_json(value)
    assert content_key(value) == oracle_key(value)
    assert normalise(value) == _oracle_normalise(value)


def assert_same_hash(elixir: Elixir) -> None:
    expected = oracle_key(elixir.content())
    assert elixir.compute_content_hash() == expected
    assert content_key(elixir.content()) == expected


# --- plain JSON values ---------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=-1e-3, max_value=1e-3)  # the range where orjson and repr spell floats differently
    | st.text()
    | st.text(st.characters(codec="utf-8"), max_size=8).map(lambda s: unicodedata.normalize("NFD", s))
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=40,
)


# Example counts: each run draws new examples (no fixed seed), so the runs of every commit add up. Nearly all of
# a run's CPU is Hypothesis drawing the nested values (~30 ms an elixir), not the check: 200 values and 100
# elixirs (Hypothesis's default) a run.
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_random_values_write_the_oracle_bytes(value: Any) -> None:
    try:
        expected = oracle_json(value)
    except ValueError:  # keys colliding after NFC
        with pytest.raises(ValueError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected
    assert content_key(value) == oracle_key(value)


def test_every_code_point_is_escaped_as_before() -> None:
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    assert_same(every)
    assert_same({every[i : i + 97]: i for i in range(0, len(every), 97)})  # key order over every code point


def test_floats_in_every_magnitude_are_spelled_as_before() -> None:
    values = [m * 10.0**e for e in range(-12, 30) for m in (1, -1, 1.5, 9.999999999, 2.0000000001, 1 / 3)]
    values += [2.0**52 + 0.5, 2.0**53, 2.0**53 + 2, -(2.0**60), 5e-10, 4.9999999e-10, 1e-4, 9.9999e-5, -0.0]
    rng = __import__("random").Random(7)
    for _ in range(20000):
        raw = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if math.isfinite(raw):
            values.append(raw)
    assert_same(values)
    for value in values:
        assert canonical_json(value) == oracle_json(value)


@pytest.mark.parametrize(
    "value",
    [
        2**64,  # beyond orjson's integers: written by json.dumps
        -(2**63) - 1,
        {
            "deep": [
                [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            [
                                                                                                                                                                                                                [
                                                                                                                                                                                                                    [
                                                                                                                                                                                                                        [
                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                        1
                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                ]
                                                                                                                                                                                                            ]
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ]
            ]
        },
        __import__("functools").reduce(lambda acc, _: [acc], range(300), 0),  # deeper than orjson writes
        {1: "int key", "b": 2},
        {True: 1},
        [__import__("enum").IntEnum("E", "A B").B, type("S", (str,), {})("sub"), type("F", (float,), {})(0.25)],
    ],
)
def test_edge_values_are_written_as_before(value: Any) -> None:
    assert_same(value)


def test_lone_surrogate_fails_as_before() -> None:
    assert canonical_json("\ud800") == oracle_json("\ud800")
    with pytest.raises(UnicodeEncodeError):
        content_key("\ud800")


# --- elixirs ---------------------------------------------------------------------------


def test_shipped_elixirs_hash_as_before() -> None:
    elixirs = [e for p in sorted(LIBRARY_DIR.glob("*.yaml")) for e in load_elixir_file(p)]
    assert len(elixirs) >= 10
    for elixir in elixirs:
        assert_same_hash(elixir)


def test_corpus_elixirs_hash_as_before() -> None:
    result = read_corpus(CORPUS.read_text(encoding="utf-8"), name=CORPUS.name)
    assert len(result.elixirs) > 100
    for _, elixir in result.elixirs:
        assert_same_hash(elixir)


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
nfd_words = words.map(lambda s: unicodedata.normalize("NFD", s))
any_words = words | nfd_words | st.sampled_from(["naïve", "Café", "北京", "e\u0301", "\u212b", "x\n\ty"])
unit = st.floats(0, 1) | st.sampled_from([0, 1, 0.5, 1e-5, 3e-7, 0.30000000000000004, 1.0])


@st.composite
def elixir_data(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "name": draw(any_words.filter(lambda s: s.strip())),
        "id": draw(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)),
        "language": draw(st.sampled_from(["en", "zh"])),
        "identity": draw(any_words.filter(lambda s: s.strip())),
        "expertise": draw(st.lists(any_words, min_size=1, max_size=4)),
        "principles": draw(st.lists(any_words, min_size=1, max_size=4)),
        "tone": draw(st.dictionaries(st.sampled_from(["formality", "conciseness", "humor", "empathy"]), unit)),
        "constraints": {
            "max_length": draw(st.none() | st.integers(1, 100_000)),
            "forbidden_topics": draw(st.lists(any_words, max_size=3)),
            "must_use_markdown": draw(st.booleans()),
        },
        "few_shots": draw(st.lists(st.fixed_dictionaries({"input": any_words, "output": any_words}), max_size=3)),
        "tools": draw(st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:-]{0,10}", fullmatch=True), max_size=3)),
        "priority": draw(st.integers(0, 10_000)),
        "conflicts_with": draw(st.lists(any_words, max_size=3)),  # not normalised by validation
        "style_notes": draw(any_words | st.just("")),
        "style_preferences": draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "dimension": any_words,
                        "value": any_words,
                        "evidence": any_words | st.just(""),
                        "source_revision": st.none() | any_words,  # not normalised by validation
                        "weight": unit,
                        "count": st.integers(1, 2**70),  # beyond 64 bits: the fallback
                    }
                ),
                max_size=3,
            )
        ),
        "extensions": draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3)),
    }


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(elixir_data())
def test_random_elixirs_hash_as_before(data: dict[str, Any]) -> None:
    try:
        elixir = parse_elixir(data)
    except InputError:
        assume(False)
        return
    assert_same_hash(elixir)
    assert elixir.content_hash == elixir.compute_content_hash()
