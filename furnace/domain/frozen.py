"""Read-only JSON containers: the dict and list an immutable value hands out.

:func:`freeze` turns plain JSON data (dicts, lists, scalars) into :class:`FrozenDict`
and :class:`FrozenList`, subclasses of ``dict`` and ``list`` whose every mutating
method raises ``TypeError``. They compare, serialise (``json.dumps``, pydantic) and
``isinstance``-check as the plain types do, so a frozen value's canonical JSON, and
so its hash, is exactly that of the data it was made from. ``copy.copy`` and
``copy.deepcopy`` return plain, editable containers: a copy is the caller's own.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only: build a new value (e.g. with furnace.domain.elixir.edit)")


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that refuses every change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


class FrozenList(list):  # type: ignore[type-arg]
    """A ``list`` that refuses every change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """``value`` with every dict and list (or tuple) in it, at any depth, made read-only."""
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(freeze(item) for item in value)
    return value
