"""Scope applies to every result (costs included) and is always stated; bad input gets a clear answer."""

from __future__ import annotations

import pytest

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta
from furnace.assistant.queries import SHAPES
from furnace.llm.offline import OfflineEngine
from furnace.storage.duckdb.assist import DuckDBAssistData

from .dataset import AGENTS, NOW, build_live


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> DuckDBAssistData:
    return build_live(tmp_path_factory.mktemp("scope"))


def ask(assistant: Assistant, state: AssistantState, question: str) -> tuple[Done, Meta | None]:
    events = list(assistant.ask(question, state))
    done = events[-1]
    assert isinstance(done, Done)
    return done, next((e for e in events if isinstance(e, Meta)), None)


def test_locked_persona_scope_filters_costs(data: DuckDBAssistData) -> None:
    assistant = Assistant(data, None, now=lambda: NOW)
    everything, _ = ask(assistant, AssistantState(), "how many model calls did we make?")
    state = AssistantState()
    ask(assistant, state, "only look at go-reviewer")
    scoped, meta = ask(assistant, state, "how many model calls did we make?")
    total = sum(r["calls"] for r in everything.result.items)
    within = sum(r["calls"] for r in scoped.result.items)
    assert meta is not None and meta.scope.persona == "go-reviewer"
    assert everything.scope_label == "everything" and total == 10  # the ledger: 6 rows x 2 uncached, one failed
    assert "go-reviewer" in scoped.scope_label and "bred from" in scoped.scope_label
    assert within == 6 * 3  # agt-aaa111 and its two children, 6 calls each in the dataset
    state = AssistantState()
    ask(assistant, state, "only look at tea-master")
    every_agent, _ = ask(assistant, state, "how many model calls did we make?")
    assert sum(r["calls"] for r in every_agent.result.items) == 6 * len(AGENTS)


def test_every_intent_states_the_scope_it_applied(data: DuckDBAssistData) -> None:
    assistant = Assistant(data, None, now=lambda: NOW)
    state = AssistantState()
    ask(assistant, state, "only look at experiment exp-night")
    done, _ = ask(assistant, state, "show the revisions")
    assert "not applied: experiment=exp-night" in done.scope_label  # revisions have no experiment
    done, _ = ask(assistant, state, "top agents")
    assert done.scope_label == "experiment=exp-night"
    assert {r["experiment_id"] for r in done.result.items} == {"exp-night"}
    for intent, shape in SHAPES.items():
        assert shape.applies is not None, intent


def test_a_different_persona_than_the_lock_asks_before_switching(data: DuckDBAssistData) -> None:
    assistant = Assistant(data, None, now=lambda: NOW)
    state = AssistantState()
    ask(assistant, state, "from now on only tea-master")
    done, meta = ask(assistant, state, "show go-reviewer's revisions")
    assert done.clarify and done.result is None and meta is None
    assert "tea-master" in done.lead and "go-reviewer" in done.lead and "switch" in done.lead
    assert state.locked is not None and state.locked.persona == "tea-master"


def test_lock_with_a_question_locks_and_answers(data: DuckDBAssistData) -> None:
    assistant = Assistant(data, None, now=lambda: NOW)
    state = AssistantState()
    done, _ = ask(assistant, state, "只看 tea-master 的版本")
    assert state.locked is not None and state.locked.persona == "tea-master"
    assert done.result is not None and [r["version"] for r in done.result.items] == [2, 1]
    done, _ = ask(assistant, state, "有什么区别？")
    fields = {r["field"] for r in done.result.items}
    assert "expertise" in fields and all(r["from_version"] == 1 and r["to_version"] == 2 for r in done.result.items)


def test_lineage_answers_walk_the_real_edges(data: DuckDBAssistData) -> None:
    assistant = Assistant(data, None, now=lambda: NOW)
    done, _ = ask(assistant, AssistantState(), "where did agt-bbb222 come from?")
    assert {r["ancestor"] for r in done.result.items} == {"agt-aaa111", "tea-master", "go-reviewer"}
    done, _ = ask(assistant, AssistantState(), "show agents descended from tea-master")
    assert {r["descendant"] for r in done.result.items} == set(AGENTS)  # every agent descends from tea-master
    done, _ = ask(assistant, AssistantState(), "common ancestors of agt-bbb222 and agt-ccc333")
    assert [r["ancestor"] for r in done.result.items][0] == "agt-aaa111"


def test_operator_statistics_compare_children_with_their_parents(data: DuckDBAssistData) -> None:
    done, _ = ask(Assistant(data, None, now=lambda: NOW), AssistantState(), "which operator worked best?")
    rows = {r["operator"]: r for r in done.result.items}
    # parents are compared within their experiment, seeds (generation 0) included:
    # mutation: bbb222 0.78 > aaa111 0.71; ddd444 0.82 > seed tea-master 0.69; fff666 0.74 < ddd444 0.82
    assert rows["mutation"]["children"] == 3 and rows["mutation"]["improved"] == 2
    # crossover: aaa111 0.71 > seeds 0.62/0.58; ccc333 0.66 < 0.71; eee555 0.88 > ddd444 0.82 and seed 0.73
    assert rows["crossover"]["children"] == 3 and rows["crossover"]["improved"] == 2
    assert rows["ensemble"]["children"] == 1 and rows["ensemble"]["improved"] == 0  # ggg777 0.80 < eee555 0.88


@pytest.mark.parametrize(
    ("question", "expect"),
    [
        ("", "Ask a question"),
        ("   ", "Ask a question"),
        ("x" * 10_000, "10,000 characters"),
        ("SELECT * FROM agents; DROP TABLE agents; --", "not sure"),
        ("show revisions of persona nobody-here", "can't find a persona called 'nobody-here'"),
        ("which versions does milk-master have?", "can't find a persona called 'milk-master'"),
        ("milk-master 有哪些版本？", "找不到名为“milk-master”的人设"),
        ("where did agt-zzz999 come from?", "can't find an agent called 'agt-zzz999'"),
        ("show the ancestors", "Which agent"),
    ],
)
def test_bad_input_gets_a_clear_answer_and_writes_nothing(data: DuckDBAssistData, question: str, expect: str) -> None:
    state = AssistantState()
    done, _ = ask(Assistant(data, OfflineEngine(), now=lambda: NOW), state, question)
    assert done.clarify and done.result is None
    assert expect in done.lead
    assert state.locked is None
    assert data.db.query("SELECT count(*) FROM agents")[0][0] == len(AGENTS)


@pytest.mark.parametrize(
    "question",
    [
        "show the top-3 agents",
        "what is the held-out test fitness of the best agent?",
        "which agents have the largest train-test gap?",
        "did the copy-feedback baseline beat the best agents?",
    ],
)
def test_hyphenated_words_of_a_researchers_question_are_not_taken_for_a_persona(
    data: DuckDBAssistData, question: str
) -> None:
    """The words "top-3", "held-out" and "train-test" are id-shaped but name no persona: the question is answered, not
    met with "I can't find a persona called 'held-out'" (as "milk-master" rightly is)."""
    done, _ = ask(Assistant(data, OfflineEngine(), now=lambda: NOW), AssistantState(), question)
    assert not done.clarify and done.result is not None and "can't find a persona" not in done.lead
    assert {r["agent_id"] for r in done.result.items} <= {a[0] for a in data.db.query("SELECT id FROM agents")}


def test_nothing_matches_says_what_it_can_answer_with_three_examples(data: DuckDBAssistData) -> None:
    done, _ = ask(Assistant(data, OfflineEngine(), now=lambda: NOW), AssistantState(), "tell me a joke")
    assert done.clarify and done.lead.count("'") >= 6  # three quoted example questions
