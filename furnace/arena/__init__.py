"""The group-chat arena (DESIGN §6): deterministic directives, a supervisor for
open discussion, resumable speaker-level runs and typed events.

Public surface (imported lazily so that :mod:`furnace.arena.speaker` can use
:mod:`furnace.arena.ordinals` without a cycle): :class:`Arena`, :class:`RunOutcome`,
:class:`InMemoryArenaStore`, :func:`classify`, the records in
:mod:`furnace.arena.models` and the events in :mod:`furnace.arena.events`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Arena": "runner",
    "RunOutcome": "runner",
    "ArenaStore": "store",
    "InMemoryArenaStore": "store",
    "classify": "directives",
    "Directive": "directives",
    "DirectiveKind": "directives",
    "ArenaSession": "models",
    "Plan": "models",
    "ArenaMessage": "models",
    "ArenaEvent": "events",
    "ArenaEventAdapter": "events",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"furnace.arena.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'furnace.arena' has no attribute {name!r}")
