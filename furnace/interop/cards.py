"""Character Card V2/V3 import and export (JSON and PNG).

Mapping (see :mod:`furnace.interop.card_mapping`): name, description →
identity, personality/system_prompt/post_history_instructions → principles (a
length limit in post_history_instructions also → ``constraints.max_length``),
``mes_example`` → few-shots, tags → expertise. SillyTavern macros stay macros
(expanded when a prompt is served: :mod:`furnace.domain.macros`). Everything an elixir has that a card does not
(tone, constraints, tools, priority, conflicts, style notes and preferences,
language, id, the agent's lineage) travels in ``data.extensions.furnace``.

Round-trip guarantees:

- **furnace → card → furnace** gives the identical elixir (same
  ``content_hash``). Where the visible card text cannot carry a value exactly,
  the exact value is kept in ``extensions.furnace.exact`` together with a hash
  of the card text it was written as; if another tool later edits that text,
  the edited text wins.
- **foreign card → furnace → card** keeps every field the card had: the
  original card object is kept in ``Elixir.extensions["card"]`` and export
  starts from it, rewriting only the visible fields whose elixir value changed.

Broken or oversized cards raise :class:`~furnace.domain.errors.InputError` before
anything is built, so callers store nothing.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from furnace.domain.agent import AGENT_PREFIX, Agent
from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import InputError
from furnace.domain.secrets import refuse_secrets
from furnace.interop.card_format import (
    BACKFILL_NOTE,
    MAX_CARD_FILE_BYTES,
    MAX_DEPTH,
    PNG_KEYWORDS,
    SPEC_NAMES,
    SPEC_VERSIONS,
    DecodedCard,
    Spec,
    convert,
    decode_card_bytes,
    encode_chunk,
    sync_v1_mirrors,
    validate_card,
)
from furnace.interop.card_mapping import (
    MAPPED,
    WRITES,
    card_language,
    derive_constraints,
    derive_fields,
    encode_visible,
    guard,
    mapped_values,
)
from furnace.interop.limits import check_json_shape
from furnace.interop.png import PNG_SIGNATURE, write_png

FORMAT = "furnace.card/1"
EXT_KEY = "furnace"
ELIXIR_ONLY = (
    "language",
    "tone",
    "constraints",
    "tools",
    "priority",
    "conflicts_with",
    "style_notes",
    "style_preferences",
)
Target = Elixir | Agent

__all__ = [
    "CardImport",
    "card_for",
    "elixir_from_card",
    "export_card_json",
    "export_card_png",
    "import_card_file",
    "is_card_file",
    "read_card_bytes",
    "read_card_file",
]


@dataclass
class CardImport:
    """The result of reading one card."""

    elixir: Elixir
    spec: Spec
    container: Literal["json", "png"]
    origin: Literal["furnace", "foreign"]
    lineage: dict[str, Any] | None = None  # the agent lineage a furnace card carried, if any
    warnings: list[str] = field(default_factory=list)


# --- shared -----------------------------------------------------------------


def _split_furnace(card: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(``extensions.furnace`` or None, a deep copy of the card without it)."""
    rest = copy.deepcopy(card)
    extensions = rest["data"].get("extensions")
    if not isinstance(extensions, dict) or EXT_KEY not in extensions:
        return None, rest
    furn = extensions.pop(EXT_KEY)
    if not isinstance(furn, dict):  # ``"furnace": null``: no furnace data (validate_card refused anything else)
        return None, rest
    if not extensions and furn.get("made_extensions"):
        del rest["data"]["extensions"]
    return furn, rest


def _exact_value(exact: dict[str, Any], key: str, seen: str) -> tuple[bool, Any]:
    entry = exact.get(key)
    if isinstance(entry, dict) and entry.get("seen") == seen:
        return True, entry.get("value")
    return False, None


def _generated(furn: dict[str, Any] | None, data: dict[str, Any]) -> bool:
    return furn is not None and furn.get("generated_system_prompt") == content_key(data.get("system_prompt") or "")


# --- import -----------------------------------------------------------------


def elixir_from_card(decoded: DecodedCard | dict[str, Any]) -> CardImport:
    """Build an elixir from a validated card (or a raw card object, validated here)."""
    if not isinstance(decoded, DecodedCard):
        decoded = validate_card(decoded)
    furn, rest = _split_furnace(decoded.card)
    data = decoded.card["data"]
    exact = (furn or {}).get("exact") or {}
    language = (furn or {}).get("language") or card_language(data)
    if language not in ("en", "zh"):
        language = card_language(data)
    fields: dict[str, Any] = derive_fields(data, language, generated_prompt=_generated(furn, data))
    for key in MAPPED:
        found, value = _exact_value(exact, key, guard(data, key))
        if found:
            fields[key] = value
    fields["language"] = language
    stated = derive_constraints(data, language)  # a limit in post_history_instructions (furnace's own win)
    if stated:
        fields["constraints"] = stated
    extensions: dict[str, Any] = {}
    if furn:
        fields.update({key: furn[key] for key in ELIXIR_ONLY if key in furn})
        if isinstance(furn.get("id"), str) and not furn["id"].startswith(AGENT_PREFIX):
            fields["id"] = furn["id"]  # an agent's card imports as a new elixir named after the card
        extensions.update(furn.get("extensions") or {})
    found, card = _exact_value(exact, "card", content_key(rest))
    if not found:
        card = rest
    if card is not None:
        extensions["card"] = card
    fields["extensions"] = extensions
    try:
        elixir = parse_elixir(fields)
    except InputError as err:
        raise InputError(
            f"character card {data['name']!r} does not make a valid elixir: {err}", field=err.field
        ) from None
    return CardImport(
        elixir=elixir,
        spec=decoded.spec,
        container=decoded.container,
        origin="furnace" if furn else "foreign",
        lineage=(furn or {}).get("lineage"),
        warnings=list(decoded.warnings),
    )


def read_card_bytes(raw: bytes, *, name: str = "card") -> CardImport:
    """Decode, validate and map a card from JSON or PNG bytes."""
    return elixir_from_card(decode_card_bytes(raw, name=name))


def _read(path: str | Path) -> bytes:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CARD_FILE_BYTES:
            raise InputError(f"{path.name} is too large ({size} bytes, at most {MAX_CARD_FILE_BYTES})", field="file")
        return path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}", field="file") from None


def read_card_file(path: str | Path) -> CardImport:
    """Read a ``.json`` or ``.png`` card file (errors name the file)."""
    name = Path(path).name
    try:
        return read_card_bytes(_read(path), name=name)
    except InputError as err:
        message = str(err)
        raise InputError(message if message.startswith(name) else f"{name}: {message}", field=err.field) from None


def import_card_file(path: str | Path) -> Elixir:
    """The elixir of a card file (JSON or PNG). Raises InputError on a broken card."""
    return read_card_file(path).elixir


def is_card_file(path: str | Path) -> bool:
    """True for a PNG file, or a JSON file whose ``spec`` names a character card.

    Every PNG counts (a PNG without a card then gets a clear error from
    :func:`import_card_file`); JSON is sniffed for ``"spec": "chara_card_…"``.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
        if head == PNG_SIGNATURE or path.suffix.lower() == ".png":
            return True
        if path.suffix.lower() != ".json" or path.stat().st_size > MAX_CARD_FILE_BYTES:
            return False
        raw = path.read_bytes()
        if b"chara_card" not in raw:  # a card's "spec" names it; anything else is not one
            return False
        text = raw.decode("utf-8-sig")
        check_json_shape(path.name, text, max_depth=MAX_DEPTH)  # too deep: the elixir reader says so
        obj = json.loads(text)
    except (OSError, ValueError, RecursionError):  # InputError is a ValueError
        return False
    return isinstance(obj, dict) and isinstance(obj.get("spec"), str) and obj["spec"].startswith("chara_card")


# --- export -----------------------------------------------------------------


def _skeleton(spec: Spec, elixir: Elixir) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": elixir.name,
        "description": "",
        "personality": "",
        "scenario": "",
        "first_mes": "",
        "mes_example": "",
        "creator_notes": f"Persona exported by furnace (elixir {elixir.id}).",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "furnace",
        "character_version": "",
        "extensions": {},
    }
    if spec == "v3":
        data["group_only_greetings"] = []
    return {"spec": SPEC_NAMES[spec], "spec_version": SPEC_VERSIONS[spec], "data": data}


def _unpack(target: Target) -> tuple[Elixir, Agent | None]:
    return (target.elixir, target) if isinstance(target, Agent) else (target, None)


def _furnace_block(elixir: Elixir) -> dict[str, Any]:
    """``extensions.furnace`` without the exact values: the elixir-only fields.

    ``id`` decides where a re-import is stored; ``name``, ``version`` and
    ``content_hash`` are informational (the visible name wins, the store assigns versions).
    """
    furn: dict[str, Any] = {
        "format": FORMAT,
        "id": elixir.id,
        "name": elixir.name,
        "version": elixir.version,
        "content_hash": elixir.content_hash,
    }
    furn.update(elixir.model_dump(mode="json", include=set(ELIXIR_ONLY)))
    others = {k: v for k, v in elixir.extensions.items() if k != "card"}
    if others:
        furn["extensions"] = others
    return furn


def _add_lineage(data: dict[str, Any], furn: dict[str, Any], agent: Agent, spec: Spec) -> None:
    furn["agent_id"] = agent.id
    furn["lineage"] = agent.lineage.model_dump(mode="json")
    if spec == "v3":  # the spec: applications only append to ``source``
        sources = list(data.get("source") or [])
        additions = [f"furnace:lineage:{agent.lineage_hash}"] + [
            f"furnace:parent:{p.id}@{p.version}:{p.content_hash}" for p in agent.lineage.parents
        ]
        data["source"] = sources + [s for s in additions if s not in sources]


def card_for(target: Target, spec: Spec = "v3", *, backfill: bool = False) -> dict[str, Any]:
    """The card object for an elixir or agent, in the ``spec`` envelope (``v2`` or ``v3``).

    ``backfill`` marks a V2 copy written next to a V3 one (PNG ``chara`` chunk): its
    ``creator_notes`` start with the spec's warning that it is a backfill.
    """
    from furnace.domain.render import render_prompt

    elixir, agent = _unpack(target)
    values = mapped_values(elixir)
    stored = elixir.extensions.get("card")
    original = stored if isinstance(stored, dict) and isinstance(stored.get("data"), dict) else None
    card = convert(original, spec) if original is not None else _skeleton(spec, elixir)
    data = card["data"]
    # A foreign card keeps its own text wherever the elixir still says the same thing.
    changed = list(MAPPED)
    if original is not None:
        derived = derive_fields(data, elixir.language)
        changed = [key for key in MAPPED if derived[key] != values[key]]
    visible = encode_visible(values)
    for key in changed:
        for name in WRITES[key]:
            data[name] = visible[name]
    furn = _furnace_block(elixir)
    if original is None or changed or agent is not None:
        prompt = agent.system_prompt if agent is not None else render_prompt(elixir)
        data["system_prompt"] = prompt
        furn["generated_system_prompt"] = content_key(prompt)
    if agent is not None:
        _add_lineage(data, furn, agent, spec)
    if backfill:
        notes = data.get("creator_notes") or ""
        data["creator_notes"] = BACKFILL_NOTE + ("\n\n" + notes if notes else "")
    sync_v1_mirrors(card)
    # Exact values for whatever the card text does not give back, guarded by that text's hash.
    exact: dict[str, Any] = {}
    rederived = derive_fields(data, elixir.language, generated_prompt="generated_system_prompt" in furn)
    for key in MAPPED:
        if rederived[key] != values[key]:
            exact[key] = {"value": values[key], "seen": guard(data, key)}
    rest = copy.deepcopy(card)  # what an importer sees once it takes our extension out
    if not isinstance(data.get("extensions"), dict):
        data["extensions"] = {}
        furn["made_extensions"] = True
    if rest != original:
        exact["card"] = {"value": copy.deepcopy(original), "seen": content_key(rest)}
    if exact:
        furn["exact"] = exact
    data["extensions"][EXT_KEY] = furn
    return card


def _exported(target: Target, spec: Spec, *, backfill: bool = False) -> dict[str, Any]:
    """:func:`card_for`, refused (InputError naming the field) when anything in it looks like a secret."""
    card = card_for(target, spec, backfill=backfill)
    kind = "agent" if isinstance(target, Agent) else "elixir"
    refuse_secrets(card, what=f"{kind} {target.id!r} as a character card")
    return card


def export_card_json(target: Target, spec: Spec = "v3") -> bytes:
    """The card as pretty UTF-8 JSON (deterministic for the same input); refuses secrets."""
    return (json.dumps(_exported(target, spec), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def export_card_png(target: Target, spec: Spec = "v3") -> bytes:
    """A PNG carrying the card: ``ccv3`` plus a backfilled ``chara`` (V2) for ``v3``; ``chara`` only for ``v2``.

    Refuses secrets like :func:`export_card_json`."""
    elixir, _ = _unpack(target)
    texts = []
    if spec == "v3":
        texts.append((PNG_KEYWORDS["v3"], encode_chunk(_exported(target, "v3"))))
        texts.append((PNG_KEYWORDS["v2"], encode_chunk(_exported(target, "v2", backfill=True))))
    else:
        texts.append((PNG_KEYWORDS["v2"], encode_chunk(_exported(target, "v2"))))
    colour = bytes.fromhex(elixir.content_hash[:6])
    return write_png(texts, rgb=(colour[0], colour[1], colour[2]))
