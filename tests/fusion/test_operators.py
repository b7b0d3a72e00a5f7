"""Operators field by field: tone arithmetic, principles, constraints, mutation, ensemble."""

from __future__ import annotations

import random

import pytest

from furnace.domain.elixir import Tone
from furnace.domain.errors import InputError
from furnace.fusion.operators import OPERATORS, OperatorContext, expertise_distance, route
from furnace.fusion.operators.base import weighted_tone
from furnace.fusion.operators.conflicts import contradiction
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.engine import OfflineEngine
from furnace.storage.memory import MemoryStore

from .conftest import COACH, WIT, counting, make_elixir


class TableEmbedder:
    """Vectors from a table (unknown texts get a unique axis): makes similarity explicit."""

    name = "table"

    def __init__(self, groups: list[list[str]]) -> None:
        self.index = {t: i for i, g in enumerate(groups) for t in g}

    def embed(self, texts):
        out = []
        for t in texts:
            i = self.index.setdefault(t, len(self.index) + 100)
            vec = [0.0] * 400
            vec[i] = 1.0
            out.append(vec)
        return out


def ctx(llm=None, embedder=None, **params) -> OperatorContext:
    base = {"seed": 0, "similarity_threshold": 0.55, "temperature": 0.4, "rate": 0.25}
    base.update(params)
    return OperatorContext(
        llm=llm or OfflineEngine(),
        embedder=embedder or TableEmbedder([]),
        rng=random.Random(base["seed"]),
        params=base,
        child_id="agt-test",
    )


def _shape(elixir):
    """What a mutation may change: tone, principles, expertise, constraints."""
    return (elixir.tone, elixir.principles, elixir.expertise, elixir.constraints)


def test_tone_is_the_exact_priority_weighted_mean() -> None:
    a = make_elixir("A", tone={"formality": 0.8, "conciseness": 0.1, "humor": 0.2, "empathy": 1.0}, priority=300)
    b = make_elixir("B", tone={"formality": 0.4, "conciseness": 0.3, "humor": 0.9, "empathy": 0.0}, priority=100)
    tone = weighted_tone([a, b])
    assert tone == Tone(formality=0.7, conciseness=0.15, humor=0.375, empathy=0.75)
    assert tone.formality == 0.7  # exactly the float nearest 0.7, not 0.7000000000000001
    equal = weighted_tone(
        [make_elixir("C", tone={"humor": 0.1}, priority=0), make_elixir("D", tone={"humor": 0.2}, priority=0)]
    )
    assert equal.humor == 0.15
    child = OPERATORS["crossover"].apply([a, b], ctx()).child
    assert child.tone == tone


def test_crossover_collapses_same_meaning_to_higher_priority_wording() -> None:
    a = make_elixir("A", principles=["Keep your answers short.", "Cite sources."], priority=100)
    b = make_elixir("B", principles=["Answer briefly.", "Use examples."], priority=200)
    emb = TableEmbedder([["Answer briefly.", "Keep your answers short."]])
    result = OPERATORS["crossover"].apply([a, b], ctx(embedder=emb))
    assert result.child.principles == ("Answer briefly.", "Use examples.", "Cite sources.")
    note = next(n for n in result.notes if n.field == "principles")
    assert note.chose == "Answer briefly." and "means the same" in note.reason and "B" in note.reason


def test_contradiction_on_a_priority_tie_goes_to_adjudicate() -> None:
    a = make_elixir("A", principles=["Answer briefly."], priority=100)
    b = make_elixir("B", principles=["Give detailed, thorough explanations."], priority=100)
    llm = counting()
    result = OPERATORS["crossover"].apply([a, b], ctx(llm=llm))
    tasks = [c.task.value for c in llm.calls]
    assert tasks.count("adjudicate") == 1 and tasks.count("identity") == 1
    assert result.child.principles == ("Give detailed, thorough explanations.",)  # rule: the more specific wording
    note = next(n for n in result.notes if n.field == "principles")
    assert "length" in note.reason and "adjudicated" in note.reason


def test_contradiction_detector() -> None:
    assert contradiction("Use formal language.", "Be casual and playful.") == "formality"
    assert contradiction("Use markdown headings.", "Never use markdown.") == "markdown"
    assert contradiction("Avoid jargon.", "Use jargon freely.") == "negation"
    assert contradiction("回答要简短。", "请详细解释。") == "length"
    assert contradiction("Answer briefly.", "Keep your answers short.") is None
    assert contradiction("Cite sources.", "Use examples.") is None


def test_crossover_unions_and_resolves_constraints() -> None:
    a, b = make_elixir("Data Coach", **COACH), make_elixir("Travel Wit", **WIT)
    child = OPERATORS["crossover"].apply([b, a], ctx()).child  # order given does not beat priority
    assert child.expertise == ("statistics", "python data analysis", "travel writing")
    assert child.tools == ("python", "sql", "maps")
    assert child.constraints.forbidden_topics == ("gambling", "politics")
    assert child.constraints.max_length == 200 and child.constraints.must_use_markdown is False
    assert [s.input for s in child.few_shots] == ["q1", "q3"]
    assert child.identity == "You are a seasoned data scientist and a witty travel writer in one voice."
    assert child.priority == 300 and child.language == "en"


def test_constraint_ties_use_the_stated_rules() -> None:
    a = make_elixir("A", constraints={"max_length": 300, "must_use_markdown": True})
    b = make_elixir("B", constraints={"max_length": 150})
    result = OPERATORS["crossover"].apply([a, b], ctx())
    assert result.child.constraints.max_length == 150
    assert result.child.constraints.must_use_markdown is False
    notes = {n.field: n for n in result.notes}
    assert "strictest" in notes["constraints.max_length"].reason
    assert "adjudicated" in notes["constraints.must_use_markdown"].reason


def test_mutation_is_seeded_and_rate_bounded() -> None:
    parent = make_elixir("Data Coach", **COACH)
    op = OPERATORS["mutation"]
    one = op.apply([parent], ctx(seed=7)).child
    again = op.apply([parent], ctx(seed=7)).child
    assert one == again
    results = [op.apply([parent], ctx(seed=s, rate=0.05)) for s in range(24)]
    assert len({r.child.content_hash for r in results}) > 1
    for result in results:
        child = result.child
        changed = [d for d in Tone.DIMENSIONS if getattr(child.tone, d) != getattr(parent.tone, d)]
        assert len(changed) <= 1
        for d in changed:
            assert abs(getattr(child.tone, d) - getattr(parent.tone, d)) <= 0.05 + 1e-9
            assert 0.0 <= getattr(child.tone, d) <= 1.0
        moved = any("moved" in n.reason for n in result.notes)
        if moved:  # emphasis: the same principles, one moved to the front
            assert sorted(child.principles) == sorted(parent.principles) or child.expertise != parent.expertise
        else:
            assert sum(a != b for a, b in zip(child.principles, parent.principles, strict=True)) <= 1
        assert sorted(child.expertise) == sorted(parent.expertise)
    # rate is each gene's chance: at 0.05 almost always one gene (one note), at 1.0 all four
    assert sum(len(r.notes) for r in results) <= 1.25 * len(results) and all(r.notes for r in results)
    fields = {n.field.split("[")[0].split(".")[0] for r in results for n in r.notes}
    assert {"tone", "principles", "expertise", "constraints"} <= fields  # every gene is drawn at some seed
    full = op.apply([parent], ctx(seed=3, rate=1.0))
    assert len(full.notes) == 4 and full.child.constraints != parent.constraints
    with pytest.raises(InputError, match="rate"):
        op.apply([parent], ctx(rate=1.5))


def test_mutation_can_change_what_a_persona_leads_with() -> None:
    parent = make_elixir("Data Coach", **COACH)
    leads = {
        (r.child.principles[0], r.child.expertise[0])
        for r in (OPERATORS["mutation"].apply([parent], ctx(seed=s, rate=0.05)) for s in range(40))
    }
    assert any(p != parent.principles[0] for p, _ in leads) and any(e != parent.expertise[0] for _, e in leads)


def test_a_mutant_is_never_a_copy_of_its_parent() -> None:
    """A drawn gene that comes back unchanged (no paraphrase rule fits the principle, nothing to reorder,
    every constraint at its tightest) makes the mutation change another gene; the notes say both."""
    parent = make_elixir(
        "Flat",
        language="zh",
        identity="你是一位顾问。",
        principles=["用具体数字举例说明。"],  # no zh paraphrase rule fits
        expertise=["家庭预算"],  # nothing to reorder
        constraints={
            "max_length": 120,  # already the tightest limit, every zh topic forbidden, markdown required
            "forbidden_topics": ["政治", "医疗诊断", "法律意见", "赌博", "个人投资建议"],
            "must_use_markdown": True,
        },
    )
    kept = 0
    for seed in range(40):
        result = OPERATORS["mutation"].apply([parent], ctx(seed=seed, rate=0.05))
        assert _shape(result.child) != _shape(parent)
        kept += any("kept" in n.reason or n.chose == "kept" for n in result.notes)
    assert kept  # some seeds drew a gene that could not change first, and said so


def test_neighbourhood_lists_every_single_move_by_gene_and_kind() -> None:
    from furnace.fusion.operators.mutation import neighbourhood

    parent = make_elixir("Data Coach", **COACH)  # max_length 200, gambling forbidden, no markdown
    hood = neighbourhood(parent)
    assert hood["emphasis"] == {
        "principles": ["lead-principle:Cite sources.", "lead-principle:Use formal language."],
        "expertise": ["lead-expertise:python data analysis"],
    }
    assert hood["principle"] == {"reword": [f"reword:{p}" for p in parent.principles]}
    assert hood["constraint"]["length"] == ["max_length:120"]  # only tighter limits
    assert "topic:gambling" not in hood["constraint"]["topic"] and len(hood["constraint"]["topic"]) == 4
    assert hood["constraint"]["markdown"] == ["markdown:"]
    assert hood["tone"]["formality"] == ["tone-up:formality", "tone-down:formality"]
    pinned = neighbourhood(make_elixir("Edge", tone={"formality": 1.0, "conciseness": 0.0}))
    assert pinned["tone"]["formality"] == ["tone-down:formality"] and pinned["tone"]["conciseness"] == [
        "tone-up:conciseness"
    ]


def test_mutation_makes_exactly_the_moves_it_is_given() -> None:
    from furnace.fusion.operators.mutation import neighbourhood

    parent = make_elixir("Data Coach", **COACH)
    op = OPERATORS["mutation"]
    for kinds in neighbourhood(parent).values():
        for keys in kinds.values():
            for key in keys:
                result = op.apply([parent], ctx(seed=3, moves=[key]))
                child = result.child
                kind, _, arg = key.partition(":")
                kept = result.notes[0].chose == "kept" or "kept" in result.notes[0].reason
                assert len(result.notes) == 1 or (kind == "reword" and kept), key  # one move, one note
                if kind == "lead-principle":
                    assert child.principles[0] == arg and sorted(child.principles) == sorted(parent.principles)
                    assert child.expertise == parent.expertise and child.tone == parent.tone
                elif kind == "lead-expertise":
                    assert child.expertise[0] == arg and child.principles == parent.principles
                elif kind in ("tone-up", "tone-down"):
                    old, new = getattr(parent.tone, arg), getattr(child.tone, arg)
                    assert (new > old) == (kind == "tone-up") and abs(new - old) <= 0.25 + 1e-9
                    assert all(getattr(child.tone, d) == getattr(parent.tone, d) for d in Tone.DIMENSIONS if d != arg)
                elif kind == "max_length":
                    assert child.constraints.max_length == int(arg)
                elif kind == "topic":
                    assert child.constraints.forbidden_topics == (*parent.constraints.forbidden_topics, arg)
                elif kind == "markdown":
                    assert child.constraints.must_use_markdown is True
                elif not kept:  # reword: that principle only
                    index = parent.principles.index(arg)
                    assert child.principles[index] != arg and child.principles[:index] == parent.principles[:index]
                else:  # no paraphrase rule fits that principle: said, and another gene changed instead
                    assert child != parent and "no paraphrase rule" in result.notes[0].reason
                assert op.apply([parent], ctx(seed=3, moves=[key])).child == child  # same params, same child
    both = op.apply([parent], ctx(seed=1, moves=["lead-expertise:python data analysis", "max_length:120"])).child
    assert both.expertise[0] == "python data analysis" and both.constraints.max_length == 120


def test_a_given_move_that_does_not_apply_is_said_and_something_else_changes() -> None:
    parent = make_elixir("Data Coach", **COACH)
    result = OPERATORS["mutation"].apply(
        [parent], ctx(seed=2, moves=["lead-principle:Answer briefly."])
    )  # first already
    assert result.notes[0].chose == "kept" and "first or absent" in result.notes[0].reason
    assert _shape(result.child) != _shape(parent)
    for bad in (["shuffle:everything"], "lead-principle:x", [3]):
        with pytest.raises(InputError, match="move"):
            OPERATORS["mutation"].apply([parent], ctx(moves=bad))


def test_mutation_clamps_at_bounds() -> None:
    parent = make_elixir("Edge", tone={"formality": 1.0, "conciseness": 1.0, "humor": 1.0, "empathy": 1.0})
    for seed in range(10):
        child = OPERATORS["mutation"].apply([parent], ctx(seed=seed, rate=1.0)).child
        assert all(0.0 <= getattr(child.tone, d) <= 1.0 for d in Tone.DIMENSIONS)


def test_ensemble_members_and_routing() -> None:
    store = MemoryStore()
    a = store.get_by_ref(store.save_elixir(make_elixir("Data Coach", **COACH)))
    b = store.get_by_ref(store.save_elixir(make_elixir("Travel Wit", **WIT)))
    result = OPERATORS["ensemble"].apply([a, b], ctx())
    assert result.members == (a.ref, b.ref)
    from furnace.domain.agent import Agent
    from furnace.domain.lineage import Lineage

    agent = Agent(
        id="agt-x",
        elixir=result.child,
        system_prompt="p",
        members=result.members,
        lineage=Lineage(parents=result.members, operator="ensemble", op_version="1"),
    )
    llm = counting()
    assert route(agent, "Which statistics test fits?", llm) == a.ref
    assert route(agent, "Tips for travel writing in Lisbon?", llm) == b.ref
    assert len(llm.calls) == 2 and {c.task.value for c in llm.calls} == {"route"}
    bad = FakeLLM([{"member": "nobody@9", "reason": "?"}])
    assert route(agent, "anything", bad) == a.ref  # invalid answer: the first member leads


def test_expertise_distance() -> None:
    a = make_elixir("A", expertise=["python data analysis"])
    b = make_elixir("B", expertise=["data analysis with python"])
    c = make_elixir("C", expertise=["classical poetry"])
    assert expertise_distance([a, b]) == pytest.approx(0.0)
    assert expertise_distance([a, c]) == 1.0


def test_offline_identity_stays_short_under_repeated_crossover() -> None:
    """Fusing children of children must not grow the identity past the elixir limit."""
    import random

    from furnace.domain.elixir import MAX_IDENTITY
    from furnace.llm.offline.fusion_tasks import identity
    from furnace.llm.seam import LLMRequest, Message, TaskKind

    sentence = "You are a meticulous academic editor who checks every citation."
    for generation in range(8):
        parents = [
            {"identity": sentence, "priority": 100},
            {"identity": f"You are a lively blogger number {generation} who loves long sunny walks.", "priority": 90},
        ]
        request = LLMRequest(
            task=TaskKind.IDENTITY,
            messages=(Message(role="user", content="x"),),
            inputs={"language": "en", "parents": parents},
        )
        sentence = identity(request, random.Random(0))[1]["identity"]
        assert len(sentence) <= MAX_IDENTITY
        assert sentence.count("in one voice") == 1 and sentence.count(" and ") <= 2
    assert sentence.startswith("You are a meticulous academic editor")


def test_child_names_name_each_ancestor_once() -> None:
    from furnace.domain.elixir import parse_elixir
    from furnace.fusion.operators.base import joined_name

    def named(name: str):  # noqa: ANN202
        return parse_elixir({"name": name, "identity": "x.", "expertise": ["x"], "principles": ["x."]})

    child = joined_name([named("Coach × Mentor"), named("Mentor × Copywriter")], " × ")
    assert child == "Coach × Mentor × Copywriter"
