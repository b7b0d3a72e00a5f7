"""The lab assistant: rules first, structured results, a scope that does not drift."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta
from furnace.assistant.results import Query
from furnace.assistant.scope import Catalogue, Scope
from furnace.domain.errors import LLMError
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine

NOW = datetime(2026, 11, 30, 10, 0)


class FakeData:
    """In-memory AssistData: filters by scope like the DuckDB one, records each query's scope."""

    def __init__(self, n_agents: int = 5) -> None:
        self.queries: list[tuple[str, Scope]] = []
        self.agents = [
            {
                "agent_id": f"agt-{i:03d}",
                "experiment_id": "exp-night" if i % 2 else "exp-day",
                "generation": i % 4,
                "fitness": round(1 - i / (n_agents + 1), 4),
                "operator": "crossover",
                "created_at": NOW - timedelta(hours=i),
            }
            for i in range(n_agents)
        ]
        self.revs = [
            {
                "revision_id": "rev-1",
                "content_id": "c1",
                "persona_id": "empathetic-coach",
                "step": "V1→V2",
                "suggestion": "warmer",
                "created_at": NOW - timedelta(days=1),
            },
            {
                "revision_id": "rev-2",
                "content_id": "c2",
                "persona_id": "go-reviewer",
                "step": "V1→V2",
                "suggestion": "shorter",
                "created_at": NOW - timedelta(days=2),
            },
        ]

    def catalogue(self) -> Catalogue:
        return Catalogue(
            personas={"empathetic-coach": "Empathetic Coach", "go-reviewer": "Terse Go Reviewer"},
            experiments={"exp-night": "night sweep", "exp-day": "day run"},
        )

    def known_agent(self, agent_id: str) -> bool:
        return any(a["agent_id"] == agent_id for a in self.agents)

    def _log(self, name: str, scope: Scope) -> None:
        self.queries.append((name, scope))

    def top_agents(self, q: Query) -> list[dict[str, Any]]:
        scope, limit = q.scope, q.limit
        self._log("top_agents", scope)
        rows = [a for a in self.agents if scope.experiment in (None, a["experiment_id"])]
        return sorted(rows, key=lambda a: -a["fitness"])[:limit]

    def revisions(self, q: Query) -> list[dict[str, Any]]:
        scope, limit = q.scope, q.limit
        self._log("revisions", scope)
        return [r for r in self.revs if scope.persona in (None, r["persona_id"])][:limit]

    def preferences(self, q: Query) -> list[dict[str, Any]]:
        scope, limit = q.scope, q.limit
        self._log("preferences", scope)
        return [
            {
                "persona_id": "empathetic-coach",
                "dimension": "tone",
                "value": "lively",
                "count": 2,
                "weight": 0.7,
                "evidence": "太正式了",
            }
        ][:limit]

    def experiments(self, q: Query) -> list[dict[str, Any]]:
        scope, limit = q.scope, q.limit
        self._log("experiments", scope)
        return [{"experiment_id": e, "name": n} for e, n in self.catalogue().experiments.items()][:limit]

    def personas(self, q: Query) -> list[dict[str, Any]]:
        scope, limit = q.scope, q.limit
        self._log("personas", scope)
        return [{"id": i, "name": n} for i, n in self.catalogue().personas.items()][:limit]

    def costs(self, q: Query) -> list[dict[str, Any]]:
        self._log("costs", q.scope)
        return [{"task": "reply", "calls": 3, "cached_calls": 1, "tokens": 300, "cost_usd": 0.01}]


def _ask(assistant: Assistant, state: AssistantState, question: str) -> tuple[Done, list]:
    events = list(assistant.ask(question, state))
    assert isinstance(events[-1], Done)
    return events[-1], events


def test_rule_only_questions_make_no_model_call() -> None:
    llm = FakeLLM()  # any call would raise: nothing is queued
    data = FakeData()
    assistant = Assistant(data, llm, now=lambda: NOW)
    state = AssistantState()
    for question in (
        "which agents from last night's sweep scored best?",
        "show the coach persona's revisions this week",
        "what did the coach persona learn?",
        "哪些智能体得分最高？",
    ):
        done, _ = _ask(assistant, state, question)
        assert done.result is not None and done.result.items, question
    assert llm.calls == []
    assert [q for q, _ in data.queries] == ["top_agents", "revisions", "preferences", "top_agents"]


def test_list_answer_lead_is_short_while_the_table_holds_every_row() -> None:
    data = FakeData(n_agents=120)
    llm = OfflineEngine()
    calls: list = []

    class Counting:
        model_name = llm.model_name

        def complete(self, request):  # noqa: ANN001, ANN201
            out = llm.complete(request)
            calls.append((request, out))
            return out

    assistant = Assistant(data, Counting(), model_lead=True, now=lambda: NOW, limit=500)
    done, events = _ask(assistant, AssistantState(), "which agents scored best?")
    assert len(done.result.items) == 120
    assert len(calls) == 1
    request, completion = calls[0]
    assert request.max_tokens == 80
    assert completion.usage.completion_tokens < 80
    assert "agt-119" not in done.lead  # the lead does not retype the list
    deltas = "".join(e.text for e in events if e.type == "delta")
    assert deltas == done.lead


def test_a_long_model_lead_is_cut_to_the_token_cap() -> None:
    llm = FakeLLM(["word " * 400])
    assistant = Assistant(FakeData(), llm, model_lead=True, now=lambda: NOW)
    done, _ = _ask(assistant, AssistantState(), "which agents scored best?")
    assert len(done.lead.split()) <= 80


def test_locked_scope_holds_for_three_follow_ups_and_clear_scope_clears() -> None:
    data = FakeData()
    assistant = Assistant(data, None, now=lambda: NOW)
    state = AssistantState()
    done, _ = _ask(assistant, state, "from now on only the coach persona")
    assert state.locked == Scope(persona="empathetic-coach")
    assert "empathetic-coach" in done.lead
    for question in ("show the revisions", "what was learned?", "list revisions from the last 7 days"):
        _, events = _ask(assistant, state, question)
        meta = next(e for e in events if isinstance(e, Meta))
        assert meta.scope.persona == "empathetic-coach" and meta.locked
    assert all(scope.persona == "empathetic-coach" for _, scope in data.queries)
    _ask(assistant, state, "清除范围")
    assert state.locked is None
    _ask(assistant, state, "show the revisions")
    assert data.queries[-1][1].persona is None


def test_zh_lock_command_with_experiment() -> None:
    data = FakeData()
    assistant = Assistant(data, None, now=lambda: NOW)
    state = AssistantState()
    _ask(assistant, state, "只看 experiment exp-night")
    assert state.locked == Scope(experiment="exp-night")
    done, _ = _ask(assistant, state, "得分最高的是哪些？")
    assert {row["experiment_id"] for row in done.result.items} == {"exp-night"}


def test_inferred_scope_does_not_leak_into_the_next_question() -> None:
    data = FakeData()
    assistant = Assistant(data, None, now=lambda: NOW)
    state = AssistantState()
    _ask(assistant, state, "show the coach persona's revisions")
    assert data.queries[-1][1].persona == "empathetic-coach"
    _ask(assistant, state, "which agents scored best?")
    assert data.queries[-1][1].persona is None
    assert state.locked is None


def test_unknown_name_gets_a_clarifying_question_not_a_guess() -> None:
    data = FakeData()
    llm = FakeLLM([{"intent": "revisions", "persona": "made-up", "confidence": 0.9}])
    assistant = Assistant(data, llm, now=lambda: NOW)
    done, _ = _ask(assistant, AssistantState(), "show revisions of persona zorro")
    assert done.clarify and done.result is None
    assert "zorro" in done.lead and "empathetic-coach" in done.lead
    assert data.queries == []


def test_the_model_is_asked_only_when_rules_cannot_tell_then_with_history() -> None:
    data = FakeData()
    assistant = Assistant(data, OfflineEngine(), now=lambda: NOW)
    state = AssistantState()
    _, events = _ask(assistant, state, "who is our standout?")
    meta = next(e for e in events if isinstance(e, Meta))
    assert (meta.intent, meta.intent_source) == ("top_agents", "model")
    _, events = _ask(assistant, state, "and what about yesterday?")
    meta = next(e for e in events if isinstance(e, Meta))
    assert (meta.intent, meta.intent_source) == ("top_agents", "model+history")
    assert meta.scope.since == datetime(2026, 11, 29) and meta.scope.until == datetime(2026, 11, 30)
    done, _ = _ask(assistant, AssistantState(), "tell me something nice")
    assert done.clarify and done.result is None


@pytest.mark.parametrize(
    "reply",
    [
        'Sure! Here is the classification: {"intent": "top_agents", "confidence": 0.8} Hope that helps.',
        '<think>they want the best ones</think>\n```jsonc\n{"intent": "top_agents", "confidence": 0.8}\n```',
    ],
)
def test_the_model_fallback_reads_replies_through_the_structured_path(reply: str) -> None:
    done, events = _ask(Assistant(FakeData(), FakeLLM([reply]), now=lambda: NOW), AssistantState(), "who shines?")
    meta = next(e for e in events if isinstance(e, Meta))
    assert (meta.intent, meta.intent_source) == ("top_agents", "model") and not done.clarify


def test_a_model_reply_outside_the_schema_is_no_answer() -> None:
    llm = FakeLLM(['{"intent": "top_agents", "confidence": 7}'])
    done, _ = _ask(Assistant(FakeData(), llm, now=lambda: NOW), AssistantState(), "who shines?")
    assert done.clarify and done.result is None


def test_a_failing_model_becomes_a_clarifying_question() -> None:
    llm = FakeLLM([LLMError("down"), LLMError("down")])
    done, _ = _ask(Assistant(FakeData(), llm, now=lambda: NOW), AssistantState(), "who is our standout?")
    assert done.clarify


def test_actions_offer_open_compare_and_lock() -> None:
    done, _ = _ask(Assistant(FakeData(), None, now=lambda: NOW), AssistantState(), "top agents")
    kinds = [a.kind for a in done.result.actions]
    assert kinds.count("open_agent") == 3 and "compare" in kinds and "lock_scope" in kinds
    compare = next(a for a in done.result.actions if a.kind == "compare")
    assert compare.target["agent_ids"] == [r["agent_id"] for r in done.result.items[:4]]


@pytest.mark.parametrize("question", ["top agents", "最好的智能体"])
def test_results_list_rows_best_first(question: str) -> None:
    done, _ = _ask(Assistant(FakeData(), None, now=lambda: NOW), AssistantState(), question)
    fitness = [r["fitness"] for r in done.result.items]
    assert fitness == sorted(fitness, reverse=True)
