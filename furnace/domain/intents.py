"""The questions the lab assistant answers, and the rules that name one from a question's words.

Shared by the assistant (rules first) and the offline engine (which falls back on
the same rules for a follow-up question), so both read one vocabulary. Every kind
of fact furnace records has an intent. The rules are ordered: the first that
matches wins, so the more specific questions come first ("which operator scored
best" is about operators, not the best agents; "how many calls did my experiment
cost" is about costs, not experiments).

Each rule has a *strong* pattern (words that name the intent on their own) and an
optional *weak* one (a generic word such as "runs" or "history" that only hints at
it). :func:`rule_matches` reports both, so the assistant can tell a sure reading
from a guess: a strong match beats any weak one; a weak match that another
intent's weak match contradicts is ambiguous (the assistant asks back).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Intent = Literal[
    "count",
    "seeds",
    "common_ancestors",
    "agents",
    "descendants",
    "ancestors",
    "experiment_compare",
    "persona_diff",
    "compare",
    "operators",
    "judge_feedback",
    "failures",
    "arena_runs",
    "preferences",
    "revisions",
    "content_versions",
    "persona_versions",
    "costs",
    "top_agents",
    "experiments",
    "personas",
]
INTENTS: tuple[Intent, ...] = get_args(Intent)
"""Every intent (the Literal above is the one list)."""

CountSubject = Literal["agents", "personas", "experiments"]

_I = re.I
_RANKED = r"(best|top|highest|strongest|fittest|ranking|ranked|winners?|最强|最好|最优|排名|排行|得分最高)"
_USED = (
    r"\b(used?|using|made (with|by)|bred (with|by|using|via)|produced (by|with)|created (with|by)|"
    r"generated (with|by)|came out of)\b"
)
_ZH_USED = (
    r"(智能体|agents?).{0,8}(用了|使用了?|采用了?|用的是|是用)|"
    r"(用|使用|采用|通过|经过|经)\s*\S{1,20}?\s*(培育|繁殖|产生|生成|得到|做|造|融合)出?来?的(智能体|agents?)"
)
_COUNT_NOUN: dict[CountSubject, str] = {
    "agents": r"(agents?|智能体|个体)",
    "personas": r"(personas?|elixirs?|characters?|人设|角色|丹药)",
    "experiments": r"(experiments?|sweeps?|实验|试验)",
}
_COUNT_WORDS = (
    r"\bhow many\s+(\w+\s+){0,2}?{noun}|\bnumber of\s+(\w+\s+){0,2}?{noun}|\bcount (the |all |of )?(\w+\s+)?{noun}|"
    r"\btotal (number of )?{noun}|"
    r"(多少|几)\s*(个|位|次|种)?\s*\S{0,4}?{noun}|{noun}.{0,8}(有多少|有几个|多少个|几个|数量|总数)"
)


def _count_pattern(noun: str) -> re.Pattern[str]:
    return re.compile(_COUNT_WORDS.replace("{noun}", noun), _I)


_COUNTS: tuple[tuple[CountSubject, re.Pattern[str]], ...] = tuple(
    (subject, _count_pattern(noun)) for subject, noun in _COUNT_NOUN.items()
)


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _I)


# (intent, strong pattern, weak pattern or None), checked in order.
_RULES: tuple[tuple[Intent, re.Pattern[str], re.Pattern[str] | None], ...] = (
    ("count", re.compile("|".join(p.pattern for _, p in _COUNTS), _I), None),
    (
        "seeds",
        _rx(
            r"\bseed\s+(personas?|elixirs?)\b|\bseeds?\b.{0,30}\b(did|do|does|scored?|performed|perform|best|"
            r"worst|rank(ed|ing)?|fitness|compare)\b|\b(best|top|which|rank)\b.{0,20}\bseeds?\b|\bfounders?\b|"
            r"种子|初始人设|起始人设"
        ),
        None,
    ),
    (  # "the best agents bred from X" / "... that used ensemble" ranks agents
        "top_agents",
        _rx(
            _RANKED + r".{0,40}(bred from|descended from|derived from|培育出|衍生|派生)|"
            r"(bred from|descended from|培育出|衍生出).{0,40}" + _RANKED + "|"
            r"\bagents?\b.{0,30}" + _USED + r".{0,40}\b(best|top|highest|strongest|fittest|scored? (best|highest))\b"
        ),
        None,
    ),
    (
        "common_ancestors",
        _rx(
            r"\b(common|shared)\s+(ancestors?|ancestry|parents?|roots?)\b|\bshare\s+(any\s+|an\s+)?"
            r"(ancestors?|ancestry|parents?)\b|共同(的)?(祖先|先祖|亲本|来源)"
        ),
        None,
    ),
    ("agents", _rx(r"\bagents?\b.{0,25}" + _USED + "|" + _ZH_USED), None),
    (
        "descendants",
        _rx(
            r"\b(descend(ed|ants?|s)?|offspring|children|child agents?|bred from|derived from|came from|"
            r"built on|bred out of)\b|后代|子代|衍生|派生|繁衍|培育出"
        ),
        None,
    ),
    (
        "ancestors",
        _rx(
            r"\b(ancest(ors?|ry)|parents?|lineage|family tree|where did .{1,40} come from)\b|"
            r"祖先|亲本|父代|血统|谱系|由.{0,12}(融合|培育|组成)|从哪来|怎么来的"
        ),
        _rx(r"\b(bred|made from)\b"),
    ),
    (
        "experiment_compare",
        _rx(
            r"\b(compare|comparison|versus|vs\.?|side by side|differ)\b.{0,40}\b(experiments?|runs?|sweeps?)\b|"
            r"\b(experiments?|runs?)\b.{0,40}\b(compare|comparison|versus|vs\.?|side by side|head to head)\b|"
            r"\bwhich (experiment|run) (did|was|is|went|worked) better\b|"
            r"(对比|比较|比一比).{0,40}实验|实验.{0,12}(对比|比较|哪个更好|谁更好|区别|差异|有什么不同)|哪个实验(更好|效果更好|表现更好)"
        ),
        None,
    ),
    (
        "persona_diff",
        _rx(
            r"\b(diff|what changed|what's changed|what has changed|changes between)\b|"
            r"\bdifferences? between (v\d+|versions?)\b|\bv\d+\s*(vs\.?|versus|and|to|→|->)\s*v\d+\b|"
            r"(版本|第.{1,3}版).{0,12}(区别|差异|不同|变化)|(改了什么|变了什么|有什么变化)"
        ),
        _rx(r"\bdifferences?\b|区别|差异|有什么不同"),
    ),
    (
        "compare",
        _rx(r"\b(compare|comparison|versus|vs\.?|head to head|side by side)\b|比较|对比|比一比|相比|pk"),
        _rx(r"\bstacks? up\b|\b(better|stronger|fitter) than\b|\bagainst\b|哪个(更)?(好|强)|谁(更)?(好|强)"),
    ),
    (
        "operators",
        _rx(r"\b(operators?|crossover|mutation|reflect(ion|ive)?|ensemble)\b|算子|交叉|变异|突变|融合方式|操作符"),
        None,
    ),
    (
        "judge_feedback",
        _rx(
            r"\b(judge|judges|judged|judging|feedback|critique|critic|why did .{1,40} (score|lose|rank)|"
            r"weak(est)? (replies|answers|points))\b|评语|反馈|评委|裁判|评审|点评|为什么.{0,30}(分低|分数低|扣分)"
        ),
        None,
    ),
    (
        "failures",
        _rx(
            r"\b(fail(ed|ures?|ing|s)?|errors?|broke|broken|crash(ed|es)?|went wrong|unscored|timeouts?)\b|"
            r"失败|出错|错误|报错|崩溃|挂了|超时|出问题|出了什么错|什么错"
        ),
        None,
    ),
    (
        "arena_runs",
        _rx(r"\b(arena|group chats?|roll calls?|count[- ]offs?)\b|群聊|竞技场|报数|对话轮"),
        _rx(r"\b(discussions?|turns?)\b|讨论"),
    ),
    (
        "preferences",
        _rx(r"\b(learn(ed|t|s)?|preferences?|style prefs?|taste|likes)\b|学到|学会|偏好|喜好|口味|风格习惯"),
        None,
    ),
    ("revisions", _rx(r"\b(revisions?|revised|edits?|edited|rewrites?|rewrote)\b|修订|修改|改稿|改写|润色"), None),
    (
        "content_versions",
        _rx(
            r"\b(content|articles?|drafts?|posts?|texts? (written|generated))\b|文章|稿子|草稿|文稿|帖子|内容.{0,6}版本"
        ),
        _rx(r"\bpieces?\b|内容"),
    ),
    ("persona_versions", _rx(r"\b(versions?|version history)\b|版本"), _rx(r"\bhistory\b|历史|历次")),
    (
        "costs",
        _rx(
            r"\b(costs?|spend|spent|tokens?|budget|usd|dollars?|money|bill|"
            r"how many (model )?calls|calls? (did|were|was)|model calls)\b|"
            r"花费|成本|开销|费用|花了多少|多少钱|调用了?多少|多少次(模型)?调用|token"
        ),
        _rx(r"\b(expensive|price)\b"),
    ),
    (
        "top_agents",
        _rx(
            r"\b(best|top|highest|fittest|leaderboard|winners?|champions?|strongest|ranking|ranked)\b|"
            r"得分最高|最好|排行|排名|最优|最强|冠军|第一名"
        ),
        _rx(r"\b(winning|scored?|performed)\b|表现最"),
    ),
    ("experiments", _rx(r"\b(experiments?|sweeps?)\b|实验|试验"), _rx(r"\bruns?\b")),
    (
        "agents",
        _rx(r"\b(list|show|all|every)\b.{0,12}\bagents\b|(所有|全部|列出|有哪些)(的)?智能体"),
        _rx(r"\bagents?\b|智能体"),
    ),
    ("personas", _rx(r"\b(personas?|elixirs?)\b|人设|角色|丹药"), _rx(r"\b(library|characters?)\b|人物")),
)

# "costs ... by day / per persona / by operator / per experiment"
CostGroup = Literal["task", "experiment", "persona", "operator", "day"]
_COST_GROUPS: tuple[tuple[CostGroup, re.Pattern[str]], ...] = (
    ("day", re.compile(r"\b(by|per|each) day\b|\bdaily\b|\bday by day\b|按天|每天|每日|逐日", _I)),
    ("persona", re.compile(r"\b(by|per|each) (persona|elixir)s?\b|按人设|每个人设|各人设", _I)),
    ("operator", re.compile(r"\b(by|per|each) operators?\b|按算子|每个算子|各算子", _I)),
    ("experiment", re.compile(r"\b(by|per|each) (experiment|run)s?\b|按实验|每个实验|各实验|每次实验", _I)),
)

_COST_WORDS = re.compile(r"\b(costs?|spend|spent|tokens?|usd|money|bill)\b|花费|成本|费用|开销|花了", _I)


def rule_matches(text: str) -> list[tuple[Intent, bool]]:
    """Every intent whose rule matches ``text``, in rule order, with whether its strong pattern matched.

    An intent appears once (strong wins over weak)."""
    if cost_group(text) != "task" and _COST_WORDS.search(text):  # "costs by operator" is about costs
        return [("costs", True)]
    found: dict[Intent, bool] = {}
    for intent, strong, weak in _RULES:
        if strong.search(text):
            found[intent] = True
        elif weak is not None and weak.search(text) and intent not in found:
            found[intent] = False
    return list(found.items())


def rule_intent(text: str) -> Intent | None:
    """The intent the rules name: the first strong match, else the first weak one, else None."""
    matches = rule_matches(text)
    strong = [intent for intent, sure in matches if sure]
    if strong:
        return strong[0]
    return matches[0][0] if matches else None


def count_subject(text: str) -> CountSubject | None:
    """What a "how many …" question counts (agents, personas, experiments), or None."""
    for subject, pattern in _COUNTS:
        if pattern.search(text):
            return subject
    return None


def cost_group(text: str) -> CostGroup:
    """How a costs question wants its totals grouped (by model task unless it says otherwise)."""
    for group, pattern in _COST_GROUPS:
        if pattern.search(text):
            return group
    return "task"
