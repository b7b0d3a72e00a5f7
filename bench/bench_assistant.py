"""Lab assistant: accuracy on its question set, and what a structured answer saves.

1. **Accuracy** — every question of ``tests/assistant/questions.yaml`` (en and zh; the tuned part
   and the held-out part the rules were never tuned on) asked of the tests' dataset (every kind of
   fact) moved into a home's live store and read as the runtime's assist data reads it (DuckDB over
   its snapshot; ``tests/assistant/dataset.py``, rows written raw, so no experiment seal is checked).
   Reported: accuracy, the share answered by rules vs the model.
   Targets: tuned ≥ 95 % per language; held-out ≥ 80 % (reported separately, never tuned on).
2. **Output size** — for results of 1 to 200 rows: the structured answer (table shown directly +
   a short lead written by the model) vs the model writing the same result as text. The fake
   model's latency is per output token (5 ms + 2 ms/token) and the text answer's length comes from
   the real result rendered as a table, so the ratio follows the result's size — a curve, not one
   number. Target: never slower or longer than the text answer, and ≥ 5x fewer tokens from 20 rows.
"""

from __future__ import annotations

import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from bench.stack import main_for
from furnace.assistant.answer import Assistant, AssistantState
from furnace.assistant.evaluation import accuracy, check
from furnace.assistant.results import Query
from furnace.assistant.scope import Catalogue
from furnace.cli.table import format_table
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.offline.engine import estimate_tokens
from tests.assistant.dataset import NOW, build_live

QUESTIONS = Path(__file__).resolve().parents[1] / "tests" / "assistant" / "questions.yaml"
SIZES = (1, 5, 20, 60, 200)
BASE_S, PER_TOKEN_S = 0.005, 0.002


def _accuracy() -> bool:
    questions = yaml.safe_load(QUESTIONS.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        assistant = Assistant(build_live(Path(tmp)), OfflineEngine(), now=lambda: NOW)
        ok = True
        for part, target in (("tuned", 0.95), ("heldout", 0.80)):
            for lang in ("en", "zh"):
                report = accuracy([check(assistant, i, latest_experiment="exp-tea") for i in questions[part][lang]])
                met = report["accuracy"] >= target
                ok &= met
                print(
                    f"   {part:<7} {lang}: {report['accuracy']:6.1%} of {report['questions']:>3} questions "
                    f"(rules {report['by_rules']:.0%}, model {report['by_model']:.0%}; target ≥{target:.0%})"
                    + ("" if met else "  MISSED")
                )
    return ok


class _Rows:
    """Assistant data holding ``n`` top-agent rows (the result whose size varies)."""

    def __init__(self, n: int) -> None:
        self.rows = [
            {
                "agent_id": f"agt-{i:04d}",
                "experiment_id": "exp-night",
                "generation": i % 4,
                "fitness": round(1 - i / (n + 1), 4),
                "operator": "crossover",
                "created_at": NOW - timedelta(hours=i),
            }
            for i in range(n)
        ]

    def catalogue(self) -> Catalogue:
        return Catalogue(experiments={"exp-night": "night"})

    def known_agent(self, agent_id: str) -> bool:
        return False

    def top_agents(self, q: Query) -> list[dict[str, Any]]:
        return self.rows[: q.limit]


def _output_size() -> bool:
    ok = True
    print(f"   {'rows':>5} {'lead tokens':>12} {'text tokens':>12} {'token ratio':>12} {'speed ratio':>12}")
    for n in SIZES:
        assistant = Assistant(
            _Rows(n),
            SlowLLM(OfflineEngine(), BASE_S, per_token_s=PER_TOKEN_S),
            model_lead=True,
            now=lambda: NOW,
            limit=1000,
        )  # type: ignore[arg-type]
        started = time.perf_counter()
        done = list(assistant.ask("which agents scored best?", AssistantState()))[-1]
        ours_s = time.perf_counter() - started
        ours_tokens = estimate_tokens(done.lead)
        # The model writing the same result as text: as long as the real table, at the same per-token latency.
        text = format_table(done.result.items, done.result.columns)
        text_tokens = estimate_tokens(text)
        text_s = BASE_S + PER_TOKEN_S * text_tokens
        token_ratio, speed_ratio = text_tokens / max(1, ours_tokens), text_s / ours_s
        met = token_ratio >= 1 and speed_ratio >= 1 and (n < 20 or token_ratio >= 5)
        ok &= met
        print(
            f"   {n:>5} {ours_tokens:>12} {text_tokens:>12} {token_ratio:>11.1f}x {speed_ratio:>11.1f}x"
            + ("" if met else "  MISSED")
        )
    return ok


def run() -> bool:
    print("   accuracy on the question set (DuckDB, offline engine):")
    accurate = _accuracy()
    print("   structured answer vs the model writing the result (5 ms + 2 ms/token):")
    return _output_size() and accurate


main = main_for("assistant", run, built_on="tests/assistant/dataset.py (a documented exception)")
