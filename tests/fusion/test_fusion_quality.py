"""Fusion quality: guardrails only tighten, one language per child, real paraphrases, a working ensemble."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from furnace.domain.agent import Agent
from furnace.domain.errors import InputError
from furnace.domain.lineage import Lineage
from furnace.domain.render import render_prompt
from furnace.fusion.operators import OPERATORS
from furnace.fusion.operators.ensemble import answer
from furnace.llm.offline.engine import OfflineEngine
from furnace.llm.offline.fusion_tasks import paraphrases
from furnace.storage.memory import MemoryStore

from .conftest import COACH, WIT, counting, make_elixir
from .test_operators import TableEmbedder, ctx

TOPICS = ["gambling", "politics", "medical diagnoses", "stock tips", "股票推荐", "赌博", "政治", "weapons"]
NAMES = ["Rival", "Critic", "对手", "Spammer"]


@st.composite
def parents(draw, count: int):
    out = []
    for i in range(count):
        language = draw(st.sampled_from(["en", "zh"]))
        out.append(
            make_elixir(
                f"P{i}",
                language=language,
                identity="你是一位耐心的向导。" if language == "zh" else "You are a patient guide.",
                principles=draw(
                    st.lists(
                        st.sampled_from(["Answer briefly.", "Cite sources.", "回答要简短。"]),
                        min_size=1,
                        max_size=3,
                        unique=True,
                    )
                ),
                priority=draw(st.sampled_from([100, 200, 300])),
                conflicts_with=draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True)),
                constraints={
                    "max_length": draw(st.one_of(st.none(), st.sampled_from([100, 250, 600]))),
                    "forbidden_topics": draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True)),
                    "must_use_markdown": draw(st.booleans()),
                },
            )
        )
    return out


def _kept_or_tightened(child, ps) -> None:
    topics = {t.casefold() for t in child.constraints.forbidden_topics}
    conflicts = {c.casefold() for c in child.conflicts_with}
    for p in ps:
        assert {t.casefold() for t in p.constraints.forbidden_topics} <= topics
        assert {c.casefold() for c in p.conflicts_with} <= conflicts
        if p.constraints.max_length is not None:
            assert child.constraints.max_length is not None
            assert child.constraints.max_length <= p.constraints.max_length


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(ps=parents(2), seed=st.integers(0, 10_000), op=st.sampled_from(["crossover", "ensemble"]))
def test_crossover_and_ensemble_never_drop_a_guardrail(ps, seed, op):
    child = OPERATORS[op].apply(ps, ctx(seed=seed)).child
    _kept_or_tightened(child, ps)


@SETTINGS
@given(ps=parents(1), seed=st.integers(0, 10_000), rate=st.sampled_from([0.05, 0.25, 1.0]))
def test_mutation_never_drops_a_guardrail(ps, seed, rate):
    child = OPERATORS["mutation"].apply(ps, ctx(seed=seed, rate=rate)).child
    _kept_or_tightened(child, ps)


def test_a_union_too_long_to_keep_refuses_the_fusion():
    a = make_elixir("A", constraints={"forbidden_topics": [f"a{i}" for i in range(30)]})
    b = make_elixir("B", constraints={"forbidden_topics": [f"b{i}" for i in range(30)]})
    with pytest.raises(InputError, match="drop a guardrail"):
        OPERATORS["crossover"].apply([a, b], ctx())


ZH = dict(
    language="zh",
    identity="你是一位严谨的护肤顾问，擅长把成分讲清楚。",
    principles=["回答要简短。", "不夸大产品功效。"],
    priority=300,
)
EN = dict(
    language="en",
    identity="You are a field biologist who writes gentle essays.",
    principles=["Answer briefly.", "Cite sources."],
    priority=100,
)
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("first,language", [(ZH, "zh"), (EN, "en")])
def test_a_child_of_two_languages_has_one_identity_in_one_language(first, language):
    other = EN if first is ZH else ZH
    a, b = make_elixir("护肤顾问", **first), make_elixir("Field Biologist", **{**other, "priority": 50})
    child = OPERATORS["crossover"].apply([b, a], ctx()).child
    assert child.language == language
    assert bool(CJK.search(child.identity)) == (language == "zh")
    if language == "en":
        assert not CJK.search(child.identity) and child.identity.endswith(".")
    else:
        assert not re.search(r"[A-Za-z]", child.identity) and child.identity.endswith("。")
    assert child.identity.count("。") + child.identity.count(". ") <= 1  # one sentence


def test_params_name_the_child_language():
    a, b = make_elixir("护肤顾问", **ZH), make_elixir("Field Biologist", **EN)
    child = OPERATORS["crossover"].apply([a, b], ctx(language="en")).child
    assert child.language == "en" and not CJK.search(child.identity)
    with pytest.raises(InputError, match="language"):
        OPERATORS["crossover"].apply([a, b], ctx(language="fr"))


def test_same_meaning_across_languages_collapses_when_the_embedder_can_tell():
    a, b = make_elixir("护肤顾问", **ZH), make_elixir("Field Biologist", **EN)
    multilingual = TableEmbedder([["回答要简短。", "Answer briefly."]])
    result = OPERATORS["crossover"].apply([a, b], ctx(embedder=multilingual))
    assert "Answer briefly." not in result.child.principles and "回答要简短。" in result.child.principles
    assert any("means the same" in n.reason for n in result.notes)
    blind = OPERATORS["crossover"].apply([a, b], ctx()).child  # an embedder that cannot tell keeps both
    assert {"Answer briefly.", "回答要简短。"} <= set(blind.principles)


@pytest.mark.parametrize(
    "principle,language,expected",
    [
        ("Never exaggerate what a product does.", "en", "Avoid exaggerating what a product does."),
        ("State the skin type before recommending.", "en", "Before recommending, state the skin type."),
        ("Always cite sources.", "en", "Cite sources every time."),
        ("Be clear and kind.", "en", "Be kind and clear."),
        ("不要推荐股票。", "zh", "避免推荐股票。"),
        ("推荐前先说明适用肤质。", "zh", "先说明适用肤质，再推荐。"),
        ("回答要简短。", "zh", "回答应当简短。"),
        ("不夸大产品功效。", "zh", "避免夸大产品功效。"),
    ],
)
def test_rewording_is_a_paraphrase_rule_not_a_prefix(principle, language, expected):
    found = paraphrases(principle, language, random.Random(0))
    assert expected in found
    for out in found:
        assert not out.startswith(("请务必", "Make sure to", "Be sure to", "Take care to"))


def test_mutation_rewords_with_a_paraphrase_or_keeps_and_says_so():
    parent = make_elixir("Z", **ZH)
    for seed in range(8):
        result = OPERATORS["mutation"].apply([parent], ctx(seed=seed))
        changed = [(a, b) for a, b in zip(parent.principles, result.child.principles, strict=True) if a != b]
        for before, after in changed:
            assert after in paraphrases(before, "zh", random.Random(seed)) or after != before
            assert not after.startswith("请务必")


def _committee(first=("Data Coach", COACH), second=("Travel Wit", WIT)):
    store = MemoryStore()
    a = store.get_by_ref(store.save_elixir(make_elixir(first[0], **first[1])))
    b = store.get_by_ref(store.save_elixir(make_elixir(second[0], **second[1])))
    result = OPERATORS["ensemble"].apply([a, b], ctx())
    agent = Agent(
        id="agt-x",
        elixir=result.child,
        system_prompt=render_prompt(result.child),
        members=result.members,
        lineage=Lineage(parents=result.members, operator="ensemble", op_version="2"),
    )
    return agent, a, b


def test_an_ensemble_routes_once_and_the_leader_answers_in_its_own_voice():
    agent, coach, wit = _committee()
    llm = counting()
    out = answer(agent, "Tips for travel writing in Lisbon?", llm, [coach, wit])
    assert [c.task.value for c in llm.calls] == ["route", "reply"]
    assert out.leader == wit.ref and out.leader_name == "Travel Wit"
    assert "Travel Wit" in out.reason
    reply = llm.calls[1]
    assert reply.messages[0].content == render_prompt(wit)  # the member's own tone and constraints
    assert reply.inputs["persona"]["id"] == wit.id
    assert len(out.text) <= wit.constraints.max_length
    record = out.transcript()
    assert record["leader"] == str(wit.ref) and record["reason"] == out.reason and record["text"] == out.text
    stats = answer(agent, "Which statistics test fits?", llm, [coach, wit])
    assert stats.leader == coach.ref and len(llm.calls) == 4


def test_a_two_letter_expertise_term_routes():
    agent, chef, gopher = _committee(
        ("Chef", {"expertise": ["home cooking", "knife skills"]}), ("Gopher", {"expertise": ["Go", "concurrency"]})
    )
    out = answer(agent, "How should I review a Go pull request quickly?", counting(), [chef, gopher])
    assert out.leader == gopher.ref and not out.fallback, out.reason


def test_a_repeated_message_is_routed_from_the_cache():
    from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache

    agent, coach, wit = _committee()
    inner = counting()
    ledger = MemoryCallLedger()
    cached = CachedLLM(inner, MemoryResponseCache(), ledger)
    first = answer(agent, "Tips for travel writing in Lisbon?", cached, [coach, wit])
    again = answer(agent, "Tips for travel writing in Lisbon?", cached, [coach, wit])
    assert first == again
    assert [c.task.value for c in inner.calls] == ["route", "reply"]  # the second answer came from the cache


def test_a_failed_routing_is_marked_and_the_first_member_leads():
    from furnace.llm.fakes import FakeLLM

    agent, coach, wit = _committee()
    engine = OfflineEngine()

    def respond(request):
        if request.task.value == "route":
            return {"member": "nobody@9", "reason": "?"}
        return engine.complete(request)

    out = answer(agent, "anything", FakeLLM(respond=respond, model_name=engine.model_name), [coach, wit])
    assert out.leader == coach.ref and out.fallback and "first member" in out.reason


def test_cli_agent_answer_records_who_led(tmp_path):
    import json

    from click.testing import CliRunner

    from furnace.cli import cli

    home = str(tmp_path / "home")
    runner = CliRunner()

    def run(*args):
        result = runner.invoke(cli, ["--home", home, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    store = Runtime(FurnaceSettings(home=tmp_path / "home", embedder="hash")).store
    store.save_elixir(make_elixir("Data Coach", **COACH))
    store.save_elixir(make_elixir("Travel Wit", **WIT))
    agent = json.loads(run("fuse", "data-coach", "travel-wit", "--operator", "ensemble", "--json"))
    out = json.loads(run("agent", "answer", agent["id"], "Tips for travel writing in Lisbon?", "--json"))
    assert out["leader"].startswith("travel-wit@") and out["leader_name"] == "Travel Wit"
    assert out["reason"] and out["text"] and out["fallback"] is False
    human = run("agent", "answer", agent["id"], "Which statistics test fits?")
    assert human.startswith("[Data Coach leads: ")
