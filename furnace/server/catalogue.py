"""The model ids a server offers: every agent, every library elixir, and the Prompt Registry aliases.

- ``agt-…``: an agent (its system prompt from the synthesis cache);
- ``id`` or ``id@version``: a library elixir (latest, or that version);
- ``NAME@champion`` / ``NAME@candidate``: the agent a furnace prompt's alias points at in MLflow's
  Prompt Registry (``prompts:/NAME@champion``), looked up on each request so a moved alias is
  followed at once. A home without an MLflow store lists none (and none is created).

Agents are pre-warmed into the synthesis cache (:func:`furnace.fusion.fuse.prewarm`) when the server
starts, and an agent created after that (by ``furnace fuse`` or an experiment) when a listing first
shows it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from furnace.domain.errors import FurnaceError, InputError, NotFound
from furnace.domain.guarded import Guarded, serialized
from furnace.fusion.answers import Speaker, load_speaker
from furnace.fusion.fuse import prewarm
from furnace.runtime import Runtime

log = logging.getLogger("furnace.server")

REGISTRY_ALIASES = ("champion", "candidate")
OWNER = "furnace"


def registry_present(tracking_uri: str) -> bool:
    """False for a ``sqlite:///`` MLflow store whose file does not exist: it holds no prompts, and asking
    MLflow would create it (and load MLflow, seconds). True for any other URI (a tracking server)."""
    if not tracking_uri.startswith("sqlite:///"):
        return True
    return Path(tracking_uri.removeprefix("sqlite:///")).is_file()


def _created(when: datetime | None) -> int:
    return int(when.timestamp()) if when is not None else 0


class Catalogue(Guarded):
    """Lists and resolves model ids on one runtime, and pre-warms the agents it has seen."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._warmed: set[str] = set()
        self._warming: list[Callable[[float | None], None]] = []  # each pre-warm started: its thread's join

    def warm(self, agent_ids: Iterable[str]) -> None:
        """Pre-warm the agents among ``agent_ids`` not pre-warmed yet (in the background; never raises)."""
        new = self._claim(agent_ids)
        if new:
            self._warming.append(prewarm(self.runtime.store, new, self.runtime.synthesis_cache).join)

    @serialized
    def _claim(self, agent_ids: Iterable[str]) -> list[str]:
        """The agents among ``agent_ids`` not pre-warmed yet, marked as pre-warmed."""
        new = [a for a in agent_ids if a not in self._warmed]
        self._warmed.update(new)
        return new

    def warm_all(self) -> None:
        """Pre-warm every stored agent (the server's start)."""
        self.warm(a.id for a in self.runtime.store.list_agents())

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait for the pre-warms started so far (up to ``timeout_s`` each)."""
        for join in list(self._warming):
            join(timeout_s)

    def models(self) -> list[dict[str, Any]]:
        """The OpenAI ``model`` objects: agents (newest first), library elixirs, then registry aliases."""
        store = self.runtime.store
        agents = store.list_agents()
        self.warm(a.id for a in agents)
        out = [
            {
                "id": a.id,
                "object": "model",
                "created": _created(a.created_at),
                "owned_by": OWNER,
                "kind": "agent",
                "name": a.elixir.name,
            }
            for a in agents
        ]
        out += [
            {
                "id": s.id,
                "object": "model",
                "created": _created(s.created_at),
                "owned_by": OWNER,
                "kind": "elixir",
                "name": s.name,
                "version": s.version,
            }
            for s in store.list_summaries()
        ]
        return out + self._registry_models()

    def _registry_models(self) -> list[dict[str, Any]]:
        if not registry_present(self.runtime.settings.tracking_uri):
            return []
        try:
            from furnace.adapters.mlflow_prompts import aliased_prompts

            found = aliased_prompts(self.runtime.settings.tracking_uri)
        except Exception as err:  # the registry is optional: a listing without it still serves
            log.warning("prompt registry not listed: %s: %s", err.__class__.__name__, str(err)[:160])
            return []
        return [
            {
                "id": f"{p.name}@{alias}",
                "object": "model",
                "created": 0,
                "owned_by": OWNER,
                "kind": "registry",
                "name": p.name,
                "version": p.version,
                "agent": p.agent_id,
            }
            for p in found
            for alias in p.aliases
        ]

    def resolve(self, model_id: str) -> Speaker:
        """The agent or elixir ``model_id`` names; NotFound / InputError when it names none."""
        name, sep, alias = model_id.partition("@")
        if sep and alias in REGISTRY_ALIASES:
            return self._registry_agent(name, alias)
        return load_speaker(self.runtime.store, model_id)

    def _registry_agent(self, name: str, alias: str) -> Speaker:
        uri = self.runtime.settings.tracking_uri
        if not registry_present(uri):
            raise NotFound(f"no prompt registry in this home (prompts:/{name}@{alias})")
        try:
            from furnace.adapters.mlflow_prompts import load_agent

            return load_agent(self.runtime.store, f"prompts:/{name}@{alias}", tracking_uri=uri).agent
        except FurnaceError:
            raise
        except Exception as err:  # an unreachable tracking server: the alias resolves to nothing
            raise InputError(f"prompts:/{name}@{alias}: {err.__class__.__name__}") from None
