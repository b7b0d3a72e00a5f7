"""Rows by their train-test gap: "which agents overfit most?" lists the tested agents by gap (largest first),
"the smallest gap" the other way, the untested last; other questions keep their intent's own order."""

from __future__ import annotations

import pytest

from furnace.assistant.answer import Assistant, AssistantState, Done, Meta, gap_order
from furnace.storage.duckdb.assist import DuckDBAssistData

from .dataset import HELD_OUT, NOW, build_live


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> DuckDBAssistData:
    return build_live(tmp_path_factory.mktemp("gaps"))


def ask(data: DuckDBAssistData, question: str) -> tuple[Done, Meta]:
    events = list(Assistant(data, None, now=lambda: NOW).ask(question, AssistantState()))
    done, meta = events[-1], next(e for e in events if isinstance(e, Meta))
    assert isinstance(done, Done) and done.result is not None
    return done, meta


GAPS = {agent: f["gap"] for figures in HELD_OUT.values() for agent, f in figures["agents"].items()}


@pytest.mark.parametrize(
    ("question", "largest"),
    [
        ("which agents have the largest train-test gap?", True),
        ("which agents overfit most?", True),
        ("哪些智能体过拟合最严重？", True),
        ("list the agents by train-test gap", True),
        ("which agents have the smallest train-test gap?", False),
        ("训练和测试差距最小的智能体", False),
    ],
)
def test_agents_by_their_gap_tested_first_in_order_then_the_rest(data: DuckDBAssistData, question: str, largest: bool):
    done, _ = ask(data, question)
    assert done.result is not None and done.result.order == ("largest_gap" if largest else "smallest_gap")
    rows = done.result.items
    gapped = [r["train_test_gap"] for r in rows if r["train_test_gap"] is not None]
    assert len(gapped) == len([a for a in GAPS if a in {r["agent_id"] for r in rows}]) >= 2
    assert gapped == sorted(gapped, reverse=largest)
    assert all(r["train_test_gap"] is None for r in rows[len(gapped) :])  # the untested, after every tested row
    first = max(GAPS, key=GAPS.get) if largest else min(GAPS, key=GAPS.get)
    assert rows[0]["agent_id"] == first and first in done.lead


def test_a_question_without_a_gap_keeps_its_own_order(data: DuckDBAssistData):
    done, _ = ask(data, "which agents scored best?")
    assert done.result is not None and done.result.order is None
    fitness = [r["fitness"] for r in done.result.items]
    assert fitness == sorted(fitness, reverse=True)


@pytest.mark.parametrize(
    ("words", "order"),
    [
        ("which agents have the largest train-test gap", "largest_gap"),
        ("agents sorted by gap", "largest_gap"),
        ("which agent overfits the most", "largest_gap"),
        ("the smallest gap between train and test", "smallest_gap"),
        ("the least overfit agent", "smallest_gap"),
        ("which agent generalises best", None),  # the best by fitness, shown with its test figures
        ("which agents scored best", None),
        ("the largest experiment", None),
    ],
)
def test_gap_order_reads_the_question(words: str, order: str | None):
    assert gap_order(words) == order
