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
    with pytest.raises(NoUsableFeedback, match="no usable edit .*piece: change the title"):
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


# --- every accepted revision accounted for; the structure rule; forbidden topics (issue #33) ---------------


def _accept(contents, content_id, suggestion):
    """A revision the person accepted, however its text was edited (the reviser is not under test here)."""
    from datetime import datetime

    from furnace.writing.content import ChatSession, ContentBatch, ContentVersion, RevisionRecord, session_id_for

    now = datetime(2026, 1, 1, 12, 0, 0)
    content = contents.get_content(content_id)
    latest = contents.get_version(content_id)
    session = contents.get_session(content_id)
    new_session = None
    if session is None:
        session = new_session = ChatSession(
            id=session_id_for(content_id), content_id=content_id, persona_id=content.persona_id, created_at=now
        )
    rid = f"rev-{content_id}-v{latest.version + 1}"
    body = latest.body + f" ({suggestion})"
    record = RevisionRecord(
        id=rid,
        content_id=content_id,
        session_id=session.id,
        persona_id=content.persona_id,
        persona_version=content.persona_version,
        suggestions=(suggestion,),
        from_version=latest.version,
        to_version=latest.version + 1,
        original_title=latest.title,
        original_body=latest.body,
        revised_title=latest.title,
        revised_body=body,
        created_at=now,
    )
    version = ContentVersion(
        content_id=content_id,
        version=latest.version + 1,
        title=latest.title,
        body=body,
        word_count=len(body),
        source="revise",
        revision_id=rid,
        created_at=now,
    )
    contents.commit(ContentBatch(session=new_session, version=version, revision=record))
    return rid


def _zh_piece(store, contents, llm, *suggestions):
    content, _ = generate_content(store, contents, llm, persona_id="skin-advisor", topic="夏季防晒推荐")
    return content, [_accept(contents, content.id, s) for s in suggestions]


def test_every_accepted_revision_is_reported_and_one_pieces_structure_moves_no_format_flag(store, contents, engine):
    asks = ["太正式了，活泼点", "第二段太啰嗦，删掉一半", "标题改成疑问句", "第三段改成列表", "简短一点"]
    content, rids = _zh_piece(store, contents, engine, *asks)
    before = store.get_elixir("skin-advisor")
    out = _reflect(store, contents, engine, content.id)
    after = store.get_elixir("skin-advisor")
    assert [o.revision_id for o in out.outcomes] == rids  # all five read, in order
    by_ask = {o.suggestions[0]: o for o in out.outcomes}
    assert by_ask["太正式了，活泼点"].edits == ("tone.formality: 0.8 → 0.6",)
    assert by_ask["第二段太啰嗦，删掉一半"].edits == ("tone.conciseness: 0.5 → 0.7",)
    assert by_ask["简短一点"].edits == ("tone.conciseness: 0.5 → 0.7",)
    title = by_ask["标题改成疑问句"]
    assert title.edits == () and "one part of this piece" in title.reason
    listed = by_ask["第三段改成列表"]
    assert listed.edits == () and "1 of 2" in listed.reason and "markdown flag stays" in listed.reason
    assert before.constraints.must_use_markdown is False and after.constraints.must_use_markdown is False
    assert after.tone.formality < before.tone.formality
    # a model told to add markdown anyway is refused by the operator: the structure rule holds for any model
    agent = store.get_agent(out.agent_id)
    assert agent.lineage.params["hold"] == {"markdown": "no accepted format request passed the structure rule"}


def test_a_repeated_format_request_changes_the_persona_wide_flag_once_it_is_repeated(store, contents, engine):
    content, rids = _zh_piece(store, contents, engine, "第三段改成列表", "太正式了")
    first = _reflect(store, contents, engine, content.id)
    assert first.outcomes[0].edits == () and "1 of 2" in first.outcomes[0].reason
    assert store.get_elixir("skin-advisor").constraints.must_use_markdown is False
    rids.append(_accept(contents, content.id, "结尾也用列表"))  # the same request again, on the same piece
    second = _reflect(store, contents, engine, content.id)
    assert [o.revision_id for o in second.outcomes] == rids[2:]
    assert second.outcomes[0].edits == ("constraints.must_use_markdown: markdown",)
    assert store.get_elixir("skin-advisor").constraints.must_use_markdown is True


def test_a_reflection_with_only_held_or_piece_requests_says_why_for_each(store, contents, engine):
    content, rids = _zh_piece(store, contents, engine, "第三段改成列表", "标题改成疑问句")
    with pytest.raises(NoUsableFeedback) as caught:
        _reflect(store, contents, engine, content.id)
    message = str(caught.value)
    assert f"{rids[0]}: format: needs markdown — a format request about one piece (1 of 2" in message
    assert f"{rids[1]}: piece: 标题改成疑问句 — about one part of this piece" in message and "\n" not in message


def test_a_persona_wide_format_request_applies_at_once(store, contents, engine):
    content, _ = _zh_piece(store, contents, engine, "以后都用列表")
    out = _reflect(store, contents, engine, content.id)
    assert out.outcomes[0].edits == ("constraints.must_use_markdown: markdown",)


@pytest.mark.parametrize(
    ("persona", "ask", "topic"),
    [("skin-advisor", "别再聊政治了", "政治"), (PERSONA, "stop discussing politics", "politics")],
)
def test_a_topic_to_avoid_becomes_a_forbidden_topic(store, contents, engine, persona, ask, topic):
    content, _ = generate_content(store, contents, engine, persona_id=persona, topic="sunscreen")
    rid = _accept(contents, content.id, ask)
    out = _reflect(store, contents, engine, content.id)
    assert store.get_elixir(persona).constraints.forbidden_topics == (topic,)
    assert out.outcomes[0].revision_id == rid
    assert out.outcomes[0].edits == (f"constraints.forbidden_topics: +{topic}",)


def test_a_revision_the_persona_already_holds_says_so(store, contents, engine):
    content, _ = _zh_piece(store, contents, engine, "以后都用纯文本", "太正式了")
    out = _reflect(store, contents, engine, content.id)
    plain, formal = out.outcomes
    assert plain.edits == () and "markdown is already False" in plain.reason
    assert formal.edits == ("tone.formality: 0.8 → 0.6",)


def test_the_reflect_cli_reports_each_revision(settings):
    from furnace.cli import cli
    from furnace.runtime import Runtime

    rt = Runtime(settings)
    rt.store.save_elixir(parse_elixir(EN_PERSONA))
    content, _ = generate_content(rt.store, rt.content_store, rt.llm, persona_id=PERSONA, topic="sunscreen")
    rids = [_accept(rt.content_store, content.id, s) for s in ("make it shorter", "change the title to Sun Tips")]
    rt.close()
    runner = CliRunner()
    base = ["--home", str(settings.home), "reflect", PERSONA, "--from-content", content.id]
    data = json.loads(runner.invoke(cli, [*base, "--json"]).output)
    assert [r["revision_id"] for r in data["revisions"]] == rids
    shorter, title = data["revisions"]
    assert shorter["edits"] == ["tone.conciseness: 0.5 → 0.7"] and shorter["reason"] == ""
    assert title["edits"] == [] and title["clauses"] == ["piece: change the title to Sun Tips"]
    assert "one part of this piece" in title["reason"]
