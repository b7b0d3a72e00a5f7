"""Human edits flow back: a revision chat's accepted suggestions → reflect → a new persona version in lineage."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from furnace.domain.elixir import parse_elixir
from furnace.domain.errors import InputError
from furnace.evolution.revision_reflect import accepted_revisions, reflect_from_revisions
from furnace.fusion.embedding import HashEmbedder
from furnace.fusion.operators.reflect import NoUsableFeedback
from furnace.fusion.synthesis import SynthesisCache
from furnace.writing.content import generate_content
from furnace.writing.revision import revise, rollback

from .conftest import EN_PERSONA

PERSONA = EN_PERSONA["id"]


def _reflect(store, contents, llm, content_id, **kw):
    return reflect_from_revisions(
        store, contents, llm=llm, embedder=HashEmbedder(), cache=SynthesisCache(), content_id=content_id, **kw
    )


def _piece(store, contents, llm, *suggestions):
    content, _ = generate_content(store, contents, llm, persona_id=PERSONA, topic="summer sunscreen")
    for s in suggestions:
        assert revise(store, contents, llm, content.id, s).status == "revised", s
    return content


def test_accepted_suggestions_become_a_new_persona_version_recorded_in_lineage(store, contents, engine):
    content = _piece(store, contents, engine, "too formal, make it livelier", "make it shorter")
    before = store.get_elixir(PERSONA)  # preference learning may have made versions already
    out = _reflect(store, contents, engine, content.id, persona_id=PERSONA)
    after = store.get_elixir(PERSONA)
    assert out.status == "reflected" and out.changed and after.version == before.version + 1
    assert out.persona == after.ref and out.previous == before.ref
    assert after.tone.formality < before.tone.formality and after.tone.conciseness > before.tone.conciseness
    assert after.expertise == before.expertise and after.identity == before.identity  # only what the edits name
    agent = store.get_agent(out.agent_id)
    session = contents.get_session(content.id)
    assert agent.lineage.operator == "reflect" and [p.id for p in agent.lineage.parents] == [PERSONA]
    assert agent.lineage.parents[0].version == before.version
    source = agent.lineage.params["source"]
    assert source == {"session": session.id, "revisions": [r.id for r in contents.revisions(content.id)]}
    assert "tone: too formal" in agent.lineage.params["feedback"]
    assert "length: too long" in agent.lineage.params["feedback"]
    edges = {(n.id, n.operator) for n in store.ancestors(PERSONA, max_depth=1)}
    assert (out.agent_id, "reflect") in edges
    # each accepted revision flows back once: nothing new → nothing made
    again = _reflect(store, contents, engine, content.id)
    assert again.status == "already" and again.agent_id is None
    assert store.get_elixir(PERSONA).version == after.version


def test_a_later_revision_flows_back_alone(store, contents, engine):
    content = _piece(store, contents, engine, "make it shorter")
    first = _reflect(store, contents, engine, content.id)
    assert revise(store, contents, engine, content.id, "too formal, make it livelier").status == "revised"
    second = _reflect(store, contents, engine, content.id)
    assert second.status == "reflected" and second.suggestions == ("too formal, make it livelier",)
    assert len(second.revision_ids) == 1 and second.revision_ids[0] not in first.revision_ids
    # built on the persona's latest version (the first reflection's, or a later one preference learning made)
    assert second.previous.version >= first.persona.version and second.persona.version == second.previous.version + 1


def test_a_rolled_back_revision_is_not_accepted(store, contents, engine):
    content = _piece(store, contents, engine, "make it shorter", "too formal, make it livelier")
    assert [r.suggestion for r in accepted_revisions(contents, content.id)] == [
        "make it shorter",
        "too formal, make it livelier",
    ]
    rollback(contents, content.id, 2)  # undoes the second revision
    assert [r.suggestion for r in accepted_revisions(contents, content.id)] == ["make it shorter"]
    out = _reflect(store, contents, engine, content.id)
    assert out.suggestions == ("make it shorter",) and "tone" not in out.feedback


def test_suggestions_the_rules_cannot_use_are_refused_and_nothing_is_stored(store, contents, engine):
    content = _piece(store, contents, engine, "change the title to Sun Tips")  # about the piece, not the persona
    before, agents = store.get_elixir(PERSONA), len(store.list_agents())
    with pytest.raises(NoUsableFeedback, match="no usable edit .*user: change the title"):
        _reflect(store, contents, engine, content.id)
    assert store.get_elixir(PERSONA).version == before.version and len(store.list_agents()) == agents


def test_a_piece_without_revisions_or_by_another_persona_is_a_clear_error(store, contents, engine):
    content = _piece(store, contents, engine)
    with pytest.raises(InputError, match="no accepted revision"):
        _reflect(store, contents, engine, content.id)
    with pytest.raises(InputError, match=f"written by {PERSONA}, not skin-advisor"):
        _reflect(store, contents, engine, content.id, persona_id="skin-advisor")


def test_the_reflect_cli(settings):
    from furnace.cli import cli
    from furnace.runtime import Runtime

    rt = Runtime(settings)
    rt.store.save_elixir(parse_elixir(EN_PERSONA))
    content, _ = generate_content(rt.store, rt.content_store, rt.llm, persona_id=PERSONA, topic="sunscreen")
    assert revise(rt.store, rt.content_store, rt.llm, content.id, "make it shorter").status == "revised"
    rt.close()
    runner = CliRunner()
    base = ["--home", str(settings.home), "reflect", PERSONA, "--from-content", content.id]
    done = runner.invoke(cli, [*base, "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["status"] == "reflected" and data["persona"]["version"] == data["previous"]["version"] + 1
    assert data["agent_id"].startswith("agt-") and data["suggestions"] == ["make it shorter"]
    assert any(n["field"] == "tone.conciseness" for n in data["notes"])
    shown = json.loads(
        runner.invoke(cli, ["--home", str(settings.home), "agent", "show", data["agent_id"], "--json"]).output
    )
    assert shown["operator"] == "reflect" and shown["params"]["source"]["session"] == data["session_id"]
    again = runner.invoke(cli, base)
    assert again.exit_code == 0 and "reflected already" in again.output
    wrong = runner.invoke(cli, ["--home", str(settings.home), "reflect", "skin-advisor", "--from-content", content.id])
    assert wrong.exit_code != 0 and isinstance(wrong.exception, InputError)
    assert "not skin-advisor" in str(wrong.exception) and "\n" not in str(wrong.exception)
