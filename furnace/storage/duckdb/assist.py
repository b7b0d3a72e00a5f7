"""Read-only, parameterised queries for the lab assistant over furnace's own tables.

Every statement is a fixed template; values from the user's question are only
ever bound as parameters, never spliced into SQL. The table names below are
the whole reach of the assistant.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from furnace.assistant.answer import AssistantState
from furnace.assistant.scope import Catalogue, Scope
from furnace.storage.duckdb.db import Database

# The latest, not withdrawn, version of every library elixir.
_LATEST_LIBRARY = (
    "FROM elixir_versions e WHERE origin = 'library' AND deleted_at IS NULL "
    "AND version = (SELECT max(version) FROM elixir_versions x WHERE x.id = e.id)"
)
# An optional equality filter: binds the value twice (NULL = no filter).
_EQ = "(CAST(? AS VARCHAR) IS NULL OR {col} = ?)"
_TIME = "(CAST(? AS TIMESTAMP) IS NULL OR {col} >= ?) AND (CAST(? AS TIMESTAMP) IS NULL OR {col} < ?)"


def _naive(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=None) if value and value.tzinfo else value


class DuckDBAssistData:
    """The assistant's :class:`~furnace.assistant.results.AssistData` on DuckDB."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        return self.db.query_dicts(sql, params)

    def catalogue(self) -> Catalogue:
        personas = self._rows(f"SELECT id, name {_LATEST_LIBRARY}", [])
        experiments = self._rows("SELECT experiment_id, name FROM experiments", [])
        return Catalogue(
            personas={r["id"]: r["name"] for r in personas},
            experiments={r["experiment_id"]: r["name"] for r in experiments},
        )

    def top_agents(self, scope: Scope, limit: int) -> list[dict[str, Any]]:
        sql = (
            "SELECT agent_id, experiment_id, max(fitness) AS fitness, min(generation) AS generation, "
            "any_value(operator) AS operator, min(created_at) AS created_at "
            "FROM experiment_individuals i "
            "WHERE " + _EQ.format(col="experiment_id") + " "
            "AND (CAST(? AS VARCHAR) IS NULL OR CAST(parents AS VARCHAR) LIKE '%' || ? || '%') AND "
            + _TIME.format(col="created_at")
            + " GROUP BY agent_id, experiment_id ORDER BY fitness DESC, agent_id LIMIT ?"
        )
        s = scope
        return self._rows(sql, [s.experiment, s.experiment, s.persona, s.persona, *self._t(s), limit])

    def revisions(self, scope: Scope, limit: int) -> list[dict[str, Any]]:
        sql = (
            "SELECT id AS revision_id, content_id, persona_id, from_version, to_version, suggestions, created_at "
            "FROM revisions WHERE "
            + _EQ.format(col="persona_id")
            + " AND "
            + _TIME.format(col="created_at")
            + " ORDER BY created_at DESC, id LIMIT ?"
        )
        rows = self._rows(sql, [scope.persona, scope.persona, *self._t(scope), limit])
        for row in rows:
            suggestions = json.loads(row.pop("suggestions") or "[]")
            row["suggestion"] = " / ".join(str(s) for s in suggestions)
            row["step"] = f"V{row.pop('from_version')}→V{row.pop('to_version')}"
        return rows

    def preferences(self, scope: Scope, limit: int) -> list[dict[str, Any]]:
        sql = f"SELECT id, body {_LATEST_LIBRARY} AND {_EQ.format(col='id')} ORDER BY id"
        out = []
        for row in self._rows(sql, [scope.persona, scope.persona]):
            body = json.loads(row["body"])
            for pref in body.get("style_preferences") or []:
                out.append(
                    {
                        "persona_id": row["id"],
                        "dimension": pref.get("dimension"),
                        "value": pref.get("value"),
                        "count": pref.get("count", 1),
                        "weight": pref.get("weight"),
                        "evidence": pref.get("evidence", ""),
                    }
                )
        out.sort(key=lambda p: (-(p["count"] or 0), -(p["weight"] or 0), p["persona_id"], p["dimension"] or ""))
        return out[:limit]

    def experiments(self, scope: Scope, limit: int) -> list[dict[str, Any]]:
        sql = (
            "SELECT e.experiment_id, e.name, e.status, e.model, e.created_at, "
            "(SELECT max(best_fitness) FROM experiment_generations g WHERE g.experiment_id = e.experiment_id) "
            "AS best_fitness FROM experiments e WHERE "
            + _EQ.format(col="e.experiment_id")
            + " AND "
            + _TIME.format(col="e.created_at")
            + " ORDER BY e.created_at DESC LIMIT ?"
        )
        return self._rows(sql, [scope.experiment, scope.experiment, *self._t(scope), limit])

    def personas(self, scope: Scope, limit: int) -> list[dict[str, Any]]:
        sql = f"SELECT id, name, version, body {_LATEST_LIBRARY} AND {_EQ.format(col='id')} ORDER BY id LIMIT ?"
        rows = self._rows(sql, [scope.persona, scope.persona, limit])
        for row in rows:
            body = json.loads(row.pop("body"))
            row["language"] = body.get("language")
            row["expertise"] = ", ".join(body.get("expertise") or [])
        return rows

    def costs(self, scope: Scope, limit: int) -> list[dict[str, Any]]:
        sql = (
            "SELECT task, count(*) FILTER (WHERE NOT cached) AS calls, count(*) FILTER (WHERE cached) AS cached_calls, "
            "sum(prompt_tokens + completion_tokens) AS tokens, round(sum(cost_usd), 6) AS cost_usd FROM llm_calls "
            "WHERE (CAST(? AS VARCHAR) IS NULL OR run_id LIKE ? || '%') AND "
            + _TIME.format(col="created_at")
            + " GROUP BY task ORDER BY calls DESC, task LIMIT ?"
        )
        return self._rows(sql, [scope.experiment, scope.experiment, *self._t(scope), limit])

    @staticmethod
    def _t(scope: Scope) -> list[Any]:
        since, until = _naive(scope.since), _naive(scope.until)
        return [since, since, until, until]

    # --- sessions ----------------------------------------------------------

    def load_state(self, session_id: str) -> AssistantState:
        rows = self.db.query("SELECT state FROM assistant_sessions WHERE session_id = ?", [session_id])
        if not rows:
            return AssistantState(session_id=session_id)
        return AssistantState.model_validate_json(rows[0][0])

    def save_state(self, state: AssistantState) -> None:
        self.db.execute(
            "INSERT INTO assistant_sessions (session_id, state, updated_at) VALUES (?, ?, current_timestamp) "
            "ON CONFLICT (session_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
            [state.session_id, state.model_dump_json()],
        )
