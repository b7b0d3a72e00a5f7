"""Ids are subjects, not question words; an agent scored in several experiments is one agent.

The seeded dataset (tests/assistant/dataset.py) plus one more finished run, ``RERUN``, whose id and name hold
question words ("judges") and which scored two agents the dataset's runs had bred already (an agent's id is its
lineage's, so two runs can breed the same agent): one better there than in its own run, one worse.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta
from furnace.assistant.intent import classify
from furnace.assistant.leads import template_lead
from furnace.assistant.results import StructuredResult
from furnace.assistant.scope import Catalogue
from furnace.storage.duckdb.assist import DuckDBAssistData

from .dataset import AGENTS, NOW, build, live_data

RERUN = "exp-demo-judges-5f3e2a1c0b"
RERUN_NAME = "demo-judges"
RERUN_AGENTS = {"agt-bbb222": 0.9, "agt-eee555": 0.84}  # scored 0.78 in exp-night, 0.88 in exp-tea
RERUN_HOURS = 1


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> DuckDBAssistData:
    folder: Path = tmp_path_factory.mktemp("shared")
    db = build(folder / "dataset.duckdb")
    made = NOW - timedelta(hours=RERUN_HOURS)
    with db.transaction() as con:
        con.execute(
            "INSERT INTO experiments (experiment_id, name, config, seed, model, status, summary, created_at) "
            "VALUES (?, ?, ?, 1, 'offline', 'finished', ?, ?)",
            [RERUN, RERUN_NAME, json.dumps({"name": RERUN_NAME}), json.dumps({"held_out": {}}), made],
        )
        for slot, (agent, fitness) in enumerate(RERUN_AGENTS.items()):
            _, _, operator, parents, _, _ = AGENTS[agent]
            con.execute(
                "INSERT INTO experiment_individuals (experiment_id, generation, agent_id, slot, operator, parents,"
                " elixir, system_prompt, fitness, objectives, failures, failure_reasons, calls, tokens, cost_usd,"
                " created_at) VALUES (?, 1, ?, ?, ?, ?, '{}', '', ?, '{}', 0, '[]', 6, 1200, 0.003, ?)",
                [RERUN, agent, slot, operator, json.dumps(parents), fitness, made],
            )
            con.execute(
                "INSERT INTO experiment_scores VALUES (?, 1, ?, 'autumn-tea', 'fidelity', ?, 'weak', false, 'thin')",
                [RERUN, agent, fitness - 0.1],
            )
    return live_data(db, folder)


def _scored() -> dict[str, list[tuple[float, str]]]:
    """Every ranked score of a bred agent, as (fitness, experiment), from the fixture's own tables."""
    scores: dict[str, list[tuple[float, str]]] = {}
    for agent, (eid, _, _, _, fitness, failures) in AGENTS.items():
        if failures == 0:
            scores.setdefault(agent, []).append((fitness, eid))
    for agent, fitness in RERUN_AGENTS.items():
        scores.setdefault(agent, []).append((fitness, RERUN))
    return scores


def _ask(data: DuckDBAssistData, question: str) -> tuple[Done, Meta | None]:
    events = list(Assistant(data, None, now=lambda: NOW).ask(question, AssistantState()))
    metas = [e for e in events if isinstance(e, Meta)]
    assert isinstance(events[-1], Done)
    return events[-1], (metas[-1] if metas else None)


# --- 1. an id names a subject or a scope, never the question ----------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        f"which agents scored best in {RERUN}?",
        f"{RERUN} 里哪些智能体得分最高？",
        f"{RERUN}里哪些智能体得分最高？",
        f"which agents scored best in {RERUN_NAME}?",  # an id-shaped display name is a name too
    ],
)
def test_an_experiment_id_scopes_the_question_and_does_not_decide_its_intent(
    data: DuckDBAssistData, question: str
) -> None:
    done, meta = _ask(data, question)
    assert meta is not None and (meta.intent, meta.scope.experiment) == ("top_agents", RERUN), meta
    assert {r["agent_id"] for r in done.result.items} == set(RERUN_AGENTS)
    assert all(r["experiment_id"] == RERUN for r in done.result.items)


def test_the_words_around_an_id_still_ask_for_judge_feedback(data: DuckDBAssistData) -> None:
    done, meta = _ask(data, f"what did the judges say in {RERUN}?")
    assert meta is not None and (meta.intent, meta.scope.experiment) == ("judge_feedback", RERUN)
    assert {r["agent_id"] for r in done.result.items} == set(RERUN_AGENTS)


def test_the_rules_read_the_question_without_its_ids() -> None:
    assert classify(f"which agents scored best in {RERUN}?").intent == "top_agents"
    assert classify("is agt-judge-feedback-1 among the top agents?").intent == "top_agents"  # not judge_feedback
    catalogue = Catalogue(personas={"harsh-judge": "Harsh Judge"}, experiments={"exp-costly": "cost-sweep"})
    assert classify("what did harsh-judge learn?", catalogue).intent == "preferences"
    assert classify("best agents of cost-sweep", catalogue).intent == "top_agents"  # not costs
    assert classify("what did the judge say about harsh-judge?", catalogue).intent == "judge_feedback"


def test_an_unknown_experiment_id_is_asked_about_not_ignored(data: DuckDBAssistData) -> None:
    for question in ("which agents scored best in exp-nowhere-123?", "exp-nowhere-123 里哪些智能体得分最高？"):
        done, meta = _ask(data, question)
        assert done.clarify and meta is None and "exp-nowhere-123" in done.lead, done.lead


# --- 2. the best agents: one row per agent -----------------------------------------------------------------


def test_an_agent_scored_in_two_experiments_is_one_best_agent_with_its_best_score(data: DuckDBAssistData) -> None:
    best = {agent: max(scores) for agent, scores in _scored().items()}  # (fitness, experiment) of the best score
    for question, lead in (
        ("which agents scored best?", "{n} agent(s);"),
        ("哪些智能体得分最高？", "共 {n} 个智能体，"),
    ):
        done, meta = _ask(data, question)
        assert meta is not None and meta.intent == "top_agents"
        rows = done.result.items
        assert [r["agent_id"] for r in rows] == sorted(best, key=lambda a: (-best[a][0], a))  # each agent once
        assert {r["agent_id"]: (r["fitness"], r["experiment_id"]) for r in rows} == best
        assert done.lead.startswith(lead.format(n=len(best))), done.lead
    # within one experiment, that experiment's score
    done, _ = _ask(data, "which agents scored best in exp-night?")
    assert {r["agent_id"]: r["fitness"] for r in done.result.items} == {
        a: f for a, scores in _scored().items() for f, e in scores if e == "exp-night"
    }


def test_the_agents_list_names_the_experiment_of_the_best_score(data: DuckDBAssistData) -> None:
    done, _ = _ask(data, "list all agents")
    rows = {r["agent_id"]: (r["fitness"], r["experiment_id"]) for r in done.result.items}
    assert len(rows) == len(done.result.items) == len(AGENTS)
    for agent, scores in _scored().items():
        assert rows[agent] == max(scores), agent


def test_a_lead_never_counts_rows_as_agents() -> None:
    rows = [("agt-a", "exp-1", 0.9), ("agt-a", "exp-2", 0.8), ("agt-b", "exp-1", 0.7)]
    result = StructuredResult(
        type="list",
        title="Best agents",
        columns=["agent_id", "experiment_id", "fitness", "test"],
        items=[{"agent_id": a, "experiment_id": e, "fitness": f, "test": "not tested"} for a, e, f in rows],
        intent="top_agents",
    )
    assert template_lead(result, zh=False).startswith("3 score(s) of 2 agent(s); the best is agt-a (0.900")
    assert template_lead(result, zh=True).startswith("2 个智能体共 3 个得分，最佳是 agt-a（0.900")
