"""Character Card V2/V3 structure: decoding, validation and spec conversion.

A card is kept as the plain JSON object it arrived as (so unknown fields and
``extensions`` keys survive). This module checks that object is a card we can
read, decodes it from JSON or PNG bytes, and converts between the V2 and V3
envelopes without dropping anything it does not understand.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from furnace.domain.errors import InputError
from furnace.interop.limits import check_json_shape
from furnace.interop.png import is_png, text_chunks

Spec = Literal["v2", "v3"]
SPEC_NAMES: dict[Spec, str] = {"v2": "chara_card_v2", "v3": "chara_card_v3"}
SPEC_VERSIONS: dict[Spec, str] = {"v2": "2.0", "v3": "3.0"}
PNG_KEYWORDS: dict[Spec, str] = {"v2": "chara", "v3": "ccv3"}

MAX_CARD_JSON_BYTES = 3_000_000  # the card JSON itself (lorebooks included)
MAX_CARD_FILE_BYTES = 20_000_000  # a PNG file (the image counts too)
MAX_DEPTH = 64  # JSON nesting; real cards use fewer than 10 levels
FURNACE_OBJECTS = ("exact", "extensions", "lineage")  # ``extensions.furnace`` keys that must be objects

STRING_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "creator",
    "character_version",
    "nickname",
)
STRING_LIST_FIELDS = ("tags", "alternate_greetings", "group_only_greetings", "source")
V3_ONLY_FIELDS = (
    "assets",
    "nickname",
    "creator_notes_multilingual",
    "source",
    "group_only_greetings",
    "creation_date",
    "modification_date",
)
# V1 cards mirror these at the top level; tools such as SillyTavern still write them.
V1_MIRRORED = ("name", "description", "personality", "scenario", "first_mes", "mes_example", "tags")
BACKFILL_NOTE = (
    "This character card is Character Card V3, but it is loaded as a Character Card V2. "
    "Please use a Character Card V3 compatible application to use this character card properly."
)


@dataclass
class DecodedCard:
    """A validated card object, its spec and any warnings worth showing."""

    card: dict[str, Any]
    spec: Spec
    container: Literal["json", "png"] = "json"
    warnings: list[str] = field(default_factory=list)


def _fail(message: str, field: str | None = None) -> InputError:
    return InputError(f"invalid character card: {message}", field=field)


def _check_types(data: dict[str, Any]) -> None:
    for key in STRING_FIELDS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise _fail(f"data.{key} must be a string, got {type(data[key]).__name__}", f"data.{key}")
    for key in STRING_LIST_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(f"data.{key} must be a list of strings", f"data.{key}")
    for key in ("extensions", "creator_notes_multilingual"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise _fail(f"data.{key} must be an object", f"data.{key}")
    book = data.get("character_book")
    if book is not None:
        if not isinstance(book, dict):
            raise _fail("data.character_book must be an object", "data.character_book")
        entries = book.get("entries", [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise _fail("data.character_book.entries must be a list of objects", "data.character_book.entries")
    assets = data.get("assets")
    if assets is not None and (not isinstance(assets, list) or not all(isinstance(a, dict) for a in assets)):
        raise _fail("data.assets must be a list of objects", "data.assets")
    furnace_ext = (data.get("extensions") or {}).get("furnace")
    if furnace_ext is not None and not isinstance(furnace_ext, dict):
        raise _fail("data.extensions.furnace must be an object", "data.extensions.furnace")
    for key in FURNACE_OBJECTS:
        value = (furnace_ext or {}).get(key)
        if value is not None and not isinstance(value, dict):
            raise _fail(f"data.extensions.furnace.{key} must be an object", f"data.extensions.furnace.{key}")


def validate_card(obj: Any) -> DecodedCard:
    """Check that ``obj`` is a V2 or V3 card with a name; raise :class:`InputError` otherwise."""
    if not isinstance(obj, dict):
        raise _fail(f"expected a JSON object, got {type(obj).__name__}")
    spec_name = obj.get("spec")
    if spec_name is None:
        hint = (
            " (looks like a Character Card V1, which is not supported)" if "name" in obj and "data" not in obj else ""
        )
        raise _fail(f"no 'spec' field{hint}; expected chara_card_v2 or chara_card_v3", "spec")
    specs = {name: key for key, name in SPEC_NAMES.items()}
    if not isinstance(spec_name, str):
        raise _fail(f"'spec' must be a string, got {type(spec_name).__name__}", "spec")
    if spec_name not in specs:
        raise _fail(f"unsupported spec {spec_name!r}; expected chara_card_v2 or chara_card_v3", "spec")
    spec: Spec = specs[spec_name]
    data = obj.get("data")
    if not isinstance(data, dict):
        raise _fail("'data' must be an object", "data")
    _check_types(data)
    if not isinstance(data.get("name"), str) or not data["name"].strip():
        raise _fail("data.name is missing or empty", "data.name")
    warnings = []
    version = obj.get("spec_version")
    if spec == "v3":
        try:
            newer = float(str(version)) > 3.0
        except ValueError:
            newer = False
        if newer:
            warnings.append(f"card uses spec_version {version}, newer than 3.0: new features may be ignored")
    return DecodedCard(card=obj, spec=spec, warnings=warnings)


def _depth(value: Any) -> int:
    """Nesting depth of JSON data, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


class _NonFinite(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NonFinite(name)


def _parse_json_text(text: str | bytes, where: str, label: str) -> Any:
    if len(text) > MAX_CARD_JSON_BYTES:
        raise InputError(
            f"character card is too large: {label} has {len(text)} bytes of JSON (at most {MAX_CARD_JSON_BYTES})",
            field=where,
        )
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8-sig")
        try:
            check_json_shape(label, text, max_depth=MAX_DEPTH)
        except InputError:
            raise RecursionError from None
        obj = json.loads(text, parse_constant=_reject_constant)
        if _depth(obj) > MAX_DEPTH:
            raise RecursionError
        json.dumps(obj, ensure_ascii=False).encode("utf-8")  # lone surrogates cannot be stored or hashed
        return obj
    except RecursionError:
        raise InputError(f"invalid character card: {label} is nested too deeply", field=where) from None
    except UnicodeEncodeError:
        raise InputError(
            f"invalid character card: {label} contains invalid Unicode (a lone surrogate)", field=where
        ) from None
    except UnicodeDecodeError:
        raise InputError(f"invalid character card: {label} is not UTF-8 text", field=where) from None
    except json.JSONDecodeError as err:
        raise InputError(f"invalid character card: {label} is not valid JSON ({err})", field=where) from None
    except _NonFinite as err:
        raise InputError(
            f"invalid character card: {label} is not valid JSON ({err} is not a number)", field=where
        ) from None


def _decode_chunk(text: str, keyword: str) -> Any:
    label = f"PNG chunk {keyword!r}"
    if len(text) > MAX_CARD_JSON_BYTES * 4 // 3 + 4:
        raise InputError(
            f"character card is too large: {label} has {len(text)} bytes (at most {MAX_CARD_JSON_BYTES} bytes of JSON)",
            field=f"png.{keyword}",
        )
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"invalid character card: {label} is not valid base64", field=f"png.{keyword}") from None
    return _parse_json_text(raw, f"png.{keyword}", f"the JSON in {label}")


def decode_card_bytes(raw: bytes, *, name: str = "card") -> DecodedCard:
    """Decode and validate a card from JSON or PNG bytes (``ccv3`` preferred over ``chara``)."""
    if len(raw) > MAX_CARD_FILE_BYTES:
        raise InputError(f"{name} is too large ({len(raw)} bytes, at most {MAX_CARD_FILE_BYTES})", field="file")
    if is_png(raw):
        chunks = text_chunks(raw)
        for spec in ("v3", "v2"):
            keyword = PNG_KEYWORDS[spec]
            if keyword in chunks:
                decoded = validate_card(_decode_chunk(chunks[keyword], keyword))
                decoded.container = "png"
                return decoded
        raise InputError("PNG has no character card (no 'ccv3' or 'chara' tEXt chunk)", field="png")
    return validate_card(_parse_json_text(raw, "json", "the card JSON"))


def encode_chunk(card: dict[str, Any]) -> str:
    """A card as the base64 text of a PNG chunk (UTF-8 JSON, compact)."""
    text = json.dumps(card, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def convert(card: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """A deep copy of ``card`` in the ``spec`` envelope.

    V2→V3 adds ``group_only_greetings`` and the lorebook entries' ``use_regex``; V3→V2 drops the V3-only data fields
    (the caller keeps the original when it needs them back). Top-level keys
    besides ``spec``/``spec_version``/``data`` (V1 mirrors) are kept.
    """
    out = copy.deepcopy(card)
    current = "v3" if out.get("spec") == SPEC_NAMES["v3"] else "v2"
    if current == spec:
        return out  # a card's own lorebook is kept exactly as it came
    out["spec"] = SPEC_NAMES[spec]
    out["spec_version"] = SPEC_VERSIONS[spec]
    data = out["data"]
    if spec == "v3":
        data.setdefault("group_only_greetings", [])
        data.setdefault("alternate_greetings", [])
        _v3_book(data)
    else:
        for key in V3_ONLY_FIELDS:
            data.pop(key, None)
    return out


def _v3_book(data: dict[str, Any]) -> None:
    """V3 lorebook entries carry ``use_regex`` (required by the V3 spec; V2 keys are plain text: false)."""
    book = data.get("character_book")
    if isinstance(book, dict):
        for entry in book.get("entries") or []:
            if isinstance(entry, dict):
                entry.setdefault("use_regex", False)


def sync_v1_mirrors(card: dict[str, Any]) -> None:
    """Update the top-level V1 copies of data fields that a card already carries."""
    for key in V1_MIRRORED:
        if key in card and key in card["data"]:
            card[key] = copy.deepcopy(card["data"][key])
