"""Elixir files: YAML or JSON, holding one elixir (a mapping) or a list of them.

Every problem becomes one :class:`~furnace.domain.errors.InputError` that names the
file and, where the parser or the document structure tells us, the line:
``persona.yaml: line 7: mapping values are not allowed here`` or
``library.yaml: item 2 (line 31): invalid elixir: tone.humor must be between 0 and 1, got 1.7``.
YAML anchors and aliases work, but a document whose aliases expand past
:data:`MAX_YAML_NODES` nodes (a "billion laughs" file) or refer to themselves is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import InputError
from furnace.interop.limits import check_items, check_json_shape, check_yaml_shape

MAX_FILE_BYTES = 5_000_000
MAX_ELIXIRS_PER_FILE = 1_000
MAX_YAML_NODES = 200_000
YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built in: same documents, ~10x faster


def _expanded_size(node: yaml.Node, memo: dict[int, int], active: set[int]) -> int:
    """Node count with every alias expanded (memoised, so linear in the file)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise yaml.composer.ComposerError(None, None, "an alias refers to itself", node.start_mark)
    active.add(key)
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo, active) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo, active) + _expanded_size(v, memo, active) for k, v in node.value)
    else:
        size = 1
    active.discard(key)
    memo[key] = min(size, MAX_YAML_NODES + 1)
    return memo[key]


def read_text(path: Path) -> str:
    """The file's text (UTF-8, BOM allowed) or an InputError naming the file."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{path.name}: file is too large ({size} bytes, at most {MAX_FILE_BYTES})")
        return path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except UnicodeDecodeError as err:
        raise InputError(f"{path.name}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise InputError(f"{path.name}: cannot read ({err.strerror})") from None


def _parse_yaml(name: str, text: str) -> tuple[Any, list[int]]:
    """The document and, for a top-level list, the 1-based line of each item."""
    check_yaml_shape(name, text)
    try:
        loader = _LOADER(text)
    except yaml.reader.ReaderError as err:
        raise InputError(f"{name}: unacceptable character #x{err.character:04x} at position {err.position}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError(f"{name}: the file is empty")
        if _expanded_size(node, {}, set()) > MAX_YAML_NODES:
            raise InputError(f"{name}: the document expands to more than {MAX_YAML_NODES} values (aliases?)")
        lines = [item.start_mark.line + 1 for item in node.value] if isinstance(node, yaml.SequenceNode) else []
        return loader.construct_document(node), lines
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        reason = err.problem or err.context or "malformed YAML"
        raise InputError(f"{name}: {where}{reason}") from None
    except yaml.reader.ReaderError as err:
        raise InputError(f"{name}: unacceptable character #x{err.character:04x} at position {err.position}") from None
    except yaml.YAMLError as err:
        raise InputError(f"{name}: malformed YAML ({' '.join(str(err).split())})") from None
    except RecursionError:
        raise InputError(f"{name}: nesting too deep") from None
    finally:
        loader.dispose()


def _parse_json(name: str, text: str) -> Any:
    check_json_shape(name, text)
    try:
        data = json.loads(text)
        check_items(name, data)
        return data
    except json.JSONDecodeError as err:
        raise InputError(f"{name}: line {err.lineno}: {err.msg}") from None
    except RecursionError:
        raise InputError(f"{name}: nesting too deep") from None


def parse_document(name: str, text: str, *, fmt: str) -> list[tuple[str, Elixir]]:
    """Validate every elixir in a document's text (``fmt`` is ``"yaml"`` or ``"json"``).

    Returns ``(where, elixir)`` pairs; raises one InputError for the first problem.
    """
    lines: list[int] = []
    if fmt == "json":
        data = _parse_json(name, text)
    else:
        data, lines = _parse_yaml(name, text)
    if isinstance(data, dict):
        return [("file", _validate(name, data, None))]
    if not isinstance(data, list):
        raise InputError(f"{name}: expected an elixir (a mapping) or a list of them, got {type(data).__name__}")
    if not data:
        raise InputError(f"{name}: the list holds no elixirs")
    if len(data) > MAX_ELIXIRS_PER_FILE:
        raise InputError(f"{name}: too many elixirs ({len(data)}, at most {MAX_ELIXIRS_PER_FILE})")
    found: list[tuple[str, Elixir]] = []
    first_item: dict[str, int] = {}
    for index, item in enumerate(data, 1):
        where = f"item {index}" + (f" (line {lines[index - 1]})" if lines else "")
        elixir = _validate(name, item, where)
        if elixir.id in first_item:
            raise InputError(
                f"{name}: {where}: id {elixir.id!r} already used by item {first_item[elixir.id]}", field="id"
            )
        first_item[elixir.id] = index
        found.append((where, elixir))
    return found


def _validate(name: str, data: Any, where: str | None) -> Elixir:
    prefix = f"{name}: {where}: " if where else f"{name}: "
    try:
        return parse_elixir(data)
    except InputError as err:
        raise InputError(prefix + str(err), field=err.field) from None
    except RecursionError:
        raise InputError(prefix + "nesting too deep") from None


def load_elixir_file(path: str | Path) -> list[Elixir]:
    """Every elixir in a YAML or JSON file (one mapping or a list), validated.

    Raises :class:`InputError` naming the file (and the line when known) for a
    malformed file or any invalid elixir; returns nothing partial.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in YAML_SUFFIXES + JSON_SUFFIXES:
        raise InputError(f"{path.name}: expected a .yaml, .yml or .json file")
    text = read_text(path)
    fmt = "json" if suffix in JSON_SUFFIXES else "yaml"
    return [elixir for _, elixir in parse_document(path.name, text, fmt=fmt)]
