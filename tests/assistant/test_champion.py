""" "The champion" names an agent: its lineage and its judge's notes are the champion's, of the experiment
asked about (else the latest), never the whole library's weakest notes."""

from __future__ import annotations

import pytest

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta
from furnace.assistant.scope import Catalogue
from furnace.storage.duckdb.assist import DuckDBAssistData

from .dataset import AGENTS, EXPERIMENTS, HELD_OUT, NOW, build_live


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> DuckDBAssistData:
    return build_live(tmp_path_factory.mktemp("champion"))


def ask(data: object, question: str) -> tuple[Done, Meta | None]:
    events = list(Assistant(data, None, now=lambda: NOW).ask(question, AssistantState()))  # type: ignore[arg-type]
    done = events[-1]
    assert isinstance(done, Done)
    return done, next((e for e in events if isinstance(e, Meta)), None)


LATEST = min(EXPERIMENTS, key=lambda e: EXPERIMENTS[e][1])  # created the fewest hours ago
WITHOUT_HELD_OUT = next(e for e in EXPERIMENTS if "champion" not in HELD_OUT.get(e, {}))


def best_scored(experiment: str) -> str:
    """The best-scored bred agent of ``experiment`` that did not fail, from the dataset's own table."""
    rows = [
        (fitness, agent) for agent, (eid, *_, fitness, failures) in AGENTS.items() if eid == experiment and not failures
    ]
    return max(rows)[1]


@pytest.mark.parametrize(
    ("question", "intent"),
    [
        ("show the champion's lineage", "ancestors"),
        ("where did the champion come from?", "ancestors"),
        ("冠军是怎么来的？", "ancestors"),
        ("descendants of the champion", "descendants"),
    ],
)
def test_the_champions_lineage_is_the_latest_experiments_champions(data: DuckDBAssistData, question: str, intent: str):
    champion = HELD_OUT[LATEST]["champion"]
    done, meta = ask(data, question)
    assert not done.clarify and meta is not None and meta.intent == intent
    assert champion in done.lead and LATEST in done.lead
    named, _ = ask(data, question.replace("the champion", champion).replace("冠军", champion))
    assert done.result is not None and named.result is not None
    assert done.result.items == named.result.items  # the same answer as naming the agent


def test_the_judges_notes_on_the_best_agent_are_the_champions_in_the_experiment_it_won(data: DuckDBAssistData):
    champion = HELD_OUT[LATEST]["champion"]
    done, meta = ask(data, "what did the judge say about the best agent?")
    assert meta is not None and (meta.intent, meta.scope.experiment) == ("judge_feedback", LATEST)
    assert done.result is not None and done.result.items
    assert {r["agent_id"] for r in done.result.items} == {champion}
    everything, _ = ask(data, "what did the judges say?")
    assert everything.result is not None and {r["agent_id"] for r in everything.result.items} > {champion}


def test_an_experiment_without_a_held_out_champion_names_its_best_scored_agent(data: DuckDBAssistData):
    done, meta = ask(data, f"what did the judge say about the champion of {WITHOUT_HELD_OUT}?")
    best = best_scored(WITHOUT_HELD_OUT)
    assert meta is not None and meta.scope.experiment == WITHOUT_HELD_OUT
    assert f"{WITHOUT_HELD_OUT} is {best}" in done.lead
    assert done.result is not None and {r["agent_id"] for r in done.result.items} == {best}


class _NoExperiments:
    def catalogue(self) -> Catalogue:
        return Catalogue(personas={"go-reviewer": "Terse Go Reviewer"})

    def known_agent(self, agent_id: str) -> bool:
        return False


def test_with_no_experiment_the_champion_is_asked_for_not_guessed():
    done, meta = ask(_NoExperiments(), "show the champion's lineage")
    assert done.clarify and meta is None and "No experiment has a champion yet" in done.lead
