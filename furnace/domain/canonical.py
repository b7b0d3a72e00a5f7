"""Canonical JSON and content hashing.

The canonical form is what every hash in furnace is computed over:
sorted keys, no insignificant whitespace, UTF-8, strings in Unicode NFC,
and floats normalised (rounded to 9 significant decimals; integral floats
written as integers) so that ``0.1 + 0.2`` and ``0.3`` hash alike and
``1.0`` and ``1`` hash alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from typing import Any

_FLOAT_DIGITS = 9


def normalise(value: Any) -> Any:
    """Return ``value`` with strings NFC-normalised and floats canonicalised."""
    kind = type(value)  # exact types first (the hot path: parsed JSON and model dumps)
    if kind is str:
        return value if value.isascii() else unicodedata.normalize("NFC", value)  # ASCII is already NFC
    if kind is dict:
        out = {}
        for k, v in value.items():
            key = k if type(k) is str else str(k)
            out[key if key.isascii() else unicodedata.normalize("NFC", key)] = (
                v if type(v) is str and v.isascii() else normalise(v)
            )
        if len(out) != len(value):  # e.g. NFC and NFD spellings of one key: no single canonical form
            raise ValueError("two keys are the same after normalisation")
        return out
    if kind is list or kind is tuple:
        return [v if type(v) is str and v.isascii() else normalise(v) for v in value]
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return _float(value)
    return _normalise_other(value)


def _float(value: float) -> float | int:
    if math.isnan(value) or math.isinf(value):
        raise ValueError("non-finite float has no canonical form")
    rounded = round(value, _FLOAT_DIGITS)
    if rounded == int(rounded) and abs(rounded) < 2**53:
        return int(rounded)
    return float(repr(rounded))


def _normalise_other(value: Any) -> Any:
    """Floats and subclasses of the JSON types."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return normalise(dict(value))
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    raise TypeError(f"cannot canonicalise {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """Serialise ``value`` to canonical JSON text."""
    return json.dumps(normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    """Hex sha256 of UTF-8 ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_key(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))
