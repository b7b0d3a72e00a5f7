"""The offline engine: dispatch, determinism, honesty, missing rules."""

from __future__ import annotations

import pytest

from furnace.domain.errors import LLMError
from furnace.llm.offline import OfflineEngine
from furnace.llm.offline import engine as engine_module
from furnace.llm.seam import LLM, OFFLINE_MODEL_NAME, TaskKind, system_user

PERSONA = {
    "name": "Ada",
    "language": "en",
    "identity": "A careful test engineer.",
    "expertise": ["software testing"],
    "principles": ["Name the smallest next step."],
}


def reply_request(message: str = "How do I start testing?", **kwargs):
    return system_user(
        TaskKind.REPLY, "sys", message, inputs={"persona": PERSONA, "message": message, "instruction": None}, **kwargs
    )


def test_is_an_llm_with_an_honest_name():
    engine = OfflineEngine()
    assert isinstance(engine, LLM)
    assert engine.model_name == OFFLINE_MODEL_NAME
    assert "offline" in engine.model_name and "rules" in engine.model_name
    done = engine.complete(reply_request())
    assert done.model == OFFLINE_MODEL_NAME and done.cost_usd == 0.0 and not done.cached


def test_dispatches_by_task_kind():
    engine = OfflineEngine()
    reply = engine.complete(reply_request())
    assert "software testing" in reply.text and reply.parsed is None
    judged = engine.complete(
        system_user(
            TaskKind.JUDGE,
            "sys",
            "judge",
            inputs={"persona": PERSONA, "message": "m", "answer": reply.text, "rubric": "fidelity"},
        )
    )
    assert isinstance(judged.parsed, dict) and 0.0 <= judged.parsed["score"] <= 1.0


def test_same_request_same_completion():
    first = OfflineEngine().complete(reply_request(seed=5))
    second = OfflineEngine().complete(reply_request(seed=5))
    assert (first.text, first.parsed, first.usage) == (second.text, second.parsed, second.usage)
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0


def test_seed_changes_only_the_wording_choice():
    texts = {OfflineEngine().complete(reply_request(seed=s)).text for s in range(12)}
    assert all("software testing" in t for t in texts)
    assert len(texts) > 1  # phrasing variants are picked by the seeded rng


def test_task_without_a_rule_raises(monkeypatch):
    monkeypatch.delitem(engine_module.HANDLERS, TaskKind.ASSIST)
    with pytest.raises(LLMError, match="no rule for task 'assist'"):
        OfflineEngine().complete(system_user(TaskKind.ASSIST, "sys", "help"))


def test_the_judges_gap_words_never_name_the_descriptor():
    """Every lexicon gap, in both languages, names the gap without a word of any of the concept's names
    (en: a content word's first five letters; zh: a character pair), and its own words express the concept."""
    import re

    from furnace.llm.offline.lexicon import LEXICON, expressed, gap

    for name, item in LEXICON.items():
        for language in ("en", "zh"):
            text = gap(item, language).casefold()
            if re.search(r"[\u4e00-\u9fff]", name):
                han = "".join(re.findall(r"[\u4e00-\u9fff]+", name))
                assert not any(han[i : i + 2] in text for i in range(len(han) - 1)), (name, text)
            else:
                for word in set(re.findall(r"[a-z]{4,}", name)) - {"what", "with", "that", "this", "from", "your"}:
                    assert not re.search(r"\b" + word[:5], text), (name, word, text)
        if not any(k in item.key for k in ("praise", "guarantee", "diagnose", "个股")):  # gaps, not avoid items
            stripped = re.sub(r"^(does not|没有)\s*", "", gap(item, "en").casefold())
            assert expressed(item, stripped) or expressed(item, gap(item, "zh")), name


def test_the_judge_prompt_carries_probe_answer_and_rubric_and_asks_for_gaps():
    from furnace.domain.elixir import Elixir
    from furnace.scoring.judge import build_judge_request

    elixir = Elixir.model_validate({**PERSONA, "principles": ["Quote Horace at every turn."]})
    target = {"expertise": ["threat modelling"], "expect": ["severity"], "language": "en"}
    request = build_judge_request(elixir, "Review my login.", "It is fine.", "fidelity", target=target)
    system, user = (m.content for m in request.messages)
    assert "## Target" in user and "severity" in user and "Review my login." in user and "It is fine." in user
    assert "Horace" not in system + user and "## Persona" not in user  # never the persona's prompt
    assert "gap: " in system and "own words" in system and "Never quote" in system
    assert "Horace" not in str(request.inputs)
