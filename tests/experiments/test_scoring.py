"""Scorers: rules, brief fit, judge (prompt, parser, offline handler), diversity, Pareto."""

from __future__ import annotations

import random

import pytest

from furnace.domain.elixir import parse_elixir
from furnace.domain.errors import InputError, LLMTimeout
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.judge import judge
from furnace.llm.seam import TaskKind
from furnace.scoring import (
    Brief,
    Score,
    brief_fit,
    constraint_compliance,
    judge_answer,
    load_probe_set,
    pareto_front,
    weighted_fitness,
)
from furnace.scoring.diversity import diversity
from furnace.scoring.judge import build_judge_request, parse_verdict
from furnace.scoring.probes import parse_probe_set

BASE = {
    "name": "Tea Marketer",
    "identity": "A marketer for tea brands.",
    "expertise": ["product launches", "tea tasting"],
    "principles": ["Lead with the customer's benefit."],
    "tone": {"formality": 0.3, "conciseness": 0.8, "humor": 0.6, "empathy": 0.7},
    "constraints": {"max_length": 100, "forbidden_topics": ["health claims"], "must_use_markdown": True},
}


def persona(**changes):
    return parse_elixir({**BASE, **changes})


def test_constraints_rules_pass_and_fail_with_reasons():
    e = persona()
    ok = constraint_compliance(e, "## Oolong\n- fresh launch")
    assert ok.value == 1.0 and "markdown present" in ok.reason
    long = constraint_compliance(e, "## x\n" + "a" * 195)
    assert long.value == pytest.approx((0.5 + 1 + 1) / 3) and "over" in long.reason
    bad = constraint_compliance(e, "It cures colds — health claims galore")
    assert bad.value == pytest.approx(1 / 3) and "health claims" in bad.reason and "markdown required" in bad.reason
    failed = constraint_compliance(e, None, error="reply failed: timeout")
    assert failed.failed and failed.value == 0 and "timeout" in failed.reason


def test_brief_fit_rewards_structural_closeness_without_a_model():
    brief = Brief(
        expertise=["product launches", "statistics"],
        tone={"formality": 0.3, "humor": 0.6},
        constraints={"max_length": 100, "must_use_markdown": True},
        language="en",
    )
    close = brief_fit(persona(), brief)
    far = brief_fit(
        persona(tone={"formality": 1.0, "humor": 0.0}, language="zh", constraints={"max_length": 4000}), brief
    )
    assert 0 <= far.value < close.value <= 1
    assert "expertise 1/2" in close.reason
    assert brief_fit(persona(), Brief()).value == 1.0


def test_judge_request_is_structured_and_parser_never_raises():
    req = build_judge_request(persona(), "hi", "## hello", "tone", seed=3)
    assert req.task == TaskKind.JUDGE and req.json_schema["required"] == ["score", "reason"]
    assert "feedback" in req.json_schema["properties"]  # asked for; a judge that omits it still scores
    assert req.inputs["rubric"] == "tone" and "persona" not in req.inputs  # never the persona's prompt
    assert req.inputs["reference"]["tone"]["formality"] == persona().tone.formality  # only the yardstick
    assert "## Answer to evaluate\n## hello" in req.messages[1].content
    assert parse_verdict({"score": 0.4, "reason": "ok"}, "").value == 0.4
    with_feedback = parse_verdict({"score": 0.4, "reason": "ok", "feedback": "missing: a, b ; tone: too formal"}, "")
    assert with_feedback.feedback == "missing: a, b; tone: too formal"
    for parsed, text in [(None, "not json"), ({"score": 7}, ""), ({"reason": "x"}, ""), ({"score": "x"}, "")]:
        s = parse_verdict(parsed, text)
        assert s.failed and s.value == 0 and s.reason


def test_judge_call_failure_is_a_failure_score():
    s = judge_answer(FakeLLM([LLMTimeout("slow")]), persona(), "hi", "## x", "fidelity")
    assert s.failed and "judge call failed" in s.reason
    assert judge_answer(FakeLLM(), persona(), "hi", None, "tone", error="reply failed").failed


TARGETS = {
    "en": {
        "expertise": ["product launches"],
        "expect": ["tasting notes", "call to action"],
        "avoid": ["discount"],
        "tone": {"formality": 0.3, "empathy": 0.8},
        "constraints": {"max_length": 200, "must_use_markdown": True},
        "language": "en",
    },
    "zh": {
        "expertise": ["产品发布"],
        "expect": ["茶叶品鉴", "行动号召"],
        "avoid": ["折扣"],
        "tone": {"formality": 0.3, "empathy": 0.8},
        "constraints": {"max_length": 200, "must_use_markdown": True},
        "language": "zh",
    },
}
GOOD = {
    "en": "## Product launches\n- tasting notes of orchid, I totally understand the wait! Call to action: order now",
    "zh": "## 产品发布\n- 茶叶品鉴吧！我理解你的期待。行动号召：快来尝尝",
}
BAD = {
    "en": "Therefore, please consider a discount regarding this matter. " * 5,
    "zh": "因此，您务必考虑折扣。" * 20,
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_offline_judge_scores_against_the_target_with_feedback(lang):
    e, target = persona(language=lang), TARGETS[lang]
    for rubric in ("fidelity", "tone", "preference"):
        req = build_judge_request(e, "msg", GOOD[lang], rubric, target=target)
        text, parsed = judge(req, random.Random(0))
        assert 0 <= parsed["score"] <= 1 and parsed["reason"]
        assert judge(req, random.Random(9)) == (text, parsed)  # deterministic

    def verdict(answer, rubric):
        return judge(build_judge_request(e, "m", answer, rubric, target=target), random.Random(0))[1]

    good, bad = verdict(GOOD[lang], "fidelity"), verdict(BAD[lang], "fidelity")
    assert good["score"] > bad["score"] and good["feedback"] == ""
    assert bad["feedback"].count("gap: ") == 3 and "avoid: " in bad["feedback"]
    for part in ("format: needs markdown", "length: over 200"):
        assert part in bad["feedback"]
    for descriptor in (*target["expertise"], *target["expect"], *target["avoid"]):  # gaps in the judge's words
        assert descriptor.casefold() not in bad["feedback"].casefold()
    tone_good, tone_bad = verdict(GOOD[lang], "tone"), verdict(BAD[lang], "tone")
    assert tone_good["score"] > tone_bad["score"]
    assert "tone: too formal" in tone_bad["feedback"] and "tone: needs warmth" in tone_bad["feedback"]


def test_tone_within_the_gap_earns_no_feedback():
    # humour is read as 0.2 (absent) or 0.8 (present): present against a 0.6 target is a 0.2 gap, not "less humour"
    target = {"tone": {"humor": 0.6}, "language": "en"}
    funny, flat = "Remember: this is not rocket science.", "This is a plain note."
    verdicts = [
        judge(build_judge_request(persona(), "m", a, "tone", target=target), random.Random(0))[1] for a in (funny, flat)
    ]
    assert verdicts[0]["feedback"] == "" and verdicts[1]["feedback"] == "tone: needs humour"
    assert verdicts[0]["score"] > verdicts[1]["score"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_offline_judge_is_not_circular(lang):
    """The persona under test cannot raise its own fidelity: an answer that copies the persona's
    principles scores no better than one without them, and the persona's words do not matter."""
    target = TARGETS[lang]
    words = ["Quote Horace at every turn", "Mention the moon landing"] if lang == "en" else ["引用古诗", "提到登月"]
    copier = persona(language=lang, principles=words, expertise=words)
    other = persona(language=lang)
    echo = "## " + " ".join(words)
    plain = "## hello there"

    def fidelity(e, answer):
        return judge(build_judge_request(e, "m", answer, "fidelity", target=target), random.Random(0))[1]["score"]

    assert fidelity(copier, echo) == fidelity(other, echo) == fidelity(copier, plain)
    assert fidelity(copier, GOOD[lang]) > fidelity(copier, echo)


def test_judge_prompt_states_the_target_only_when_given():
    with_target = build_judge_request(persona(), "m", "a", "fidelity", target=TARGETS["en"])
    assert "## Target" in with_target.messages[1].content and "tasting notes" in with_target.messages[1].content
    assert with_target.inputs["target"] == TARGETS["en"]
    without = build_judge_request(persona(), "m", "a", "fidelity")
    assert "## Target" not in without.messages[1].content and without.inputs["target"] is None


def test_constraints_follow_the_target_where_it_sets_them():
    e = persona(constraints={"max_length": 1000, "must_use_markdown": True})
    plain = "short plain answer"
    assert constraint_compliance(e, plain).value == pytest.approx(0.5)  # persona wants markdown
    target = {"constraints": {"max_length": 10, "must_use_markdown": False}}
    s = constraint_compliance(e, plain, target=target)
    assert s.value == pytest.approx((10 / len(plain) + 1) / 2) and "(target)" in s.reason


def test_offline_judge_checks_learned_preferences():
    e = persona(style_preferences=[{"dimension": "emoji", "value": "more emoji"}])
    with_emoji = judge(build_judge_request(e, "m", "Nice tea 🍵", "preference"), random.Random(0))[1]
    without = judge(build_judge_request(e, "m", "Nice tea", "preference"), random.Random(0))[1]
    assert with_emoji["score"] == 1.0 and without["score"] == 0.0 and "missed" in without["reason"]


def test_diversity_and_pareto_and_weights():
    assert diversity([1, 0], []).value == 1.0
    assert diversity([1, 0], [[1, 0]]).value == 0.0
    assert diversity([1, 0], [[0, 1]]).value == 1.0
    items = {"a": {"x": 1, "y": 0}, "b": {"x": 0, "y": 1}, "c": {"x": 0.5, "y": 0.5}, "d": {"x": 0.4, "y": 0.4}}
    assert pareto_front(items, ["x", "y"]) == ["a", "b", "c"]
    assert weighted_fitness({"x": 1.0, "y": 0.0}, {"x": 3, "y": 1}) == 0.75
    assert Score(1.7, "clamped").value == 1.0


def test_probe_sets_ship_in_both_languages_and_validate():
    en, zh = load_probe_set("writing-en"), load_probe_set("writing-zh")
    assert en.language == "en" and zh.language == "zh" and en.brief and zh.brief
    support = load_probe_set("support-en")
    assert support.brief is None and support.brief_for(support.probes[2]) is not None
    assert len(en.head(2).probes) == 2
    with pytest.raises(InputError) as err:
        parse_probe_set({"name": "x", "probes": [{"id": "a", "message": ""}]})
    assert "probes.0.message" in str(err.value)
    with pytest.raises(InputError):
        load_probe_set("no-such-set")


def test_printed_pareto_front_is_full_or_says_how_many_more():
    from furnace.evolution.report import cut_list

    ids = [f"agt-{i}" for i in range(15)]
    assert cut_list(ids[:12]) == ", ".join(ids[:12])  # up to 12: every id, no ellipsis
    cut = cut_list(ids)
    assert cut.startswith("agt-0, agt-1") and cut.endswith("agt-11, … and 3 more") and "agt-12" not in cut
