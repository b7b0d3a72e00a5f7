"""Template leads: one sentence written in code when no model is needed."""

from __future__ import annotations

from furnace.assistant.results import StructuredResult


def template_lead(result: StructuredResult, zh: bool) -> str:
    """A one-sentence lead that points at the table without retyping it."""
    n = len(result.items)
    if n == 0:
        return "没有符合范围的记录。" if zh else "Nothing matches this scope yet."
    first = result.items[0]
    if "fitness" in first and first.get("agent_id"):
        best = (
            f"{first['agent_id']}（适应度 {first['fitness']:.3f}）"
            if zh
            else f"{first['agent_id']} (fitness {first['fitness']:.3f})"
        )
        return f"共 {n} 条，最佳是 {best}。" if zh else f"{n} agent(s); the best is {best}."
    if "dimension" in first:
        return (
            f"共 {n} 条偏好，最强的是 {first['dimension']} → {first['value']}。"
            if zh
            else f"{n} preference(s); the strongest is {first['dimension']} → {first['value']}."
        )
    if "cost_usd" in first:
        calls = sum(int(r.get("calls") or 0) for r in result.items)
        cost = sum(float(r.get("cost_usd") or 0) for r in result.items)
        return (
            f"共 {calls} 次模型调用，花费 ${cost:.4f}。" if zh else f"{calls} model call(s) costing ${cost:.4f} in all."
        )
    return f"{result.title}：共 {n} 条。" if zh else f"{result.title}: {n} row(s)."
