"""The questions the lab assistant answers, and the rules that name one from a question's words.

Shared by the assistant (rules first) and the offline engine (which falls back on
the same rules for a follow-up question), so both read one vocabulary. Every kind
of fact furnace records has an intent. The rules are ordered: the first that
matches wins, so the more specific questions come first ("which operator scored
best" is about operators, not the best agents; "how many calls did my experiment
cost" is about costs, not experiments).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Intent = Literal[
    "common_ancestors",
    "descendants",
    "ancestors",
    "experiment_compare",
    "persona_diff",
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
"""Every intent, in rule order (the Literal above is the one list)."""

_I = re.I
# Checked in order: the first rule that matches wins.
_RANKED = r"(best|top|highest|strongest|fittest|ranking|ranked|winners?|最强|最好|最优|排名|排行|得分最高)"
_RULES: tuple[tuple[Intent, re.Pattern[str]], ...] = (
    (  # "the best agents bred from X" ranks descendants
        "top_agents",
        re.compile(
            _RANKED + r".{0,40}(bred from|descended from|derived from|培育出|衍生|派生)|"
            r"(bred from|descended from|培育出|衍生出).{0,40}" + _RANKED,
            _I,
        ),
    ),
    (
        "common_ancestors",
        re.compile(
            r"\b(common|shared)\s+(ancestors?|ancestry|parents?|roots?)\b|\bshare\s+(any\s+|an\s+)?"
            r"(ancestors?|ancestry|parents?)\b|共同(的)?(祖先|先祖|亲本|来源)",
            _I,
        ),
    ),
    (
        "descendants",
        re.compile(
            r"\b(descend(ed|ants?|s)?|offspring|children|child agents?|bred from|derived from|came from|"
            r"built on|bred out of)\b|后代|子代|衍生|派生|繁衍|培育出",
            _I,
        ),
    ),
    (
        "ancestors",
        re.compile(
            r"\b(ancest(ors?|ry)|parents?|lineage|family tree|bred|where did .{1,40} come from|made from)\b|"
            r"祖先|亲本|父代|血统|谱系|由.{0,12}(融合|培育|组成)|从哪来|怎么来的",
            _I,
        ),
    ),
    (
        "experiment_compare",
        re.compile(
            r"\b(compare|comparison|versus|vs\.?|side by side|differ)\b.{0,40}\b(experiments?|runs?|sweeps?)\b|"
            r"\b(experiments?|runs?)\b.{0,40}\b(compare|comparison|versus|vs\.?|side by side|head to head)\b|"
            r"\bwhich (experiment|run) (did|was|is|went|worked) better\b|"
            r"(对比|比较|比一比).{0,40}实验|实验.{0,12}(对比|比较|哪个更好|谁更好|区别|差异|有什么不同)|哪个实验(更好|效果更好|表现更好)",
            _I,
        ),
    ),
    (
        "persona_diff",
        re.compile(
            r"\b(diff|differences?|what changed|what's changed|what has changed|changes between)\b|"
            r"\bv\d+\s*(vs\.?|versus|and|to|→|->)\s*v\d+\b|"
            r"(版本|第.{1,3}版).{0,12}(区别|差异|不同|变化)|(区别|差异|改了什么|变了什么|有什么变化|有什么不同)",
            _I,
        ),
    ),
    (
        "operators",
        re.compile(
            r"\b(operators?|crossover|mutation|reflect(ion|ive)?|ensemble)\b|算子|交叉|变异|突变|融合方式|操作符", _I
        ),
    ),
    (
        "judge_feedback",
        re.compile(
            r"\b(judge|judges|judged|judging|feedback|critique|critic|why did .{1,40} (score|lose|rank)|"
            r"weak(est)? (replies|answers|points))\b|评语|反馈|评委|裁判|评审|点评|为什么.{0,30}(分低|分数低|扣分)",
            _I,
        ),
    ),
    (
        "failures",
        re.compile(
            r"\b(fail(ed|ures?|ing|s)?|errors?|broke|broken|crash(ed|es)?|went wrong|unscored|timeouts?)\b|"
            r"失败|出错|错误|报错|崩溃|挂了|超时|出问题|出了什么错|什么错",
            _I,
        ),
    ),
    (
        "arena_runs",
        re.compile(
            r"\b(arena|group chats?|roll calls?|count[- ]offs?|discussions?|turns?)\b|群聊|竞技场|报数|讨论|对话轮",
            _I,
        ),
    ),
    (
        "preferences",
        re.compile(r"\b(learn(ed|t|s)?|preferences?|style prefs?|taste|likes)\b|学到|学会|偏好|喜好|口味|风格习惯", _I),
    ),
    ("revisions", re.compile(r"\b(revisions?|revised|edits?|edited|rewrites?|rewrote)\b|修订|修改|改稿|改写|润色", _I)),
    (
        "content_versions",
        re.compile(
            r"\b(content|pieces?|articles?|drafts?|posts?|texts? (written|generated))\b|文章|内容|稿子|草稿|文稿|帖子",
            _I,
        ),
    ),
    ("persona_versions", re.compile(r"\b(versions?|version history|history)\b|版本|历史|历次", _I)),
    (
        "costs",
        re.compile(
            r"\b(costs?|spend|spent|tokens?|budget|usd|dollars?|money|expensive|price|bill|"
            r"how many (model )?calls|calls? (did|were|was)|model calls)\b|"
            r"花费|成本|开销|费用|花了多少|多少钱|调用了?多少|多少次(模型)?调用|token",
            _I,
        ),
    ),
    (
        "top_agents",
        re.compile(
            r"\b(best|top|highest|fittest|leaderboard|winners?|winning|champions?|strongest|scored?|ranking|"
            r"ranked|performed)\b|得分最高|最好|排行|排名|最优|最强|冠军|表现最|第一名",
            _I,
        ),
    ),
    ("experiments", re.compile(r"\b(experiments?|sweeps?|runs?)\b|实验|试验", _I)),
    ("personas", re.compile(r"\b(personas?|elixirs?|library|characters?)\b|人设|角色|丹药|人物", _I)),
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


def rule_intent(text: str) -> Intent | None:
    """The intent the first matching rule names, or None when no rule matches."""
    if cost_group(text) != "task" and _COST_WORDS.search(text):  # "costs by operator" is about costs
        return "costs"
    for intent, pattern in _RULES:
        if pattern.search(text):
            return intent
    return None


def cost_group(text: str) -> CostGroup:
    """How a costs question wants its totals grouped (by model task unless it says otherwise)."""
    for group, pattern in _COST_GROUPS:
        if pattern.search(text):
            return group
    return "task"
