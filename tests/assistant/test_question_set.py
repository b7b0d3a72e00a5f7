"""The assistant on its question set (en and zh), against a real DuckDB database of every fact kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from furnace.assistant.answer import Assistant
from furnace.assistant.evaluation import accuracy, check
from furnace.llm.offline import OfflineEngine
from furnace.storage.duckdb.assist import DuckDBAssistData

from .dataset import NOW

QUESTIONS = yaml.safe_load((Path(__file__).parent / "questions.yaml").read_text(encoding="utf-8"))
TUNED = [(lang, item) for lang, items in QUESTIONS["tuned"].items() for item in items]


@pytest.fixture(scope="module")
def assistant(assist_data: DuckDBAssistData) -> Assistant:
    return Assistant(assist_data, OfflineEngine(), now=lambda: NOW)


def test_the_set_has_sixty_phrasings_per_language_and_covers_every_intent() -> None:
    from furnace.domain.intents import INTENTS

    for lang in ("en", "zh"):
        assert len(QUESTIONS["tuned"][lang]) >= 60, lang
        assert {i["intent"] for i in QUESTIONS["tuned"][lang]} == set(INTENTS), lang


@pytest.mark.parametrize(("lang", "item"), TUNED, ids=[f"{lang}:{item['q']}" for lang, item in TUNED])
def test_question(assistant: Assistant, lang: str, item: dict) -> None:
    verdict = check(assistant, item, latest_experiment="exp-tea")
    assert verdict.ok, verdict.problems


def test_held_out_questions_are_measured_not_tuned(assistant: Assistant) -> None:
    """The held-out part only has to be mostly right; its figure is reported by the bench."""
    items = [item for items in QUESTIONS["heldout"].values() for item in items]
    report = accuracy([check(assistant, item, latest_experiment="exp-tea") for item in items])
    assert report["questions"] >= 40
    assert report["accuracy"] >= 0.8, report
