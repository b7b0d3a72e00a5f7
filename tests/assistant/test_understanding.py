"""The assistant understands people: lock and clear phrasings, counts, comparisons, filters by language
and operator, seed rankings, and a clarifying question instead of a guess (questions.yaml, `understanding`).

Expected answers are computed here from the seeded dataset (tests/assistant/dataset.py), never copied
from an output.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta
from furnace.assistant.evaluation import accuracy, check_dialog
from furnace.assistant.intent import CLARIFY_BELOW, classify
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.storage.duckdb.assist import DuckDBAssistData

from .dataset import AGENTS, EXPERIMENTS, NOW, PERSONAS, SEEDS

SET = yaml.safe_load((Path(__file__).parent / "questions.yaml").read_text(encoding="utf-8"))["understanding"]
BRIEF = [(lang, item) for lang, items in SET["brief"].items() for item in items]
FRESH = [item for items in SET["fresh"].values() for item in items]


def _created(agent: str) -> Any:
    eid, gen = AGENTS[agent][0], AGENTS[agent][1]
    return NOW - timedelta(hours=EXPERIMENTS[eid][1] - gen)


def _descendants(node: str) -> set[str]:
    out: set[str] = set()
    frontier = {node}
    while frontier:
        children = {a for a, spec in AGENTS.items() if set(spec[3]) & frontier} - out
        out |= children
        frontier = children
    return out


def truth(fact: str, arg: Any) -> Any:
    """What a right answer holds, from the dataset's own tables."""
    today = NOW.replace(hour=0, minute=0)
    best_seed = max(((p, f) for seeds in SEEDS.values() for p, f in seeds.items()), key=lambda pf: pf[1])[0]
    facts = {
        "agents": lambda: set(AGENTS),
        "agents_in_experiment": lambda: {a for a, spec in AGENTS.items() if spec[0] == arg},
        "agents_by_operator": lambda: {a for a, spec in AGENTS.items() if spec[2] == arg},
        # the agents a ranking lists: those a failure left unscored rank nowhere
        "scored_agents": lambda: {a for a, spec in AGENTS.items() if spec[5] == 0},
        "scored_agents_in_experiment": lambda: {a for a, spec in AGENTS.items() if spec[0] == arg and spec[5] == 0},
        "scored_agents_by_operator": lambda: {a for a, spec in AGENTS.items() if spec[2] == arg and spec[5] == 0},
        "agents_since_hours": lambda: {a for a in AGENTS if _created(a) >= NOW - timedelta(hours=arg)},
        "personas": lambda: set(PERSONAS),
        "personas_in_language": lambda: {p for p, spec in PERSONAS.items() if spec[1] == arg},
        "count": lambda: {"agents": len(AGENTS), "personas": len(PERSONAS), "experiments": len(EXPERIMENTS)}[arg],
        "count_in_experiment": lambda: sum(1 for spec in AGENTS.values() if spec[0] == arg),
        "count_since_today": lambda: sum(1 for a in AGENTS if _created(a) >= today),
        "best_seed": lambda: best_seed,
        "seed_personas": lambda: {p for seeds in SEEDS.values() for p in seeds},
        "subjects": lambda: set(arg),
        "descendants": lambda: _descendants(arg),
        "versions": lambda: {1, 2} if arg == "tea-master" else {1},
    }
    return facts[fact]()


@pytest.fixture(scope="module")
def assistant(assist_data: DuckDBAssistData) -> Assistant:
    return Assistant(assist_data, OfflineEngine(), now=lambda: NOW)


def test_the_set_is_large_and_bilingual() -> None:
    items = [*BRIEF, *((lang, i) for lang, items in SET["fresh"].items() for i in items)]
    en, zh = (sum(1 for lang, _ in items if lang == x) for x in ("en", "zh"))
    assert len(items) >= 60 and abs(en - zh) <= len(items) // 10, (en, zh)


@pytest.mark.parametrize(
    ("lang", "item"), BRIEF, ids=[f"{lang}:{i.get('q') or ' / '.join(i['turns'])}" for lang, i in BRIEF]
)
def test_reported_case(assistant: Assistant, lang: str, item: dict) -> None:
    verdict = check_dialog(assistant, item, truth, now=NOW)
    assert verdict.ok, verdict.problems


def test_fresh_phrasings_are_measured(assistant: Assistant) -> None:
    """Written before the first run; the figure is reported in docs/assistant.md and must not fall."""
    verdicts = [check_dialog(assistant, item, truth, now=NOW) for item in FRESH]
    report = accuracy(verdicts)
    wrong = [(v.question, v.problems) for v in verdicts if not v.ok]
    assert report["accuracy"] >= 0.9, wrong


def _ask(assistant: Assistant, state: AssistantState, question: str) -> tuple[Done, Meta | None]:
    events = list(assistant.ask(question, state))
    metas = [e for e in events if isinstance(e, Meta)]
    assert isinstance(events[-1], Done)
    return events[-1], (metas[-1] if metas else None)


def test_rules_report_how_sure_they_are() -> None:
    sure = classify("which seed persona did best?")
    assert sure.intent == "seeds" and sure.confidence >= CLARIFY_BELOW and not sure.needs_clarification
    lone = classify("what runs do we have?")  # one generic word: a guess, but an uncontested one
    assert lone.intent == "experiments" and CLARIFY_BELOW <= lone.confidence < sure.confidence
    torn = classify("show me the runs history")  # "history" (persona versions) or "runs" (experiments)?
    assert torn.needs_clarification and torn.confidence < CLARIFY_BELOW
    assert {torn.intent, *torn.alternatives} == {"persona_versions", "experiments"}
    nothing = classify("tell me a joke")
    assert nothing.intent is None and nothing.needs_clarification


def test_a_contested_question_asks_the_model_and_takes_a_sure_answer(assist_data: DuckDBAssistData) -> None:
    llm = FakeLLM([{"intent": "experiments", "confidence": 0.9}])
    done, meta = _ask(Assistant(assist_data, llm, now=lambda: NOW), AssistantState(), "show me the runs history")
    assert llm.calls[0].inputs["mode"] == "classify" and not done.clarify
    assert meta is not None and (meta.intent, meta.intent_source, meta.confidence) == ("experiments", "model", 0.9)
    assert {r["experiment_id"] for r in done.result.items} == set(EXPERIMENTS)


@pytest.mark.parametrize(
    ("question", "readings"),
    [
        ("show me the runs history", ("persona versions", "experiments")),
        ("讨论的历史", ("群聊运行记录", "人设版本")),
    ],
)
def test_an_unsure_model_leaves_a_clarifying_question_in_the_users_language(
    assist_data: DuckDBAssistData, question: str, readings: tuple[str, str]
) -> None:
    llm = FakeLLM([{"intent": "experiments", "confidence": CLARIFY_BELOW / 2}])
    done, meta = _ask(Assistant(assist_data, llm, now=lambda: NOW), AssistantState(), question)
    assert done.needs_clarification and done.result is None and meta is None
    assert all(r in done.lead for r in readings), done.lead


def test_a_lock_to_an_unknown_agent_is_refused_and_the_old_lock_kept(assistant: Assistant) -> None:
    state = AssistantState()
    _ask(assistant, state, "only look at tea-master")
    done, _ = _ask(assistant, state, "lock to agt-zzz999")
    assert done.clarify and "agt-zzz999" in done.lead
    assert state.locked is not None and state.locked.persona == "tea-master"


def test_a_locked_operator_filters_every_answer_that_can_apply_it_and_names_the_rest(assistant: Assistant) -> None:
    state = AssistantState()
    _ask(assistant, state, "接下来都看 mutation")
    done, meta = _ask(assistant, state, "top agents")
    assert meta is not None and meta.locked and meta.scope.operator == "mutation"
    assert {r["agent_id"] for r in done.result.items} == truth("scored_agents_by_operator", "mutation")
    done, _ = _ask(assistant, state, "which operator worked best?")
    assert [r["operator"] for r in done.result.items] == ["mutation"]
    done, _ = _ask(assistant, state, "show the revisions")
    assert "not applied: operator=mutation" in done.scope_label
