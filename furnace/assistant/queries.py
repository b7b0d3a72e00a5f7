"""From an intent and a scope to a structured result (the data layer does the reading)."""

from __future__ import annotations

from typing import Any

from furnace.assistant.intent import Intent
from furnace.assistant.results import Action, AssistData, StructuredResult
from furnace.assistant.scope import Scope

# intent -> (type, English title, Chinese title, columns)
_SHAPES: dict[str, tuple[str, str, str, list[str]]] = {
    "top_agents": (
        "list",
        "Best agents",
        "得分最高的智能体",
        ["agent_id", "experiment_id", "generation", "fitness", "operator", "created_at"],
    ),
    "revisions": (
        "list",
        "Revisions",
        "修订记录",
        ["revision_id", "content_id", "persona_id", "step", "suggestion", "created_at"],
    ),
    "preferences": (
        "list",
        "Learned style preferences",
        "学到的风格偏好",
        ["persona_id", "dimension", "value", "count", "weight", "evidence"],
    ),
    "experiments": (
        "list",
        "Experiments",
        "实验",
        ["experiment_id", "name", "status", "best_fitness", "model", "created_at"],
    ),
    "personas": ("list", "Personas", "人设", ["id", "name", "language", "version", "expertise"]),
    "costs": (
        "stats",
        "Model calls and cost",
        "模型调用与花费",
        ["task", "calls", "cached_calls", "tokens", "cost_usd"],
    ),
}


def run_query(data: AssistData, intent: Intent, scope: Scope, *, limit: int, zh: bool) -> StructuredResult:
    """Run the read for ``intent`` within ``scope`` and shape it for display."""
    kind, title_en, title_zh, columns = _SHAPES[intent]
    rows: list[dict[str, Any]] = getattr(data, intent)(scope, limit)
    title = title_zh if zh else title_en
    if not scope.is_empty():
        title = f"{title} · {scope.label()}"
    return StructuredResult(
        type=kind,  # type: ignore[arg-type]
        title=title,
        columns=columns,
        items=[{c: row.get(c) for c in columns} for row in rows],
        actions=_actions(intent, rows, zh),
        context=f"{len(rows)} row(s) for {intent} within {scope.label()}",
    )


def _actions(intent: str, rows: list[dict[str, Any]], zh: bool) -> list[Action]:
    actions: list[Action] = []
    if intent == "top_agents" and rows:
        for row in rows[:3]:
            actions.append(
                Action(
                    kind="open_agent",
                    label=("打开 " if zh else "Open ") + row["agent_id"],
                    target={"agent_id": row["agent_id"]},
                )
            )
        if len(rows) >= 2:
            ids = [r["agent_id"] for r in rows[: min(4, len(rows))]]
            actions.append(
                Action(
                    kind="compare", label="对比前几名" if zh else "Compare the top agents", target={"agent_ids": ids}
                )
            )
        exp = rows[0].get("experiment_id")
        if exp:
            actions.append(
                Action(
                    kind="lock_scope", label=("锁定到 " if zh else "Lock scope to ") + exp, target={"experiment": exp}
                )
            )
    persona_ids = sorted({r["persona_id"] for r in rows if r.get("persona_id")})
    if intent in ("revisions", "preferences") and len(persona_ids) == 1:
        actions.append(
            Action(
                kind="lock_scope",
                label=("锁定到 " if zh else "Lock scope to ") + persona_ids[0],
                target={"persona": persona_ids[0]},
            )
        )
    if intent == "personas":
        for row in rows[:3]:
            actions.append(
                Action(
                    kind="open_persona", label=("打开 " if zh else "Open ") + row["id"], target={"persona": row["id"]}
                )
            )
    return actions
