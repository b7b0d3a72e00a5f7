"""furnace.storage.duckdb.analysis: the live store's tables, read from its snapshot, as DataFrames."""

from __future__ import annotations

import furnace.analysis as fa
from furnace.storage.duckdb import analysis as q


def test_lineage_readers_and_ancestry_match_the_store(lab) -> None:
    db = lab.analysis()
    edges = q.lineage_edges(db)
    assert len(edges) == 4
    assert sorted(edges[edges["child"] == lab.crossover.id]["parent"]) == ["data-science-mentor", "viral-copywriter"]
    agents = q.agents(db).set_index("agent_id")
    assert agents.loc[lab.crossover.id, "operator"] == "crossover"
    assert agents.loc[lab.grandchild.id, "parents"] == [f"{lab.crossover.id}@1"]
    assert agents.loc[lab.mutant.id, "lineage_hash"] == lab.mutant.lineage_hash
    mine = fa.ancestry(edges, lab.grandchild.id)
    theirs = lab.store.ancestors(lab.grandchild.id)
    assert [(r.id, r.depth, r.via, r.operator) for r in mine.itertuples()] == [
        (n.id, n.depth, n.via, n.operator) for n in theirs
    ]
    bodies = q.elixir_bodies(db, ids=[lab.mutant.id]).iloc[0]
    assert bodies["origin"] == "agent" and bodies["body"]["identity"] == lab.mutant.elixir.identity


def test_experiment_readers_decode_json_and_filter(lab) -> None:
    from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord, ScoreRow

    results = lab.runtime.results
    results.start_experiment(ExperimentRecord("exp-1", "one", {"seed": 1}, 1, "offline"))
    results.save_individual(
        IndividualRecord(
            "exp-1",
            1,
            lab.crossover.id,
            0,
            "crossover",
            ("data-science-mentor", "viral-copywriter"),
            lab.crossover.lineage_hash,
            lab.crossover.elixir.model_dump(mode="json"),
            "prompt",
            0.8,
            {"tone": 0.5},
            (ScoreRow("p1", "tone", 0.5, "ok"),),
        )
    )
    results.save_generation(GenerationRecord("exp-1", 1, (lab.crossover.id,), 0.8, 0.8, {"crossover": 1.0}))
    db = lab.analysis()
    ind = q.individuals(db, "exp-1")
    assert len(ind) == 1 and ind.loc[0, "parents"] == ["data-science-mentor", "viral-copywriter"]
    assert ind.loc[0, "objectives"] == {"tone": 0.5} and ind.loc[0, "elixir"]["id"] == lab.crossover.id
    assert q.individuals(db, "exp-other").empty and "fitness" in q.individuals(db, "exp-other").columns
    assert q.generations(db).loc[0, "survivors"] == [lab.crossover.id]
    assert q.scores(db, "exp-1").loc[0, "value"] == 0.5
    assert q.experiments(db).loc[0, "config"] == {"seed": 1}
    calls = q.call_totals(db)
    assert calls["calls"].sum() >= 1 and set(calls["task"]) >= {"identity"}
    # model calls are the ledger's (what the report and experiment show call model calls), hits apart
    assert (calls["model_calls"] + calls["cached_calls"] == calls["calls"]).all()


def test_revision_readers(lab) -> None:
    from furnace.runtime import Runtime
    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise

    cs = Runtime(lab.settings).content_store
    content, _ = generate_content(lab.store, cs, lab.llm, persona_id="viral-copywriter", topic="tea")
    outcome = revise(lab.store, cs, lab.llm, content.id, "add an emoji")
    assert outcome.status == "revised"
    db = lab.analysis()
    versions = q.content_versions(db, content.id)
    assert list(versions["version"]) == [1, 2] and list(versions["source"]) == ["generate", "revise"]
    revs = q.revisions(db)
    assert revs.loc[0, "suggestions"] == ["add an emoji"] and revs.loc[0, "revision_id"] == outcome.revision.id
    processed = q.processed_revisions(db)
    assert processed.loc[0, "status"] == "learned" and processed.loc[0, "preferences"][0]["dimension"] == "emoji"
    prefs = q.persona_preferences(db, "viral-copywriter")
    latest = prefs[prefs["version"] == prefs["version"].max()]
    assert ("emoji", "more") in set(zip(latest["dimension"], latest["value"], strict=False))
    assert q.contents(db).loc[0, "topic"] == "tea"
    edits = fa.edit_sizes(revs)
    assert 0 < edits.loc[0, "edit_size"] < 0.5
