"""The reflective operator: offline rules, validated edits, lineage and caching, unusable feedback."""

from __future__ import annotations

import random

import pytest

from furnace.domain.errors import LLMMalformedOutput
from furnace.fusion.embedding import HashEmbedder
from furnace.fusion.fuse import fuse
from furnace.fusion.operators.reflect import NoUsableFeedback, apply_edits, build_reflect_request
from furnace.fusion.synthesis import MemoryKV, SynthesisCache
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.engine import OfflineEngine
from furnace.llm.offline.reflect import propose
from furnace.scoring.feedback import reflection_brief, revision_feedback
from fusion.conftest import COACH, counting, make_elixir

FEEDBACK = (
    "probe: churn-numbers (0.31)\n"
    "message: Our monthly churn went from 3% to 5%. How should I explain this to the team?\n"
    "missing: habit building, tasting notes\n"
    "tone: too formal\n"
    "length: over 150\n\n"
    "probe: launch-note (0.44)\n"
    "message: Write a short launch note.\n"
    "tone: too casual\n"
    "format: needs markdown\n"
    "user: make it sing"
)


def coach():
    return make_elixir("Data Coach", **COACH)


def test_offline_rules_map_feedback_categories_to_targeted_edits():
    persona = coach().model_dump(mode="json")
    out = propose(persona, FEEDBACK)
    kinds = [(e["kind"], e.get("dimension")) for e in out["edits"]]
    assert kinds == [("add_principle", None), ("tone", "formality"), ("max_length", None), ("markdown", None)]
    added = out["edits"][0]["text"]
    assert "habit building" in added and "tasting notes" in added and "monthly churn" in added
    assert out["edits"][1]["delta"] < 0  # the weakest probe's "too formal" wins over the next one's "too casual"
    assert out["edits"][2]["value"] == 150 and out["edits"][3]["value"] is True
    assert "user: make it sing" in out["unused"]


def test_offline_rules_are_deterministic_whatever_the_seed():
    parent = coach()
    engine = OfflineEngine()
    answers = {str(engine.complete(build_reflect_request(parent, FEEDBACK, seed=s)).parsed) for s in (0, 1, 99)}
    assert len(answers) == 1
    assert propose(parent.model_dump(mode="json"), FEEDBACK) == propose(parent.model_dump(mode="json"), FEEDBACK)


def test_missing_items_already_in_a_principle_rewrite_it_and_avoid_drops_it():
    persona = coach().model_dump(mode="json")  # principles: Answer briefly. / Cite sources. / Use formal language.
    out = propose(persona, "missing: cite sources\n\nprobe: x\navoid: formal language")
    assert out["edits"][0] == {
        "kind": "rewrite_principle",
        "index": 1,
        "text": "Always cover cite sources.",
    }
    out = propose(persona, "avoid: formal language")
    assert out["edits"] == [{"kind": "drop_principle", "index": 2}]
    out = propose(persona, "avoid: horoscopes")
    assert out["edits"] == [{"kind": "forbid_topic", "text": "horoscopes"}]


@pytest.mark.parametrize("text", ["", "user: make it sing", "the vibe is off", "tone: purple"])
def test_unusable_feedback_gives_no_edit_and_says_so(text):
    out = propose(coach().model_dump(mode="json"), text)
    assert out["edits"] == [] and out["reason"].startswith("no feedback the rules can act on")


def _fuse(store, feedback, *, llm=None, cache=None, seed=0):
    return fuse(
        store,
        ["data-coach"],
        llm=llm or counting(),
        embedder=HashEmbedder(),
        cache=cache or SynthesisCache(MemoryKV()),
        operator="reflect",
        seed=seed,
        params={"feedback": feedback},
    )


def test_reflect_through_fuse_is_versioned_cached_and_in_lineage(store):
    kv = MemoryKV()
    llm = counting()
    first = _fuse(store, FEEDBACK, llm=llm, cache=SynthesisCache(kv))
    child = first.agent.elixir
    assert first.agent.lineage.operator == "reflect" and first.agent.lineage.op_version == "1"
    assert first.agent.lineage.params["feedback"] == FEEDBACK
    assert child.principles[0].startswith("When asked about monthly churn")
    assert child.tone.formality == pytest.approx(0.6) and child.constraints.max_length == 150
    assert child.constraints.must_use_markdown is True
    notes = {n.field for n in first.agent.lineage.resolution_notes}
    assert {"reflect", "principles[0]", "tone.formality", "constraints.max_length"} <= notes
    again_llm = counting()
    again = _fuse(store, FEEDBACK, llm=again_llm, cache=SynthesisCache(kv))
    assert again.from_cache and again_llm.calls == [] and again.agent.lineage_hash == first.agent.lineage_hash
    other = _fuse(store, "tone: too casual", cache=SynthesisCache(kv))
    assert other.agent.lineage_hash != first.agent.lineage_hash


def test_unusable_feedback_is_refused_and_nothing_is_stored(store):
    before = len(store.list_agents())
    with pytest.raises(NoUsableFeedback, match="no usable edit .*no feedback the rules can act on"):
        _fuse(store, "user: make it sing")
    with pytest.raises(NoUsableFeedback, match="no feedback to act on"):
        _fuse(store, "   ")
    assert len(store.list_agents()) == before


def test_a_models_invalid_edits_are_skipped_and_all_invalid_is_a_failure(store):
    bad = {
        "edits": [
            {"kind": "drop_principle", "index": 9},
            {"kind": "add_principle", "text": ""},
            {"kind": "max_length", "value": 0},
        ],
        "reason": "x",
    }
    with pytest.raises(NoUsableFeedback):
        _fuse(store, "tone: too formal", llm=FakeLLM([bad]))
    mixed = {"edits": [*bad["edits"], {"kind": "tone", "dimension": "humor", "delta": 5}], "reason": "mixed"}
    agent = _fuse(store, "tone: too formal", llm=FakeLLM([mixed]), seed=1).agent
    assert agent.elixir.tone.humor == pytest.approx(0.5)  # delta clamped to 0.3
    skipped = [n for n in agent.lineage.resolution_notes if n.chose == "(skipped)"]
    assert len(skipped) == 3


def test_a_reply_outside_the_schema_is_a_malformed_output_not_a_copy(store):
    off_schema = {"edits": [{"kind": "tone", "dimension": "sparkle", "delta": 0.1}], "reason": "x"}
    with pytest.raises(LLMMalformedOutput, match="reflect .*dimension"):
        _fuse(store, "tone: too formal", llm=FakeLLM([off_schema, off_schema]), seed=2)


def test_apply_edits_reports_no_change_for_edits_that_change_nothing():
    parent = coach()
    data, notes = apply_edits(parent, [{"kind": "markdown", "value": False}])  # already False
    assert data == {} and "already" in notes[0].reason


def test_reflection_brief_picks_the_weakest_probes_in_a_fixed_order():
    class Row:
        def __init__(self, probe, scorer, value, feedback):
            self.probe, self.scorer, self.value, self.feedback = probe, scorer, value, feedback

    rows = [
        Row("a", "fidelity", 0.9, "missing: x"),
        Row("b", "fidelity", 0.2, "missing: y"),
        Row("b", "tone", 0.4, "tone: too formal"),
        Row("c", "fidelity", 0.5, "format: needs markdown"),
        Row("d", "fidelity", 0.1, ""),  # no feedback: nothing to reflect on
        Row("*", "diversity", 0.0, ""),
    ]
    brief = reflection_brief(rows, {"b": "Hello  there"}, weakest=2)
    weakest = "probe: b (0.30)\nmessage: Hello there\nmissing: y\ntone: too formal"
    assert brief == weakest + "\n\nprobe: c (0.50)\nformat: needs markdown"
    random.shuffle(rows)
    assert reflection_brief(rows, {"b": "Hello  there"}, weakest=2) == brief


def test_a_users_accepted_revision_becomes_feedback_the_rules_can_use():
    text = revision_feedback(["Make it shorter please", "Mention tasting notes", "make it sing", "不要提价格"])
    assert text.splitlines() == [
        "probe: user-revision",
        "length: too long",
        "missing: tasting notes",
        "user: make it sing",
        "avoid: 价格",
    ]
    out = propose(coach().model_dump(mode="json"), text)
    assert {e["kind"] for e in out["edits"]} == {"add_principle", "forbid_topic", "tone"}
    assert revision_feedback(["   "]) == ""


def test_fuse_cli_reflects_a_users_feedback(home, monkeypatch) -> None:
    import json

    from click.testing import CliRunner

    from furnace import resources
    from furnace.cli import cli

    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    r = CliRunner()
    assert r.invoke(cli, ["import", str(resources.LIBRARY_DIR / "data-science-mentor.yaml")]).exit_code == 0
    args = ["fuse", "data-science-mentor", "--operator", "reflect", "--json"]
    done = r.invoke(cli, [*args, "--feedback", "Make it shorter", "--feedback", "missing: tea tasting"])
    assert done.exit_code == 0, done.output
    agent = json.loads(done.output)
    assert agent["operator"] == "reflect" and "tea tasting" in agent["params"]["feedback"]
    assert any(n["field"] == "tone.conciseness" for n in agent["resolution_notes"])
    refused = r.invoke(cli, [*args, "--feedback", "make it sing"])
    assert refused.exit_code != 0 and isinstance(refused.exception, NoUsableFeedback)
    assert "no usable edit" in str(refused.exception) and "\n" not in str(refused.exception)
    assert r.invoke(cli, ["fuse", "data-science-mentor", "--feedback", "x"]).exit_code == 2


def test_a_topic_to_avoid_and_a_request_about_one_piece_are_read_as_such():
    text = revision_feedback(["Please stop discussing politics.", "别再聊政治了", "标题改成疑问句", "add subheadings"])
    assert text.splitlines() == [
        "probe: user-revision",
        "avoid: politics",
        "avoid: 政治",
        "piece: 标题改成疑问句",  # the title of one piece, not a markdown layout
        "format: needs markdown",
    ]
    out = propose(coach().model_dump(mode="json"), text)
    assert {"kind": "forbid_topic", "text": "politics"} in out["edits"]


def test_a_held_edit_kind_is_refused_with_its_reason():
    data, notes = apply_edits(coach(), [{"kind": "markdown", "value": True}], hold={"markdown": "one piece only"})
    assert data == {} and notes[0].chose == "(held)" and notes[0].reason == "markdown: one piece only"
