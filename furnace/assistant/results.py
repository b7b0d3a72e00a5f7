"""Structured results: what the app and CLI render directly (the model never retypes them)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from furnace.assistant.scope import Catalogue, Language, Scope
from furnace.domain.intents import CostGroup, CountSubject


class Action(BaseModel):
    """Something the user can do with a result: open an agent, compare, lock the scope."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["open_agent", "open_persona", "compare", "lock_scope"]
    label: str
    target: dict[str, Any]


GapOrder = Literal["largest_gap", "smallest_gap"]
"""Rows ordered by the train-test gap: an agent's (an experiment's champion's) train fitness less its
held-out test fitness, largest (most overfit) or smallest first; rows not tested last."""


class StructuredResult(BaseModel):
    """A table or a set of figures, with actions."""

    model_config = ConfigDict(frozen=True)

    type: Literal["list", "stats"]
    title: str
    columns: list[str]
    items: list[dict[str, Any]]
    actions: list[Action] = []
    context: str = ""  # a short text for the model (and for screen readers)
    intent: str = ""
    applied: str = "everything"  # the scope the query actually applied (always shown)
    order: GapOrder | None = None  # the rows are by their train-test gap (largest or smallest first)

    def summary(self, top: int = 3) -> dict[str, Any]:
        """What the model sees to write its lead: never the whole list."""
        top_rows = self.model_copy(update={"items": self.items[:top]}).model_dump(mode="json")["items"]
        return {
            "type": self.type,
            "title": self.title,
            "count": len(self.items),
            "columns": self.columns,
            "top": top_rows,
            "context": self.context,
        }


class Query(BaseModel):
    """One read: the scope to apply, the subjects named (agents, versions), grouping and a row limit."""

    model_config = ConfigDict(frozen=True)

    scope: Scope = Scope()
    agents: tuple[str, ...] = ()
    versions: tuple[int, ...] = ()
    experiments: tuple[str, ...] = ()  # several named for a comparison
    subjects: tuple[str, ...] = ()  # agents and personas to compare side by side
    counting: CountSubject | None = None  # what a "how many" question counts
    language: Language | None = None  # personas written in this language
    group: CostGroup = "task"
    limit: int = 50
    order: GapOrder | None = None  # rows by their train-test gap instead of the intent's own order


class AssistData(Protocol):
    """Read-only, parameterised queries over furnace's own tables, one per intent.

    Each takes a :class:`Query` and honours every scope field its intent lists in
    :data:`furnace.assistant.queries.SHAPES` (the assistant tells the user which).
    """

    def catalogue(self) -> Catalogue: ...

    def known_agent(self, agent_id: str) -> bool: ...

    def top_agents(self, q: Query) -> list[dict[str, Any]]: ...

    def agents(self, q: Query) -> list[dict[str, Any]]: ...

    def seeds(self, q: Query) -> list[dict[str, Any]]: ...

    def operators(self, q: Query) -> list[dict[str, Any]]: ...

    def ancestors(self, q: Query) -> list[dict[str, Any]]: ...

    def descendants(self, q: Query) -> list[dict[str, Any]]: ...

    def common_ancestors(self, q: Query) -> list[dict[str, Any]]: ...

    def persona_versions(self, q: Query) -> list[dict[str, Any]]: ...

    def persona_diff(self, q: Query) -> list[dict[str, Any]]: ...

    def failures(self, q: Query) -> list[dict[str, Any]]: ...

    def judge_feedback(self, q: Query) -> list[dict[str, Any]]: ...

    def experiment_compare(self, q: Query) -> list[dict[str, Any]]: ...

    def content_versions(self, q: Query) -> list[dict[str, Any]]: ...

    def arena_runs(self, q: Query) -> list[dict[str, Any]]: ...

    def revisions(self, q: Query) -> list[dict[str, Any]]: ...

    def preferences(self, q: Query) -> list[dict[str, Any]]: ...

    def experiments(self, q: Query) -> list[dict[str, Any]]: ...

    def personas(self, q: Query) -> list[dict[str, Any]]: ...

    def costs(self, q: Query) -> list[dict[str, Any]]: ...
