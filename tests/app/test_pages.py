"""Furnace, revision chat, lineage, compare, arena and assistant pages on one seeded home."""

from __future__ import annotations

import pytest

from .helpers import no_errors, store_for

A, B = "academic-editor", "data-science-mentor"


@pytest.fixture(scope="module")
def fused(app_home):
    """A crossover agent of A and B, made through the furnace page's own function."""
    from furnace.fusion.embedding import HashEmbedder
    from furnace.fusion.fuse import fuse
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    settings = FurnaceSettings(home=app_home)
    rt = Runtime(settings)
    result = fuse(
        rt.store,
        [A, B],
        llm=rt.llm,
        embedder=HashEmbedder(),
        cache=rt.synthesis_cache,
        operator="crossover",
        settings=settings,
    )
    return result.agent


def test_furnace_fuses_two_personas_and_shows_the_child(app_unrun, app_home):
    at = app_unrun.switch_page("screens/furnace.py").run()
    no_errors(at)
    at.multiselect(key="fuse_parents").select(A).select("go-reviewer").run()
    at.selectbox(key="fuse_operator").set_value("crossover").run()
    at.button(key="fuse_go").click().run()
    no_errors(at)
    titles = [h.value for h in at.subheader]
    assert any(t.startswith("Child: ") for t in titles), titles
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Operator"].startswith("crossover") and metrics["From cache"] == "no"
    agents = store_for(app_home).list_agents()
    assert any({p.id for p in a.lineage.parents} == {A, "go-reviewer"} for a in agents)
    # the same fusion again comes from the synthesis cache
    at.button(key="fuse_go").click().run()
    assert {m.label: m.value for m in at.metric}["From cache"] == "yes"


def test_revision_chat_grows_the_version_chain(app_unrun, app_home):
    at = app_unrun.switch_page("screens/revision.py").run()
    no_errors(at)
    at.selectbox(key="revision_persona").set_value("lifestyle-blogger-zh").run()
    at.text_input(key="revision_topic").input("夏日防晒").run()
    at.button(key="revision_create").click().run()
    no_errors(at)
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    contents = Runtime(FurnaceSettings(home=app_home)).content_store
    [content] = contents.list_contents()
    assert [v.version for v in contents.versions(content.id)] == [1]
    at.chat_input(key="revision_input").set_value("太正式了，活泼一点，加一个 emoji").run()
    no_errors(at)
    assert [v.version for v in contents.versions(content.id)] == [1, 2]
    assert [(s.label, s.state) for s in at.status] == [("Edited: V2", "complete")]
    texts = [m.markdown[0].value for m in at.chat_message if m.markdown]
    assert any("V1→V2" in t for t in texts), texts
    assert any("current V2 ·" in c.value for c in at.caption), [c.value for c in at.caption]  # not stale
    [chat] = [col for col in at.columns if col.get("chat_input")]
    order = [node.type for node in _walk(chat)]
    assert order.index("chat_input") > max(i for i, t in enumerate(order) if t == "chat_message")  # above the input
    assert any("V1 → V2" in c.value for c in at.code)  # the diff of the two versions
    at.button(key="rev_rollback").click().run()
    no_errors(at)
    assert [v.source for v in contents.versions(content.id)] == ["generate", "revise", "rollback"]


def test_a_refused_or_failed_edit_is_never_shown_as_done(app_unrun, app_home):
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    contents = Runtime(FurnaceSettings(home=app_home)).content_store
    at = app_unrun.switch_page("screens/revision.py").run()
    at.selectbox(key="revision_select").set_value("+ New content").run()
    at.selectbox(key="revision_persona").set_value("lifestyle-blogger-zh").run()
    at.text_input(key="revision_topic").input("秋季补水").run()
    at.button(key="revision_create").click().run()
    [content] = [c for c in contents.list_contents() if c.topic == "秋季补水"]
    # refused before any model call (an English suggestion for a Chinese piece): the box ends, as an error
    at.chat_input(key="revision_input").set_value("the second paragraph is too long").run()
    assert [(s.label, s.state) for s in at.status] == [("Not done: the edit was refused", "error")]
    assert at.error  # and the reason is shown
    # a target that is not there: the turn ends "failed", never "Done"
    at.chat_input(key="revision_input").set_value("第九段太长了").run()
    assert [(s.label, s.state) for s in at.status] == [("Not done (failed)", "error")]
    assert [v.version for v in contents.versions(content.id)] == [1]


def test_revision_chat_sends_accepted_suggestions_to_reflect(app_unrun, app_home):
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    rt = Runtime(FurnaceSettings(home=app_home))
    persona = "lifestyle-blogger-zh"
    at = app_unrun.switch_page("screens/revision.py").run()
    at.selectbox(key="revision_select").set_value("+ New content").run()
    at.selectbox(key="revision_persona").set_value(persona).run()
    at.text_input(key="revision_topic").input("防晒小贴士").run()
    at.button(key="revision_create").click().run()
    no_errors(at)
    [content] = [c for c in rt.content_store.list_contents() if c.topic == "防晒小贴士"]
    at.chat_input(key="revision_input").set_value("第三段太长，缩短一点").run()
    no_errors(at)
    before = rt.store.get_elixir(persona)
    at.button(key="rev_reflect").click().run()
    no_errors(at)
    after = rt.store.get_elixir(persona)
    assert after.version == before.version + 1 and after.tone.conciseness > before.tone.conciseness
    assert any(f"→ v{after.version}" in s.value for s in at.success), [s.value for s in at.success]
    [edge] = [n for n in rt.store.ancestors(persona, max_depth=1) if n.operator == "reflect"]
    agent = rt.store.get_agent(edge.id)
    assert agent.lineage.params["source"]["session"] == rt.content_store.get_session(content.id).id
    at.button(key="rev_reflect").click().run()  # nothing new to reflect: says so, makes nothing
    no_errors(at)
    assert (
        any("reflected already" in i.value for i in at.info) and rt.store.get_elixir(persona).version == after.version
    )


def _walk(node):
    """Every element and block under ``node``, in page order."""
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _walk(child)


def test_lineage_page_renders_the_graph_for_an_agent(app_unrun, fused):
    app_unrun.session_state["lineage_pick"] = fused.id
    at = app_unrun.switch_page("screens/lineage.py").run()
    no_errors(at)
    [chart] = at.get("graphviz_chart")
    dot = chart.proto.spec
    assert f'"{A}" -> "{fused.id}"' in dot and f'"{B}" -> "{fused.id}"' in dot
    assert "crossover · v1" in dot
    assert {m.label: m.value for m in at.metric}["Ancestors"] == "2"
    assert len(at.dataframe[0].value) == 3


def test_compare_two_agents_renders_both_columns(app_unrun, app_home, fused):
    app_unrun.session_state["compare_pick"] = [fused.id, A]
    at = app_unrun.switch_page("screens/compare.py").run()
    no_errors(at)
    names = [h.value for h in at.subheader]
    assert names == [fused.elixir.name, store_for(app_home).get_elixir(A).name], names
    assert len([m for m in at.metric if m.label == "Fitness"]) == 2
    table = at.dataframe[0].value
    assert {fused.id, A} <= set(table.columns) and "fitness (weighted)" in list(table["objective"])


def test_arena_count_off_gives_four_replies(app_unrun):
    at = app_unrun.switch_page("screens/arena.py").run()
    no_errors(at)
    members = ["academic-editor", "go-reviewer", "home-chef-zh", "security-auditor"]
    ms = at.multiselect(key="arena_members")
    for m in members:
        ms.select(m)
    at.run()
    at.button(key="arena_create").click().run()
    no_errors(at)
    at.chat_input(key="arena_input").set_value("@全体成员 全体都有！报数！").run()
    no_errors(at)
    replies = [m for m in at.chat_message if m.name == "assistant"]
    assert len(replies) == 4
    at.toggle(key="arena_show_plans").set_value(True).run()
    assert any(e.label.startswith("plan (directive") for e in at.expander)


def test_assistant_question_renders_a_table(app_unrun, fused):
    at = app_unrun.switch_page("screens/assistant.py").run()
    no_errors(at)
    at.chat_input[0].set_value("list the personas").run()
    no_errors(at)
    assert at.dataframe, "the assistant answered without a table"


def test_arena_stop_and_continue_an_interrupted_turn(app_unrun, app_home):
    from furnace.arena.events import FinalReply
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    arena = Runtime(FurnaceSettings(home=app_home)).arena()
    session = arena.create_session(
        ["go-reviewer", "academic-editor", "security-auditor", "viral-copywriter"], title="interrupted"
    )
    events = arena.stream(session.id, "sound off")
    replies = 0
    for event in events:  # the process "dies" after two speakers: the run stays running
        replies += isinstance(event, FinalReply)
        if replies == 2:
            break
    events.close()
    at = app_unrun.switch_page("screens/arena.py").run()
    at.selectbox(key="arena_select").set_value(session.id).run()
    no_errors(at)
    assert len([m for m in at.chat_message if m.name == "assistant"]) == 2
    at.button(key="arena_stop").click().run()
    no_errors(at)
    assert any("2 answered, 2 not started" in i.value for i in at.info)
    at.button(key="arena_continue").click().run()
    no_errors(at)
    assert len([m for m in at.chat_message if m.name == "assistant"]) == 4
    assert [r.status for r in arena.store.list_runs(session.id)] == ["finished"]


def test_promote_the_fused_child(app_unrun, app_home):
    at = app_unrun.switch_page("screens/furnace.py").run()
    at.multiselect(key="fuse_parents").select("socratic-math-tutor").run()  # one parent: a mutation
    at.button(key="fuse_go").click().run()
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Operator"].startswith("mutation")
    at.text_input(key="promote_name").input("Tutor Mutant").run()
    at.button(key="promote_go").click().run()
    no_errors(at)
    assert any(s.value.startswith("Promoted agt-") and "tutor-mutant v1" in s.value for s in at.success)
    store = store_for(app_home)
    assert store.get_elixir("tutor-mutant").name == "Tutor Mutant"
    assert [n.operator for n in store.ancestors("tutor-mutant")][:1] == ["promote"]


def test_compare_experiments_tab_shows_the_judge_feedback(app_unrun, app_home):
    from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord, ScoreRow
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    results = Runtime(FurnaceSettings(home=app_home)).results
    results.start_experiment(ExperimentRecord("exp-fb", "feedback", {}, 1, "offline"))
    scores = (
        ScoreRow("launch-note", "fidelity", 0.4, "1/3 target descriptors present", feedback="missing: tasting notes"),
        ScoreRow("launch-note", "tone", 0.9, "vs target: humor 0.80/0.60"),
    )
    results.save_individual(IndividualRecord("exp-fb", 0, A, 0, "seed", (), None, {}, "p", 0.5, {}, scores=scores))
    results.save_generation(GenerationRecord("exp-fb", 0, (A,), 0.5, 0.5, {}))
    at = app_unrun.switch_page("screens/compare.py").run()
    at.selectbox(key="compare_experiment").set_value("exp-fb").run()
    no_errors(at)
    shown = [d.value for d in at.dataframe if "feedback" in d.value.columns]
    assert (
        shown
        and list(shown[0]["feedback"]) == ["missing: tasting notes"]
        and list(shown[0]["probe"]) == ["launch-note"]
    )


def test_compare_experiments_totals_refuse_a_thinned_ledger(app_unrun, app_home):
    """The totals table is the call ledger's rows held to the totals sealed at the finish: ledger rows
    deleted outside furnace show as an error naming the experiment, never as numbers."""
    from datetime import UTC, datetime

    from furnace.evolution.records import ExperimentRecord, GenerationRecord
    from furnace.llm.cache import CallRecord
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    runtime = Runtime(FurnaceSettings(home=app_home))
    results, ledger = runtime.results, runtime.llm.ledger
    results.start_experiment(ExperimentRecord("exp-led", "ledger", {}, 1, "offline"))
    results.save_generation(GenerationRecord("exp-led", 0, (A,), 0.5, 0.5, {}))
    for n in range(3):
        now = datetime.now(UTC)
        ledger.record(
            CallRecord(id=f"led{n}", run_id="exp-led", task="reply", model="m", cache_key="k", created_at=now)
        )
    ledger.flush()

    def finish() -> None:
        totals = ledger.totals("exp-led", family=True).as_dict()
        results.finish_experiment("exp-led", "finished", {"best_fitness": 0.5, **totals})

    finish()
    app_unrun.session_state["compare_experiments"] = ["exp-led"]
    at = app_unrun.switch_page("screens/compare.py").run()
    no_errors(at)
    runtime.sql.execute("DELETE FROM llm_calls WHERE id = 'led0'")  # the live store, behind furnace's back
    try:
        at = app_unrun.switch_page("screens/compare.py").run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("experiment exp-led: its call ledger holds 2 calls" in e.value for e in at.error)
        assert not any("model calls (+" in c.value for c in at.caption)  # no totals shown
    finally:
        finish()  # the module's home stays consistent for the other pages
