"""Canonical JSON: the form every furnace hash is computed over."""

from __future__ import annotations

import hashlib
import math
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from furnace.domain.canonical import canonical_json, content_key, normalise, sha256_hex


def test_sorted_keys_no_whitespace_utf8() -> None:
    assert (
        canonical_json({"b": 1, "a": [1, 2], "c": {"z": "é", "y": None}}) == '{"a":[1,2],"b":1,"c":{"y":null,"z":"é"}}'
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [(0.1 + 0.2, 0.3), (1.0, 1), (-0.0, 0), (2.5e-10, 0), (1e20, 100000000000000000000.0), (0.30000000000000004, 0.3)],
)
def test_floats_normalised(a: float, b: float) -> None:
    assert canonical_json(a) == canonical_json(b)


def test_integral_floats_written_as_integers() -> None:
    assert canonical_json([1.0, 2.50, -3.0]) == "[1,2.5,-3]"


def test_bool_is_not_int() -> None:
    assert canonical_json(True) == "true" and canonical_json(1) == "1"
    assert content_key({"x": True}) != content_key({"x": 1})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_rejected(value: float) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        canonical_json({"x": value})


def test_unicode_nfc_in_values_and_keys() -> None:
    nfd = unicodedata.normalize("NFD", "crème")
    assert canonical_json({nfd: [nfd]}) == canonical_json({"crème": ["crème"]})


def test_tuples_are_lists() -> None:
    assert canonical_json((1, (2, 3))) == canonical_json([1, [2, 3]])


def test_unsupported_types_raise_type_error() -> None:
    with pytest.raises(TypeError, match="cannot canonicalise set"):
        canonical_json({1, 2})


def test_sha256() -> None:
    assert sha256_hex("abc") == hashlib.sha256(b"abc").hexdigest()
    assert content_key({"a": 1}) == sha256_hex('{"a":1}')


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_is_idempotent_and_order_free(value: object) -> None:
    once = canonical_json(value)
    assert canonical_json(normalise(value)) == once
    if isinstance(value, dict):
        assert canonical_json(dict(reversed(list(value.items())))) == once


def test_keys_colliding_after_normalisation_are_rejected() -> None:
    nfd = unicodedata.normalize("NFD", "é")
    with pytest.raises(ValueError, match="same after normalisation"):
        canonical_json({"é": 1, nfd: 2})
    with pytest.raises(ValueError, match="same after normalisation"):
        canonical_json({1: "a", "1": "b"})
