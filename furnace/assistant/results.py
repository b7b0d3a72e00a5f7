"""Structured results: what the app and CLI render directly (the model never retypes them)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from furnace.assistant.scope import Catalogue, Scope


class Action(BaseModel):
    """Something the user can do with a result: open an agent, compare, lock the scope."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["open_agent", "open_persona", "compare", "lock_scope"]
    label: str
    target: dict[str, Any]


class StructuredResult(BaseModel):
    """A table or a set of figures, with actions."""

    model_config = ConfigDict(frozen=True)

    type: Literal["list", "stats"]
    title: str
    columns: list[str]
    items: list[dict[str, Any]]
    actions: list[Action] = []
    context: str = ""  # a short text for the model (and for screen readers)

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


class AssistData(Protocol):
    """Read-only, parameterised queries over furnace's own tables."""

    def catalogue(self) -> Catalogue: ...

    def top_agents(self, scope: Scope, limit: int) -> list[dict[str, Any]]: ...

    def revisions(self, scope: Scope, limit: int) -> list[dict[str, Any]]: ...

    def preferences(self, scope: Scope, limit: int) -> list[dict[str, Any]]: ...

    def experiments(self, scope: Scope, limit: int) -> list[dict[str, Any]]: ...

    def personas(self, scope: Scope, limit: int) -> list[dict[str, Any]]: ...

    def costs(self, scope: Scope, limit: int) -> list[dict[str, Any]]: ...
