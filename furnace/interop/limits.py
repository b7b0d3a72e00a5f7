"""Shape limits checked on a document's text *before* it is parsed into objects.

Every importer reads untrusted bytes. Size is checked from the file's length;
nesting depth and the number of items in any one list or mapping are checked
here, in linear time and without recursion, so a 100k-item or 100k-deep file is
refused in milliseconds instead of being built, validated and then refused.

- :func:`check_json_shape` — depth of a JSON text, by peeling innermost bracket pairs
  (C-speed regex passes, at most ``max_depth`` of them).
- :func:`check_yaml_shape` — depth and items per collection of a YAML text, from the
  parser's event stream (libyaml when available), stopping at the first excess.
- :func:`check_items` — the same item limit over already-parsed data (JSON), iteratively.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from furnace.domain.errors import InputError

MAX_DEPTH = 64  # real elixirs and cards use fewer than 10 levels
MAX_ITEMS = 2_000  # items in one list or mapping (an elixir file holds at most 1,000 elixirs)

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_STRUCTURE = re.compile(r"[^\[\]{},]+")
_INNERMOST = re.compile(r"[\[{],*[\]}]")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_json_shape(name: str, text: str, *, max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS) -> None:
    """Raise :class:`InputError` when the JSON ``text`` nests deeper than ``max_depth`` or one
    array/object holds more than ``max_items`` items.

    Strings are blanked, then innermost ``[...]``/``{...}`` groups (only commas left inside) are
    peeled one level per pass; a run of commas left belongs to one group. Unbalanced
    brackets are left to the JSON parser, which names the line.
    """
    structure = _NOT_STRUCTURE.sub("", _JSON_STRING.sub("", text))
    too_many = "," * max_items
    for _ in range(max_depth):
        if too_many in structure:
            raise InputError(f"{name}: an array or object holds more than {max_items} items")
        structure, removed = _INNERMOST.subn("", structure)
        if not removed or not structure.strip(","):
            return  # done, or unbalanced: the parser reports where
    if _INNERMOST.search(structure):
        raise InputError(f"{name}: nested more than {max_depth} levels deep")


def check_yaml_shape(name: str, text: str, *, max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS) -> None:
    """Raise :class:`InputError` for YAML nested deeper than ``max_depth`` or a collection over ``max_items``.

    Syntax errors are left to the full parse that follows (it names the line).
    """
    open_: list[list[int]] = []  # per open collection: [items seen, limit]
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)) and open_:
                top = open_[-1]
                top[0] += 1
                if top[0] > top[1]:
                    line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                    raise InputError(f"{name}: line {line}: a list or mapping holds more than {max_items} items")
            if isinstance(event, yaml.CollectionStartEvent):
                # a mapping's events are its keys and values
                open_.append([0, max_items * 2 if isinstance(event, yaml.MappingStartEvent) else max_items])
                if len(open_) > max_depth:
                    line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                    raise InputError(f"{name}: line {line}: nested more than {max_depth} levels deep")
            elif isinstance(event, yaml.CollectionEndEvent) and open_:
                open_.pop()
    except yaml.YAMLError:
        return  # reported with its line by the full parse


def check_items(name: str, data: Any, *, max_items: int = MAX_ITEMS) -> None:
    """Raise :class:`InputError` when any list or mapping in parsed ``data`` holds more than ``max_items``."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)):
            if len(item) > max_items:
                kind = "mapping" if isinstance(item, dict) else "list"
                raise InputError(f"{name}: a {kind} holds more than {max_items} items ({len(item)})")
            stack.extend(item.values() if isinstance(item, dict) else item)
