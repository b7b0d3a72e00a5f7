"""Canonical JSON and content hashing.

The canonical form is what every hash in furnace is computed over:
sorted keys, no insignificant whitespace, UTF-8, strings in Unicode NFC,
and floats normalised (rounded to 9 significant decimals; integral floats
written as integers) so that ``0.1 + 0.2`` and ``0.3`` hash alike and
``1.0`` and ``1`` hash alike.

The text is exactly ``json.dumps(normalise(value), sort_keys=True,
separators=(",", ":"), ensure_ascii=False)``. It is produced with orjson,
which writes the same bytes for this data (escapes, key order, integers and
the shortest round-trip float digits; measured over every code point and
random floats) except floats below 1e-4, which it spells without an exponent:
those are written as ``repr`` gives them. What orjson refuses (integers beyond
64 bits, nesting deeper than 254, lone surrogates) goes through ``json.dumps``.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Callable
from typing import Any

import orjson

_FLOAT_DIGITS = 9
_EXACT = 2**53  # integral floats below this are written as integers
_SORTED = orjson.OPT_SORT_KEYS


def canonical_float(value: float) -> float | int:
    """``value`` rounded to 9 decimals; an integral result as an ``int``. Non-finite: ``ValueError``."""
    if not math.isfinite(value):
        raise ValueError("non-finite float has no canonical form")
    rounded = round(value, _FLOAT_DIGITS)
    if rounded.is_integer() and -_EXACT < rounded < _EXACT:
        return int(rounded)
    return rounded


def json_float(value: float) -> float | int | orjson.Fragment:
    """:func:`canonical_float` as the encoder must take it: below 1e-4 ``repr`` writes an exponent and
    orjson does not, so such a float is handed over as its ``repr`` text."""
    canonical = canonical_float(value)
    if type(canonical) is float and -1e-4 < canonical < 1e-4:
        return orjson.Fragment(repr(canonical))
    return canonical


def nfc(value: str) -> str:
    """``value`` in NFC (ASCII is already NFC)."""
    return value if value.isascii() else unicodedata.normalize("NFC", value)


def _walker(float_form: Callable[[float], Any]) -> Callable[[Any], Any]:
    """The normalising walk, with floats finished by ``float_form``."""

    def walk(value: Any) -> Any:
        kind = type(value)  # exact types first (the hot path: parsed JSON and model dumps)
        if kind is str:
            return value if value.isascii() else unicodedata.normalize("NFC", value)
        if kind is dict:
            out = {}
            for k, v in value.items():
                key = k if type(k) is str else str(k)
                out[key if key.isascii() else unicodedata.normalize("NFC", key)] = (
                    v if type(v) is str and v.isascii() else walk(v)
                )
            if len(out) != len(value):  # e.g. NFC and NFD spellings of one key: no single canonical form
                raise ValueError("two keys are the same after normalisation")
            return out
        if kind is list or kind is tuple:
            return [v if type(v) is str and v.isascii() else walk(v) for v in value]
        if kind is int or kind is bool or value is None:
            return value
        if kind is float:
            return float_form(value)
        # Subclasses of the JSON types.
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, str):
            return unicodedata.normalize("NFC", value)
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return float_form(value)
        if isinstance(value, dict):
            return walk(dict(value))
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        raise TypeError(f"cannot canonicalise {type(value).__name__}")

    return walk


normalise: Callable[[Any], Any] = _walker(canonical_float)
normalise.__doc__ = "Return ``value`` with strings NFC-normalised and floats canonicalised."
json_form: Callable[[Any], Any] = _walker(json_float)
json_form.__doc__ = """:func:`normalise` in the form the encoder takes (floats as :func:`json_float` gives them).

For typed producers that build part of the data themselves and hash it with :func:`key_of_json_form`."""


def _encode(data: Any) -> bytes | None:
    try:
        return orjson.dumps(data, option=_SORTED)
    except orjson.JSONEncodeError:  # integers beyond 64 bits, nesting deeper than 254, lone surrogates
        return None


def _python_json(value: Any) -> str:
    return json.dumps(normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Serialise ``value`` to canonical JSON text."""
    data = _encode(json_form(value))
    return data.decode("utf-8") if data is not None else _python_json(value)


def sha256_hex(text: str) -> str:
    """Hex sha256 of UTF-8 ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_key(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``."""
    data = _encode(json_form(value))
    return hashlib.sha256(data).hexdigest() if data is not None else sha256_hex(_python_json(value))


def key_of_json_form(data: Any) -> str | None:
    """sha256 of the canonical JSON of data already in :func:`json_form`; ``None`` where orjson cannot
    write it (the caller then hashes the plain value with :func:`content_key`)."""
    encoded = _encode(data)
    return hashlib.sha256(encoded).hexdigest() if encoded is not None else None
