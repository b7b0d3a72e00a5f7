"""One model for the agents, another for judging: :class:`TaskRouter` sends each task kind to
its model (``{TaskKind.JUDGE: judge}``) and everything else to the default one. A request that
names a model in ``route`` (one judge of a panel, :mod:`furnace.scoring.panel`) goes to that
model of ``named``; naming a model the router does not know is an error, never another model's answer.

It sits *above* the response caches (each routed model keeps its own cache keys) and
*below* the experiment meter, so budgets, concurrency and accounting see every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from furnace.domain.errors import FurnaceError
from furnace.llm.cache import CallTotals
from furnace.llm.seam import LLM, Completion, LLMRequest, TaskKind


class TaskRouter:
    """An LLM that routes requests by task kind; ``model_name`` is the default model's."""

    def __init__(self, default: LLM, routes: Mapping[TaskKind, LLM], named: Mapping[str, LLM] | None = None) -> None:
        self.default = default
        self.inner = default  # wrappers are walked through ``inner`` (answer traits, lineage params)
        self.routes = dict(routes)
        self.named = dict(named or {})
        self.model_name = default.model_name

    def __repr__(self) -> str:
        routed = ", ".join(f"{k.value}={v.model_name}" for k, v in self.routes.items())
        return f"TaskRouter({self.model_name}, {routed})"

    def model_for(self, task: TaskKind) -> LLM:
        return self.routes.get(task, self.default)

    def _target(self, request: LLMRequest) -> LLM:
        """The model ``request`` goes to."""
        if request.route is not None:
            if request.route not in self.named:
                known = ", ".join(sorted(self.named)) or "none"
                raise FurnaceError(
                    f"no model {request.route!r} to route a {request.task.value} call to (known: {known})"
                )
            return self.named[request.route]
        return self.model_for(request.task)

    def request_key(self, request: LLMRequest) -> str | None:
        """The cache key of ``request`` at the model it goes to (None when that model keeps no cache)."""
        key = getattr(self._target(request), "request_key", None)
        return key(request) if callable(key) else None

    def complete(self, request: LLMRequest) -> Completion:
        return self._target(request).complete(request)

    def run_totals(self) -> CallTotals:
        """The default model's ledger totals of its run (the routed models share that ledger and run id)."""
        totals: Any = getattr(self.default, "run_totals", None)
        return totals() if callable(totals) else CallTotals()
