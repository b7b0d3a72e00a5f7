"""From an intent and a query to a structured result (the data layer does the reading).

:data:`SHAPES` is the assistant's whole vocabulary: for every intent, its title,
its columns, and which scope fields its read applies. A locked or inferred scope
field that an intent cannot apply is named in the result ("not applied: …"), so
the scope line never claims a filter that did not happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from furnace.assistant.results import Action, AssistData, GapOrder, Query, StructuredResult
from furnace.assistant.scope import Scope
from furnace.domain.intents import Intent

ScopeField = Literal["persona", "experiment", "time"]


@dataclass(frozen=True)
class Shape:
    """An intent's title, columns and the scope its read applies.

    ``agent_col`` / ``operator_col`` / ``language_col``: the column an agent, operator or language
    filter is applied on (after the read); intents that read from an agent (lineage, judge feedback)
    take a locked agent as their subject instead.
    """

    kind: Literal["list", "stats"]
    title_en: str
    title_zh: str
    columns: tuple[str, ...]
    applies: tuple[ScopeField, ...]
    example_en: str
    example_zh: str
    agent_col: str | None = None
    operator_col: str | None = None
    language_col: str | None = None


_ALL: tuple[ScopeField, ...] = ("persona", "experiment", "time")
TESTED = ("train_fitness", "test", "train_test_gap")
"""Shown beside an agent's (or an experiment's champion's) fitness: its held-out figures as the data layer
reads them from the experiment's summary — train fitness, ``test`` (the test fitness with its 95% interval,
"not tested" where the agent was not scored on the test probes) and the train-test gap."""
INTERVAL = ("test_fitness", "test_low", "test_high")
"""The numbers behind ``test``, kept in every row that shows it (JSON, the app) though not a column."""
NOT_TESTED = {False: "not tested", True: "未测试"}
COST_COLUMNS = ("calls", "cached_calls", "failed_attempts", "tokens", "cost_usd")
SHAPES: dict[str, Shape] = {
    "top_agents": Shape(
        "list",
        "Best agents",
        "得分最高的智能体",
        ("agent_id", "experiment_id", "generation", "fitness", *TESTED, "operator", "created_at"),
        _ALL,
        "which agents scored best in the last experiment?",
        "最近一次实验里表现最好的是谁？",
        agent_col="agent_id",
        operator_col="operator",
    ),
    "agents": Shape(
        "list",
        "Agents",
        "智能体",
        ("agent_id", "operator", "parents", "experiment_id", "generation", "fitness", *TESTED, "created_at"),
        _ALL,
        "which agents used ensemble?",
        "哪些智能体用了 ensemble？",
        agent_col="agent_id",
        operator_col="operator",
    ),
    "count": Shape(
        "stats",
        "How many",
        "数量",
        ("what", "count"),
        _ALL,
        "how many agents are there in total?",
        "一共有多少个智能体？",
    ),
    "seeds": Shape(
        "list",
        "Seed personas by fitness",
        "种子人设（按适应度）",
        ("persona_id", "experiment_id", "fitness", *TESTED, "failures", "created_at"),
        _ALL,
        "which seed persona did best?",
        "哪个种子人设表现最好？",
    ),
    "compare": Shape(
        "stats",
        "Side by side",
        "并排对比",
        (
            "subject",
            "kind",
            "name",
            "operator",
            "experiment_id",
            "fitness",
            *TESTED,
            "parents",
            "descendants",
            "best_descendant_fitness",
        ),
        (),
        "compare agt-… and tea-master",
        "帮我比较 agt-… 和 tea-master",
    ),
    "operators": Shape(
        "stats",
        "Operators: children bred and how often they beat their parents",
        "算子统计：产出的后代及其超过亲本的比例",
        ("operator", "children", "improved", "success_rate", "mean_fitness", "best_fitness", "failures"),
        _ALL,
        "which operator worked best?",
        "哪个算子效果最好？",
        operator_col="operator",
    ),
    "ancestors": Shape(
        "list",
        "Ancestors",
        "祖先",
        ("depth", "ancestor", "kind", "child", "operator", "parent_version"),
        ("persona",),
        "where did agt-… come from?",
        "agt-… 的祖先有哪些？",
    ),
    "descendants": Shape(
        "list",
        "Descendants",
        "后代",
        ("depth", "descendant", "parent", "operator", "parent_version"),
        ("persona", "experiment"),
        "show agents descended from go-reviewer",
        "go-reviewer 有哪些后代？",
        operator_col="operator",
    ),
    "common_ancestors": Shape(
        "list",
        "Common ancestors",
        "共同祖先",
        ("ancestor", "kind", "depth_a", "depth_b"),
        ("persona",),
        "what are the common ancestors of agt-… and agt-…?",
        "agt-… 和 agt-… 的共同祖先是谁？",
    ),
    "persona_versions": Shape(
        "list",
        "Persona versions",
        "人设版本",
        ("id", "version", "name", "content_hash", "created_at", "deleted"),
        ("persona", "time"),
        "what versions does tea-master have?",
        "tea-master 有哪些版本？",
    ),
    "persona_diff": Shape(
        "list",
        "What changed between versions",
        "版本之间的变化",
        ("id", "from_version", "to_version", "field", "before", "after"),
        ("persona",),
        "what changed between v1 and v2 of tea-master?",
        "tea-master 第1版和第2版有什么区别？",
    ),
    "failures": Shape(
        "list",
        "Failures and their reasons",
        "失败记录及原因",
        ("where", "subject", "what", "reason", "created_at"),
        _ALL,
        "what failed in the last experiment?",
        "最近一次实验有哪些失败？",
        agent_col="subject",
    ),
    "judge_feedback": Shape(
        "list",
        "Judge feedback (weakest first)",
        "评委反馈（最弱的在前）",
        ("agent_id", "experiment_id", "probe", "scorer", "value", "feedback", "reason"),
        _ALL,
        "what did the judge say about the best agent?",
        "评委给了什么反馈？",
    ),
    "experiment_compare": Shape(
        "stats",
        "Experiments side by side",
        "实验对比",
        (
            "experiment_id",
            "name",
            "generations",
            "best_fitness",
            "mean_fitness",
            "champion",
            *TESTED,
            "calls",
            "tokens",
            "cost_usd",
        ),
        ("persona", "experiment", "time"),
        "compare my experiments",
        "对比一下这些实验",
    ),
    "content_versions": Shape(
        "list",
        "Content versions",
        "内容版本",
        ("content_id", "persona_id", "topic", "version", "title", "source", "created_at"),
        ("persona", "time"),
        "show the versions of my articles",
        "我的文章有哪些版本？",
    ),
    "arena_runs": Shape(
        "list",
        "Arena runs",
        "群聊运行记录",
        ("run_id", "session_id", "turn", "message", "directive", "status", "replies", "created_at"),
        ("persona", "time"),
        "show the arena runs",
        "群聊里最近跑了什么？",
    ),
    "revisions": Shape(
        "list",
        "Revisions",
        "修订记录",
        ("revision_id", "content_id", "persona_id", "step", "suggestion", "created_at"),
        ("persona", "time"),
        "show the coach persona's revisions this week",
        "这周的修订记录",
    ),
    "preferences": Shape(
        "list",
        "Learned style preferences",
        "学到的风格偏好",
        ("persona_id", "dimension", "value", "count", "weight", "evidence"),
        ("persona",),
        "what did the coach persona learn?",
        "学到了哪些偏好？",
    ),
    "experiments": Shape(
        "list",
        "Experiments",
        "实验",
        ("experiment_id", "name", "status", "best_fitness", "champion", *TESTED, "model", "created_at"),
        ("persona", "experiment", "time"),
        "list the experiments",
        "有哪些实验？",
    ),
    "personas": Shape(
        "list",
        "Personas",
        "人设",
        ("id", "name", "language", "version", "expertise"),
        ("persona",),
        "list the personas written in Chinese",
        "中文的人设有哪些？",
        language_col="language",
    ),
    "costs": Shape(
        "stats",
        "Model calls and cost",
        "模型调用与花费",
        ("task", *COST_COLUMNS),
        _ALL,
        "how many model calls did my experiment cost?",
        "这周每天花了多少？",
    ),
}
_GROUP_COLUMN = {
    "task": "task",
    "experiment": "experiment_id",
    "persona": "persona_id",
    "operator": "operator",
    "day": "day",
}


def examples(zh: bool, k: int = 3) -> list[str]:
    """Example questions the assistant answers (for "I can't answer that")."""
    picks = ("operators", "costs", "top_agents") if k <= 3 else tuple(SHAPES)
    return [SHAPES[i].example_zh if zh else SHAPES[i].example_en for i in picks][:k]


AGENT_SUBJECT = ("ancestors", "descendants", "common_ancestors", "judge_feedback")
"""Intents whose read starts from an agent: a locked agent becomes their subject."""
READ_ALL = 100_000
"""The row limit of a read whose rows are filtered or counted afterwards."""
_COUNTED: dict[str, tuple[Intent, str, str, str]] = {  # what is counted -> (read, id column, en, zh)
    "agents": ("agents", "agent_id", "agents", "智能体"),
    "personas": ("personas", "id", "personas", "人设"),
    "experiments": ("experiments", "experiment_id", "experiments", "实验"),
}


def applied_scope(intent: str, scope: Scope) -> tuple[Scope, list[str]]:
    """The part of ``scope`` the intent's read applies, and the names of the fields it cannot apply."""
    shape = SHAPES[intent]
    applies = shape.applies
    kept: dict[str, Any] = {}
    skipped: list[str] = []
    for field, value in (("persona", scope.persona), ("experiment", scope.experiment)):
        if value is None:
            continue
        if field in applies:
            kept[field] = value
        else:
            skipped.append(f"{field}={value}")
    if scope.since or scope.until:
        if "time" in applies:
            kept.update(since=scope.since, until=scope.until)
        else:
            skipped.append("time")
    for field, value, can in (
        ("agent", scope.agent, intent in AGENT_SUBJECT or shape.agent_col is not None),
        ("operator", scope.operator, shape.operator_col is not None),
    ):
        if value is None:
            continue
        if can:
            kept[field] = value
        else:
            skipped.append(f"{field}={value}")
    return Scope(**kept), skipped


def _matches(cell: Any, value: str) -> bool:
    """A row's cell holds ``value`` (a cell may list several: "crossover, ensemble")."""
    if cell is None:
        return False
    return value.casefold() in {part.strip().casefold() for part in str(cell).split(",")}


def _read(data: AssistData, intent: Intent, query: Query) -> tuple[list[dict[str, Any]], Query, str]:
    """The rows of ``intent`` within the scope it can apply, the query as run, and the applied-scope label."""
    shape = SHAPES[intent]
    scope, skipped = applied_scope(intent, query.scope)
    update: dict[str, Any] = {"scope": scope}
    if intent == "costs" and scope.persona and query.group == "task":
        update["group"] = "experiment"  # per-agent accounting has no model task
    if intent == "costs" and scope.operator:
        update["group"] = "operator"  # an operator in scope: its row of the per-operator totals
    if scope.agent and intent in AGENT_SUBJECT and not query.agents:
        update["agents"] = (scope.agent,)
    filters: dict[str, str] = {}
    if scope.agent and shape.agent_col and intent not in AGENT_SUBJECT:
        filters[shape.agent_col] = scope.agent
    if scope.operator and shape.operator_col:
        filters[shape.operator_col] = scope.operator
    language = ""
    if query.language:
        if shape.language_col:
            filters[shape.language_col] = query.language
            language = f"language={query.language}"
        else:
            skipped.append(f"language={query.language}")
    by_gap = by_train_test_gap(intent, query)
    if filters or by_gap:
        update["limit"] = READ_ALL
    ran = query.model_copy(update=update)
    rows: list[dict[str, Any]] = getattr(data, intent)(ran)
    if filters:
        rows = [r for r in rows if all(_matches(r.get(c), v) for c, v in filters.items())]
    if by_gap:
        rows = _by_gap(rows, largest_first=query.order == "largest_gap")
    if filters or by_gap:
        rows = rows[: query.limit]
    applied = " · ".join(p for p in (scope.label() if not scope.is_empty() or not language else "", language) if p)
    if skipped:
        applied += " · not applied: " + ", ".join(skipped)
    return rows, ran, applied


def by_train_test_gap(intent: str, query: Query) -> bool:
    """Whether ``query`` orders ``intent``'s rows by the train-test gap: asked for, and a list showing it."""
    shape = SHAPES.get(intent)
    return query.order is not None and shape is not None and shape.kind == "list" and "train_test_gap" in shape.columns


def _by_gap(rows: list[dict[str, Any]], *, largest_first: bool) -> list[dict[str, Any]]:
    """``rows`` by their train-test gap (largest or smallest first), the rows without one (not tested) last
    in their own order."""
    gapped = [r for r in rows if isinstance(r.get("train_test_gap"), int | float)]
    gapped.sort(key=lambda r: float(r["train_test_gap"]), reverse=largest_first)
    return gapped + [r for r in rows if not isinstance(r.get("train_test_gap"), int | float)]


def _localised(applied: str, zh: bool) -> str:
    return applied.replace(" · not applied: ", " · 未应用：") if zh else applied


def run_query(data: AssistData, intent: Intent, query: Query, *, zh: bool) -> StructuredResult:
    """Run the read for ``intent`` with the scope it can apply, and shape it for display."""
    if intent == "count":
        return _count(data, query, zh=zh)
    if intent == "compare":
        return _compare(data, query, zh=zh)
    shape = SHAPES[intent]
    rows, ran, applied = _read(data, intent, query)
    scope = ran.scope
    columns = list(shape.columns)
    if intent == "costs":
        columns = [_GROUP_COLUMN[ran.group], *COST_COLUMNS]
    applied = _localised(applied, zh)
    title = shape.title_zh if zh else shape.title_en
    shown = applied.split(" · 未应用：")[0].split(" · not applied: ")[0]
    if shown != "everything":
        title = f"{title} · {shown}"
    order = query.order if by_train_test_gap(intent, query) else None
    if order is not None:
        largest = order == "largest_gap"
        title += (
            f" · 按训练−测试差（{'最大' if largest else '最小'}在前）"
            if zh
            else f" · by train − test gap ({'largest' if largest else 'smallest'} first)"
        )
    if intent == "costs" and scope.persona:
        applied += (
            f"（{scope.persona} 培育出的智能体的花费）" if zh else f" (costs of agents bred from {scope.persona})"
        )
    return _result(intent, shape, title, columns, rows, applied, zh, order=order)


def _result(
    intent: str,
    shape: Shape,
    title: str,
    columns: list[str],
    rows: list[dict[str, Any]],
    applied: str,
    zh: bool,
    *,
    order: GapOrder | None = None,
) -> StructuredResult:
    return StructuredResult(
        type=shape.kind,
        title=title,
        columns=columns,
        items=[_item(row, columns, zh) for row in rows],
        actions=_actions(intent, rows, zh),
        context=f"{len(rows)} row(s) for {intent} within {applied}" + (f", ordered by {order}" if order else ""),
        intent=intent,
        applied=applied,
        order=order,
    )


def _item(row: dict[str, Any], columns: list[str], zh: bool) -> dict[str, Any]:
    """A row's shown columns; beside a ``test`` column, the numbers behind it, and "not tested" (never 0)
    where the agent was not scored on the test probes."""
    item = {c: row.get(c) for c in columns}
    if "test" in columns:
        item.update({k: row.get(k) for k in INTERVAL})
        if item["test"] is None:
            item["test"] = NOT_TESTED[zh]
    return item


def _count(data: AssistData, query: Query, *, zh: bool) -> StructuredResult:
    """How many agents, personas or experiments lie within the scope (one figure)."""
    read, key, en, cn = _COUNTED[query.counting or "agents"]
    rows, _, applied = _read(data, read, query.model_copy(update={"limit": READ_ALL}))
    n = len({r.get(key) for r in rows})
    applied = _localised(applied, zh)
    shape = SHAPES["count"]
    title = f"{shape.title_zh if zh else shape.title_en} · {cn if zh else en}"
    return _result("count", shape, title, ["what", "count"], [{"what": cn if zh else en, "count": n}], applied, zh)


def _best(rows: list[dict[str, Any]]) -> float | None:
    values = [r["fitness"] for r in rows if r.get("fitness") is not None]
    return max(values) if values else None


def _held_out(row: dict[str, Any]) -> dict[str, Any]:
    """The held-out figures the data layer put on ``row`` (the shown ones and the numbers behind ``test``)."""
    return {k: row.get(k) for k in (*TESTED, *INTERVAL)}


def _compare(data: AssistData, query: Query, *, zh: bool) -> StructuredResult:
    """Agents and personas side by side: what each is, how fit, and what was bred from it."""
    rows: list[dict[str, Any]] = []
    for subject in query.subjects:
        bred = data.agents(Query(scope=Scope(persona=subject), limit=READ_ALL))
        common = {"subject": subject, "descendants": len(bred), "best_descendant_fitness": _best(bred)}
        if subject.startswith("agt-"):
            own = next(iter(data.agents(Query(scope=Scope(agent=subject), limit=1))), {})
            rows.append(
                {
                    **common,
                    "kind": "agent",
                    "name": None,
                    "operator": own.get("operator"),
                    "experiment_id": own.get("experiment_id"),
                    "fitness": own.get("fitness"),
                    **_held_out(own),
                    "parents": own.get("parents"),
                }
            )
            continue
        persona = next(iter(data.personas(Query(scope=Scope(persona=subject), limit=1))), {})
        seeds = data.seeds(Query(scope=Scope(persona=subject), limit=READ_ALL))
        best = max((r for r in seeds if r.get("fitness") is not None), key=lambda r: r["fitness"], default={})
        rows.append(
            {
                **common,
                "kind": "persona",
                "name": persona.get("name"),
                "operator": "seed" if seeds else None,
                "experiment_id": ", ".join(sorted({r["experiment_id"] for r in seeds})) or None,
                "fitness": best.get("fitness"),  # as a seed of an experiment
                **_held_out(best),
                "parents": None,
            }
        )
    shape = SHAPES["compare"]
    _, skipped = applied_scope("compare", query.scope)
    applied = "everything" + (" · not applied: " + ", ".join(skipped) if skipped else "")
    title = f"{shape.title_zh if zh else shape.title_en} · {' vs '.join(query.subjects)}"
    return _result("compare", shape, title, list(shape.columns), rows, _localised(applied, zh), zh)


def _open(zh: bool) -> str:
    return "打开 " if zh else "Open "


def _actions(intent: str, rows: list[dict[str, Any]], zh: bool) -> list[Action]:
    actions: list[Action] = []
    agent_key = {
        "top_agents": "agent_id",
        "agents": "agent_id",
        "descendants": "descendant",
        "judge_feedback": "agent_id",
    }.get(intent)
    if agent_key and rows:
        agents = list(dict.fromkeys(r[agent_key] for r in rows if str(r.get(agent_key, "")).startswith("agt-")))
        for agent in agents[:3]:
            actions.append(Action(kind="open_agent", label=_open(zh) + agent, target={"agent_id": agent}))
        if intent == "top_agents" and len(agents) >= 2:
            label = "对比前几名" if zh else "Compare the top agents"
            actions.append(Action(kind="compare", label=label, target={"agent_ids": agents[:4]}))
        exp = rows[0].get("experiment_id")
        if intent == "top_agents" and exp:
            label = ("锁定到 " if zh else "Lock scope to ") + exp
            actions.append(Action(kind="lock_scope", label=label, target={"experiment": exp}))
    persona_ids = sorted({r["persona_id"] for r in rows if r.get("persona_id")})
    if intent in ("revisions", "preferences", "content_versions") and len(persona_ids) == 1:
        label = ("锁定到 " if zh else "Lock scope to ") + persona_ids[0]
        actions.append(Action(kind="lock_scope", label=label, target={"persona": persona_ids[0]}))
    if intent in ("personas", "persona_versions", "seeds"):
        key = "persona_id" if intent == "seeds" else "id"
        for pid in list(dict.fromkeys(r[key] for r in rows))[:3]:
            actions.append(Action(kind="open_persona", label=_open(zh) + pid, target={"persona": pid}))
    return actions
