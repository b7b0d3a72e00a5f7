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
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("non-finite float has no canonical form")
        rounded = round(value, _FLOAT_DIGITS)
        if rounded == int(rounded) and abs(rounded) < 2**53:
            return int(rounded)
        return float(repr(rounded))
    if isinstance(value, dict):
        out = {normalise(str(k)): normalise(v) for k, v in value.items()}
        if len(out) != len(value):  # e.g. NFC and NFD spellings of one key: no single canonical form
            raise ValueError("two keys are the same after normalisation")
        return out
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
