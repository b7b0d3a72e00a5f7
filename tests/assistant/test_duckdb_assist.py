"""The assistant's DuckDB data layer over a home's live store (its snapshot): scoped, parameterised, limited to
furnace's tables."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

import furnace.analysis as fa
from furnace.assistant.answer import Assistant, AssistantState
from furnace.assistant.results import Query
from furnace.assistant.scope import Scope
from furnace.storage.duckdb.analysis import individuals
from furnace.storage.duckdb.assist import DuckDBAssistData
from furnace.storage.duckdb.db import Database

from .dataset import live_data

NOW = datetime(2026, 11, 30, 10, 0)


@pytest.fixture()
def data(tmp_path) -> DuckDBAssistData:
    db = Database(tmp_path / "rows.duckdb")  # rows written raw, then moved into the home's furnace.sqlite
    with db.transaction() as con:
        for i, (pid, name) in enumerate([("empathetic-coach", "Empathetic Coach"), ("go-reviewer", "Go Reviewer")]):
            body = {
                "name": name,
                "language": "en",
                "expertise": ["x"],
                "style_preferences": [{"dimension": "tone", "value": "lively", "count": 2 + i, "weight": 0.6}],
            }
            con.execute(
                "INSERT INTO elixir_versions (id, version, origin, name, content_hash, body, created_at, language,"
                " expertise) VALUES (?, 1, 'library', ?, ?, ?, ?, 'en', ['x'])",
                [pid, name, f"h{i}", json.dumps(body), NOW],
            )
        con.execute(
            "INSERT INTO experiments (experiment_id, name, config, seed, model, created_at) "
            "VALUES ('exp-night', 'night', '{}', 1, 'offline', ?)",
            [NOW - timedelta(hours=12)],
        )
        for i in range(30):
            con.execute(
                "INSERT INTO experiment_individuals (experiment_id, generation, agent_id, slot, operator, parents,"
                " elixir, system_prompt, fitness, objectives, failure_reasons, created_at)"
                " VALUES ('exp-night', ?, ?, ?, 'crossover', ?, '{}', '', ?, '{}', '[]', ?)",
                [i % 3, f"agt-{i:02d}", i, json.dumps(["empathetic-coach"]), i / 30, NOW - timedelta(hours=10)],
            )
        con.execute(
            "INSERT INTO revisions VALUES ('rev-c1-v2', 'c1', 's1', 'empathetic-coach', 1, ?, 1, 2, 't', 'b', 't',"
            " 'b2', 'offline', ?)",
            [json.dumps(["太正式了，活泼点"]), NOW - timedelta(days=1)],
        )
    return live_data(db, tmp_path)


def test_catalogue_and_scoped_reads(data: DuckDBAssistData) -> None:
    cat = data.catalogue()
    assert set(cat.personas) == {"empathetic-coach", "go-reviewer"} and cat.experiments == {"exp-night": "night"}
    top = data.top_agents(Query(scope=Scope(experiment="exp-night"), limit=5))
    assert [r["agent_id"] for r in top] == ["agt-29", "agt-28", "agt-27", "agt-26", "agt-25"]
    assert data.top_agents(Query(scope=Scope(since=NOW), limit=5)) == []
    revs = data.revisions(Query(scope=Scope(persona="empathetic-coach"), limit=10))
    assert revs[0]["step"] == "V1→V2" and "活泼" in revs[0]["suggestion"]
    assert data.revisions(Query(scope=Scope(persona="go-reviewer"), limit=10)) == []
    prefs = data.preferences(Query(scope=Scope(persona="go-reviewer"), limit=10))
    assert [(p["dimension"], p["count"]) for p in prefs] == [("tone", 3)]


def test_user_text_is_never_spliced_into_sql(data: DuckDBAssistData) -> None:
    evil = "x' OR '1'='1'; DROP TABLE revisions; --"
    assert data.revisions(Query(scope=Scope(persona=evil), limit=10)) == []
    assert data.top_agents(Query(scope=Scope(experiment=evil), limit=10)) == []
    assert len(data.revisions(Query(scope=Scope(), limit=10))) == 1  # the table is still there


def test_end_to_end_with_sessions(data: DuckDBAssistData) -> None:
    assistant = Assistant(data, None, now=lambda: NOW, limit=500)
    state = data.load_state("s1")
    list(assistant.ask("只看 experiment exp-night", state))
    data.save_state(state)
    again = data.load_state("s1")
    assert again.locked == Scope(experiment="exp-night")
    done = list(assistant.ask("which agents scored best?", again))[-1]
    assert len(done.result.items) == 30 and done.result.items[0]["agent_id"] == "agt-29"
    assert data.load_state("other") == AssistantState(session_id="other")


def test_a_failed_or_rejected_individual_has_no_score_in_any_answer_or_analysis(tmp_path) -> None:
    """A reflected child rejected on its minibatch (stored fitness 0, never evaluated on validation) and an
    individual a failure left unscored (a partial fitness) rank nowhere and show no fitness, as the report
    and the app have it; an accepted reflected child ranks by its score."""
    db = Database(tmp_path / "rows.duckdb")
    made = NOW - timedelta(hours=2)
    rows = [  # agent, generation, operator, parents, fitness, failures
        ("seed-a", 0, "seed", [], 0.5, 0),
        ("seed-b", 0, "seed", [], 0.95, 1),  # a failed seed's partial score
        ("agt-good", 1, "crossover", ["seed-a", "seed-b"], 0.6, 0),
        ("agt-failed", 1, "mutation", ["seed-a"], 0.99, 1),  # would top every ranking if its partial counted
        ("agt-rejected", 1, "reflect", ["seed-a"], 0.0, 0),
        ("agt-accepted", 1, "reflect", ["seed-a"], 0.7, 0),
    ]
    with db.transaction() as con:
        con.execute(
            "INSERT INTO experiments (experiment_id, name, config, seed, model, created_at) "
            "VALUES ('exp-r', 'r', '{}', 1, 'offline', ?)",
            [made],
        )
        for slot, (agent, gen, op, parents, fitness, failures) in enumerate(rows):
            con.execute(
                "INSERT INTO experiment_individuals (experiment_id, generation, agent_id, slot, operator, parents,"
                " elixir, system_prompt, fitness, objectives, failures, failure_reasons, created_at)"
                " VALUES ('exp-r', ?, ?, ?, ?, ?, '{}', '', ?, '{}', ?, '[]', ?)",
                [gen, agent, slot, op, json.dumps(parents), fitness, failures, made],
            )
        for agent, won in (("agt-rejected", 0.0), ("agt-accepted", 1.0)):  # the minibatch decisions
            con.execute(
                "INSERT INTO experiment_scores (experiment_id, generation, agent_id, probe, scorer, value, reason)"
                " VALUES ('exp-r', 1, ?, '*', 'minibatch', ?, 'child vs parent on the minibatch')",
                [agent, won],
            )
        for agent in ("agt-good", "agt-failed", "agt-rejected", "agt-accepted"):
            con.execute(
                "INSERT INTO agents (id, lineage, lineage_hash, elixir_version, system_prompt, tools, members,"
                " created_at) VALUES (?, '{}', ?, 1, '', '[]', '[]', ?)",
                [agent, f"lh-{agent}", made],
            )
    data = live_data(db, tmp_path)
    scope = Query(scope=Scope(experiment="exp-r"), limit=10)
    assert [r["agent_id"] for r in data.top_agents(scope)] == ["agt-accepted", "agt-good"]
    fitness = {r["agent_id"]: r["fitness"] for r in data.agents(scope)}
    assert fitness == {"agt-good": 0.6, "agt-failed": None, "agt-rejected": None, "agt-accepted": 0.7}
    assert [(r["persona_id"], r["fitness"]) for r in data.seeds(scope)] == [("seed-a", 0.5), ("seed-b", None)]
    operators = {r["operator"]: r for r in data.operators(scope)}
    assert operators["reflect"]["children"] == 2 and operators["reflect"]["improved"] == 1  # accepted 0.7 > 0.5
    assert operators["reflect"]["mean_fitness"] == 0.7  # the rejected child's 0 is no score
    assert operators["mutation"]["improved"] == 0 and operators["mutation"]["mean_fitness"] is None
    assert operators["crossover"]["improved"] == 1  # 0.6 > seed-a's 0.5 (seed-b has no score to beat)
    done = list(Assistant(data, None, now=lambda: NOW).ask("compare agt-accepted and agt-rejected", AssistantState()))
    assert "only agt-accepted has a score" in done[-1].lead and "agt-rejected has none" in done[-1].lead
    # the notebooks' frame of the same snapshot marks the rejected child, and ranks by the same rule
    frame = individuals(data.db, "exp-r")
    assert dict(zip(frame["agent_id"], frame["rejected"], strict=True)) == {a: a == "agt-rejected" for a, *_ in rows}
    assert fa.best_agent(frame, bred_only=True)["agent_id"] == "agt-accepted"
    assert fa.best_agent(frame)["agent_id"] == "agt-accepted"  # not seed-b's partial 0.95
