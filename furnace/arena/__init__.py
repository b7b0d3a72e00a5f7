"""The group-chat arena (docs/arena.md): deterministic directives, a supervisor for
open discussion, resumable speaker-level runs and typed events.

Public surface: :class:`Arena`, :class:`RunOutcome`, the :class:`ArenaStore`
protocol with :class:`InMemoryArenaStore`, :func:`classify`, the records in
:mod:`furnace.arena.models` and the events in :mod:`furnace.arena.events`.
:mod:`furnace.arena.speaker` (the persona pipeline) imports only leaf modules of
this package, so any import order works.
"""

from __future__ import annotations

from furnace.arena.directives import Directive, DirectiveKind, classify
from furnace.arena.events import ArenaEvent, ArenaEventAdapter
from furnace.arena.models import ArenaMessage, ArenaSession, Plan
from furnace.arena.runner import Arena, RunOutcome
from furnace.arena.store import ArenaStore, InMemoryArenaStore

__all__ = [
    "Arena",
    "ArenaEvent",
    "ArenaEventAdapter",
    "ArenaMessage",
    "ArenaSession",
    "ArenaStore",
    "Directive",
    "DirectiveKind",
    "InMemoryArenaStore",
    "Plan",
    "RunOutcome",
    "classify",
]
