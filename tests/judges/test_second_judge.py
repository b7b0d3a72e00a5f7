"""The second offline judge: selectable by name, independent of the first judge and the REPLY rules,
and in broad agreement with the first judge on what a good answer is."""

from __future__ import annotations

import ast
import inspect

import pytest

from furnace.domain.errors import LLMError
from furnace.domain.render import render_prompt
from furnace.evolution.evaluate import reply
from furnace.llm.offline import OfflineEngine, judge_second
from furnace.llm.offline import judge as first_judge
from furnace.llm.offline.reply_phrases import PHRASES
from furnace.llm.seam import OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE, TaskKind, is_offline, system_user
from furnace.scoring.agreement import spearman
from furnace.scoring.judge import build_judge_request, parse_verdict
from furnace.scoring.probes import load_probe_set
from tests.experiments.helpers import library


def test_selected_by_name_and_only_its_judge_differs() -> None:
    first, second = OfflineEngine(), OfflineEngine(OFFLINE_SECOND_JUDGE)
    assert second.model_name == OFFLINE_SECOND_JUDGE and is_offline(OFFLINE_SECOND_JUDGE)
    elixir = library()[0]
    probe = load_probe_set("writing-en").probes[0]
    answer = reply(first, elixir, render_prompt(elixir), probe, seed=1)
    assert reply(second, elixir, render_prompt(elixir), probe, seed=1) == answer  # the same REPLY rules
    request = build_judge_request(elixir, probe.message, answer, "tone", target={"tone": {"humor": 0.9}})
    one, two = first.complete(request).parsed, second.complete(request).parsed
    assert set(one) == set(two) == {"score", "reason", "feedback"}
    assert one["reason"] != two["reason"]  # other evidence, said in its own words
    assert not parse_verdict(two, "").failed


def test_an_unknown_offline_name_is_refused() -> None:
    with pytest.raises(LLMError, match="no offline model"):
        OfflineEngine("furnace-offline-judge9-v1")


def _strings(module: object, names: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    for name in names:
        for words in getattr(module, name).values():
            found.update(w.casefold() for w in words)
    return found


def test_it_shares_no_marker_or_phrase_table() -> None:
    own = _strings(judge_second, ("HUMOUR_WORDS", "WARMTH_WORDS"))
    first = _strings(first_judge, ("_FORMAL", "_CASUAL", "_WARMTH", "_HUMOUR"))
    assert own and not own & first
    phrases = {
        p.casefold() for tables in PHRASES.values() for part in tables.values() for ps in part.values() for p in ps
    }
    assert not own & phrases  # a marker may occur inside a reply, but no reply phrase is a marker
    imported = {
        node.module
        for node in ast.walk(ast.parse(inspect.getsource(judge_second)))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not {m for m in imported if m.startswith("furnace.llm.offline") or m.startswith("furnace.scoring")}


def _score(engine: OfflineEngine, target: dict[str, object], answer: str, rubric: str = "fidelity") -> float:
    elixir = library()[0]
    request = build_judge_request(elixir, "How should I explain churn?", answer, rubric, target=target)  # type: ignore[arg-type]
    return float(engine.complete(request).parsed["score"])


@pytest.mark.parametrize("name", [OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE])
def test_both_judges_reward_the_target_and_punish_what_it_avoids(name: str) -> None:
    engine = OfflineEngine(name)
    target = {"expertise": ["statistics"], "expect": ["honest", "retention cohorts"], "avoid": ["blame"]}
    bare = _score(engine, target, "Churn went up. Tell the board.")
    good = _score(engine, target, "Be honest: the statistics of your retention cohorts show where churn rose.")
    blaming = _score(engine, target, "Be honest: the statistics of retention cohorts show it; blame the sales team.")
    assert bare < good and blaming < good


def test_the_judges_agree_broadly_but_not_by_construction() -> None:
    first, second = OfflineEngine(), OfflineEngine(OFFLINE_SECOND_JUDGE)
    probes = load_probe_set("writing-en").head(3)
    by_agent: dict[str, dict[str, list[float]]] = {"one": {}, "two": {}}
    differ = 0
    for elixir in library():
        for probe in probes.probes:
            answer = reply(first, elixir, render_prompt(elixir), probe, seed=1)
            request = build_judge_request(elixir, probe.message, answer, "fidelity", target=probes.target_for(probe))
            one, two = first.complete(request).parsed["score"], second.complete(request).parsed["score"]
            by_agent["one"].setdefault(elixir.id, []).append(one)
            by_agent["two"].setdefault(elixir.id, []).append(two)
            differ += one != two
    means = {k: {a: sum(v) / len(v) for a, v in rows.items()} for k, rows in by_agent.items()}
    rho = spearman(means["one"], means["two"])
    assert rho is not None and rho > 0.5  # both read the hidden target
    assert differ > 0  # but not the same numbers


def test_empty_answer_scores_zero_with_feedback() -> None:
    request = system_user(TaskKind.JUDGE, "s", "u", inputs={"answer": "  ", "rubric": "tone"})
    parsed = OfflineEngine(OFFLINE_SECOND_JUDGE).complete(request).parsed
    assert parsed["score"] == 0.0 and parsed["feedback"] == "length: too short"
