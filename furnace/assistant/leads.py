"""Template leads: one sentence written in code when no model is needed.

A lead points at the table without retyping it: the count and the one row worth
noticing, in the question's language.
"""

from __future__ import annotations

from typing import Any

from furnace.assistant.results import StructuredResult
from furnace.domain.text import signed


def _num(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _tested(row: dict[str, Any], zh: bool) -> str:
    """An agent's held-out figures as a lead says them: test fitness with its 95% interval and the
    train-test gap, or that it was not tested (``test`` as the result shows it)."""
    test, gap = row.get("test"), row.get("train_test_gap")
    if row.get("test_fitness") is None:
        return f"测试集：{test}" if zh else f"test: {test}"
    gap_text = "" if gap is None else f"，训练−测试差 {signed(gap)}" if zh else f", train − test gap {signed(gap)}"
    return (f"测试集 {test}" if zh else f"test {test}") + gap_text


def _gap_lead(result: StructuredResult, zh: bool) -> str:
    """The lead of rows ordered by their train-test gap: the first one's gap and figures, and how many rows
    have none (not tested)."""
    n = len(result.items)
    first = result.items[0]
    subject = first.get("agent_id")
    if subject is None:  # an experiment's row: its champion's figures
        subject = f"{first.get('experiment_id')} 的冠军 {first.get('champion')}" if zh else f"{first.get('champion')}"
        subject += "" if zh else f" ({first.get('experiment_id')}'s champion)"
    largest = result.order == "largest_gap"
    untested = sum(1 for r in result.items if r.get("train_test_gap") is None)
    if untested == n:
        return (
            f"这 {n} 行都没有测试集成绩，没有训练−测试差可比。"
            if zh
            else f"None of the {n} rows was tested: no gap to order by."
        )
    train, test = _num(first.get("train_fitness")), first.get("test")
    gap = signed(first["train_test_gap"])
    rest = (f"；{untested} 行未测试，排在最后" if zh else f"; {untested} not tested, listed last") if untested else ""
    if zh:
        end_zh = "最大" if largest else "最小"
        return f"共 {n} 行，训练−测试差{end_zh}的是 {subject}（{gap}：训练 {train}，测试集 {test}）{rest}。"
    end = "largest" if largest else "smallest"
    return f"{n} row(s); the {end} train − test gap is {subject}: {gap} (train {train}, test {test}){rest}."


def template_lead(result: StructuredResult, zh: bool) -> str:
    """A one-sentence lead for ``result`` (by its intent), in zh or en."""
    n = len(result.items)
    if n == 0:
        return "没有符合范围的记录。" if zh else "Nothing matches this scope yet."
    first = result.items[0]
    intent = result.intent
    if result.order is not None:
        return _gap_lead(result, zh)
    if intent == "count":
        what, count = first["what"], first["count"]
        return f"共有 {count} 个{what}。" if zh else f"{count} {what.removesuffix('s')}(s) in all."
    if intent == "seeds":
        best = f"{first['persona_id']}（{_num(first['fitness'])}，{first['experiment_id']}；{_tested(first, zh)}）"
        best_en = f"{first['persona_id']} ({_num(first['fitness'])} in {first['experiment_id']}; {_tested(first, zh)})"
        return (
            f"共 {n} 条种子记录；表现最好的种子人设是 {best}。"
            if zh
            else f"{n} seed run(s); the best seed persona is {best_en}."
        )
    if intent == "agents":
        return f"共 {n} 个智能体。" if zh else f"{n} agent(s)."
    if intent == "personas":
        return f"共 {n} 个人设。" if zh else f"{n} persona(s)."
    if intent == "compare":
        scored = [r for r in result.items if r.get("fitness") is not None]
        if not scored:
            return f"并排对比 {n} 项。" if zh else f"{n} subjects side by side."
        if len(scored) == 1:  # the others have no score: a failed step, or rejected on their minibatch
            one, others = scored[0], [r["subject"] for r in result.items if r.get("fitness") is None]
            return (
                f"并排对比 {n} 项；只有 {one['subject']} 有得分（{_num(one['fitness'])}；{_tested(one, zh)}），"
                f"{'、'.join(others)} 没有得分（有一步失败，或反思子代在小批次上落败）。"
                if zh
                else f"{n} subjects side by side; only {one['subject']} has a score ({_num(one['fitness'])}; "
                f"{_tested(one, zh)}): {', '.join(others)} {'has' if len(others) == 1 else 'have'} none (a step "
                "failed, or a reflected child lost on its minibatch)."
            )
        top = max(scored, key=lambda r: r["fitness"])
        rest = ", ".join(f"{r['subject']} {_num(r['fitness'])}" for r in scored if r is not top)
        return (
            f"并排对比 {n} 项；适应度最高的是 {top['subject']}（{_num(top['fitness'])}，对比 {rest}；"
            f"{top['subject']} 的{_tested(top, zh)}）。"
            if zh
            else f"{n} subjects side by side; {top['subject']} has the highest fitness "
            f"({_num(top['fitness'])} vs {rest}; {top['subject']}'s {_tested(top, zh)})."
        )
    if intent == "top_agents":
        best = f"{first['agent_id']} ({_num(first['fitness'])}; {_tested(first, zh)})"
        best_zh = f"{first['agent_id']}（{_num(first['fitness'])}；{_tested(first, zh)}）"
        agents = len({r.get("agent_id") for r in result.items})  # a row is an agent (the data layer's rule)
        if agents != n:  # rows per (agent, experiment) from another data layer: never count rows as agents
            return (
                f"{agents} 个智能体共 {n} 个得分，最佳是 {best_zh}。"
                if zh
                else f"{n} score(s) of {agents} agent(s); the best is {best}."
            )
        return f"共 {n} 个智能体，最佳是 {best_zh}。" if zh else f"{n} agent(s); the best is {best}."
    if intent == "operators":
        rate = first.get("success_rate")
        shown = f"{rate:.0%}" if isinstance(rate, float) else "—"
        return (
            f"{n} 个算子；{first['operator']} 最常超过亲本（{shown}，共 {first['children']} 个后代）。"
            if zh
            else f"{n} operator(s); {first['operator']} beat its parents most often ({shown} of "
            f"{first['children']} children)."
        )
    if intent in ("ancestors", "descendants"):
        deepest = max(int(r.get("depth") or 0) for r in result.items)
        noun = ("祖先" if intent == "ancestors" else "后代") if zh else intent[:-1] + " link(s)"
        return f"共 {n} 条{noun}，最深 {deepest} 代。" if zh else f"{n} {noun}, up to {deepest} generation(s) deep."
    if intent == "common_ancestors":
        return (
            f"共 {n} 个共同祖先，最近的是 {first['ancestor']}。"
            if zh
            else f"{n} common ancestor(s); the nearest is {first['ancestor']}."
        )
    if intent == "persona_versions":
        ids = {r["id"] for r in result.items}
        return (
            f"{len(ids)} 个人设共 {n} 个版本；最新是 {first['id']} v{first['version']}。"
            if zh
            else f"{n} version(s) of {len(ids)} persona(s); the newest is {first['id']} v{first['version']}."
        )
    if intent == "persona_diff":
        if first.get("field") == "(error)":
            return str(first["after"])
        return (
            f"{first['id']} 从 v{first['from_version']} 到 v{first['to_version']} 共有 {n} 处变化。"
            if zh
            else f"{n} change(s) from v{first['from_version']} to v{first['to_version']} of {first['id']}."
        )
    if intent == "failures":
        return (
            f"共 {n} 条失败记录，最近的在 {first['where']}。"
            if zh
            else f"{n} failure(s); the latest in {first['where']}."
        )
    if intent == "judge_feedback":
        return (
            f"共 {n} 条评委反馈，最弱的是 {first['agent_id']} 在 {first['probe']} 上的 {first['scorer']}。"
            if zh
            else f"{n} judge note(s); the weakest is {first['scorer']} for {first['agent_id']} on {first['probe']}."
        )
    if intent == "experiment_compare":
        top = max(result.items, key=lambda r: r.get("best_fitness") or 0)
        champion = (
            (
                f"；冠军 {top['champion']} 的{_tested(top, zh)}"
                if zh
                else f"; champion {top['champion']}'s {_tested(top, zh)}"
            )
            if top.get("champion")
            else ""
        )
        return (
            f"对比 {n} 个实验；最佳适应度最高的是 {top['experiment_id']}（{_num(top['best_fitness'])}{champion}）。"
            if zh
            else f"{n} experiment(s) side by side; the highest best fitness is {top['experiment_id']} "
            f"({_num(top['best_fitness'])}{champion})."
        )
    if intent == "preferences":
        return (
            f"共 {n} 条偏好，最强的是 {first['dimension']} → {first['value']}。"
            if zh
            else f"{n} preference(s); the strongest is {first['dimension']} → {first['value']}."
        )
    if intent == "costs":
        calls = sum(int(r.get("calls") or 0) for r in result.items)
        cost = sum(float(r.get("cost_usd") or 0) for r in result.items)
        failed = sum(int(r.get("failed_attempts") or 0) for r in result.items)
        extra = (f"，另有 {failed} 次失败尝试" if zh else f", plus {failed} failed attempt(s)") if failed else ""
        return (
            f"共 {calls} 次模型调用{extra}，花费 ${cost:.4f}。"
            if zh
            else f"{calls} model call(s){extra} costing ${cost:.4f} in all."
        )
    return f"{result.title}：共 {n} 条。" if zh else f"{result.title}: {n} row(s)."
