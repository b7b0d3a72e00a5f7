"""Statements per unit of work on DuckDB: a cost that does not depend on the machine's load.

Each DuckDB statement costs ~1 ms of CPU (BEGIN and COMMIT included) and ``ON CONFLICT
DO NOTHING`` ~2.5 ms more, so a revision round or an arena turn is as cheap as the statements
it runs (docs/benchmarks.md). These budgets are the counts the code runs today: a change that
adds a statement to the hot path fails here and has to say why. Timing lives in bench/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace.arena.runner import Arena
from furnace.domain.elixir import parse_elixir
from furnace.llm.offline import OfflineEngine
from furnace.storage.duckdb import snapshot
from furnace.storage.duckdb.arena import DuckDBArenaStore
from furnace.storage.duckdb.content import DuckDBContentStore
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore
from furnace.writing.content import generate_content
from furnace.writing.revision import revise

PERSONA = {
    "id": "writer",
    "name": "Writer",
    "language": "zh",
    "identity": "一位写生活方式文章的博主。",
    "expertise": ["护肤", "防晒"],
    "principles": ["推荐前先说明适用肤质", "不夸大产品功效"],
}
SUGGESTIONS = ["加一个 emoji", "第三段长一点", "去掉 emoji", "第三段太长，缩短一点"]


@pytest.fixture(autouse=True)
def _no_background_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    # the refresh runs on its own thread at its own pace: it would make the counts depend on timing
    monkeypatch.setattr(snapshot, "request", lambda db: None)


def test_a_statement_counts_once_and_begin_commit_count_too(tmp_path: Path) -> None:
    db = Database(tmp_path / "f.duckdb")
    before = db.statements
    assert db.query("SELECT 42") == [(42,)]
    assert db.statements == before + 1
    with db.transaction() as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    assert db.statements == before + 4  # BEGIN, CREATE, COMMIT
    db.execute("INSERT INTO t VALUES (1)")  # one statement is atomic by itself: no BEGIN/COMMIT
    assert db.statements == before + 5
    assert db.run("INSERT INTO t VALUES (2) RETURNING x") == [(2,)]
    assert db.query("SELECT sum(x) FROM t") == [(3,)]


def test_a_revision_round_runs_at_most_14_statements(tmp_path: Path) -> None:
    db = Database(tmp_path / "f.duckdb")
    store, contents = DuckDBStore(db), DuckDBContentStore(db)
    store.save_elixir(parse_elixir(PERSONA))
    content, _ = generate_content(store, contents, OfflineEngine(), persona_id="writer", topic="夏季防晒推荐")
    revise(store, contents, OfflineEngine(), content.id, SUGGESTIONS[0])  # the session and its welcome exist now
    rounds = 4
    before = db.statements
    for suggestion in SUGGESTIONS[1:] + SUGGESTIONS[:1]:
        out = revise(store, contents, OfflineEngine(), content.id, suggestion)
        assert out.status == "revised" and out.learned is not None
    counted = db.statements - before
    # per round: 3 reads (messages, latest version, persona; the content and its session are read once
    # and kept: immutable rows), then 1 message insert beside the edit call; BEGIN, version check,
    # version, revision, reply, COMMIT beside the extraction call; then, on the user's wait, the learned
    # persona version (compare-and-set inside its INSERT) and the revision's processed mark in one
    # transaction (BEGIN, version, mark, COMMIT) = 14, plus the session's one read in the first round
    assert counted <= rounds * 14 + 1, counted / rounds
    assert [v.version for v in contents.versions(content.id)] == [1, 2, 3, 4, 5, 6]


def test_an_arena_speaker_runs_one_statement(tmp_path: Path) -> None:
    db = Database(tmp_path / "f.duckdb")
    library = DuckDBStore(db)
    for i, name in enumerate(["Ada", "Bo", "Cy", "Dee"]):
        library.save_elixir(
            parse_elixir(
                {"id": name.lower(), "name": name, "identity": f"Member {i}.", "expertise": ["x"], "principles": ["p"]}
            )
        )
    arena = Arena(DuckDBArenaStore(db), library, OfflineEngine())
    session = arena.create_session(["ada", "bo", "cy", "dee"])
    arena.say(session.id, "@all hello")
    db.query("SELECT 1")  # the first turn's writes behind it are done
    before = db.statements
    outcome = arena.say(session.id, "@all count off!")
    assert len(outcome.replies) == 4
    db.query("SELECT 1")  # waits for the writes behind the turn, which count too
    turn = db.statements - before - 1
    # per turn: 4 persona reads, the run, the lease claim, the plan (its write also reads the cancel flag)
    # and the history (2) before the first speaker's call (the session is read once per store: it never
    # changes) = 9;
    # per speaker: its reply, which is its checkpoint (one statement, no BEGIN/COMMIT); the cancel flag,
    # read after it and before each later speaker, reads nothing while no cancel was asked in this
    # process and no other process had the file; after the last speaker, the run's finished status and
    # its lease row's removal, written behind = 2; the lease is renewed only when due (29 per turn with
    # the checkpoint rows and a transaction a speaker, 57 three sessions ago)
    assert turn <= 9 + 4 + 2, turn


def test_a_cold_fusion_runs_at_most_11_statements_and_its_repeats_next_to_none(tmp_path: Path) -> None:
    from furnace import resources
    from furnace.fusion.embedding import HashEmbedder
    from furnace.fusion.fuse import fuse
    from furnace.fusion.synthesis import SynthesisCache
    from furnace.interop.importers import load_elixir_file
    from furnace.storage.duckdb.kv import DuckDBKV

    db = Database(tmp_path / "f.duckdb")
    store = DuckDBStore(db)
    parents = ["data-science-mentor", "socratic-math-tutor"]
    for name in parents:
        for elixir in load_elixir_file(resources.LIBRARY_DIR / f"{name}.yaml"):
            store.save_elixir(elixir)
    cache, llm = SynthesisCache(DuckDBKV(db)), OfflineEngine()

    def cold() -> int:
        before = db.statements
        result = fuse(store, parents, llm=llm, embedder=HashEmbedder(), cache=cache, operator="crossover")
        assert not result.from_cache and result.model_calls == 1
        return db.statements - before

    # before the identity call: each parent with its "is it an agent?" (one statement each; only an agent
    # parent is verified in full), the synthesis cache, "is this agent stored?", the identity sub-result;
    # after it, one transaction: BEGIN, both cache entries (one insert), the agent, its persona, its edges
    # (plain inserts: the agent's own insert made sure none of it existed), COMMIT = 11 (16 before: a
    # fingerprint query per parent, two autocommitted cache inserts, two reads before the agent's inserts)
    assert cold() <= 11
    for budget in (2, 0):  # the same fusion again in this process: the parents read again once (the file
        before = db.statements  # changed with the commit), then nothing while nothing in the file changes
        again = fuse(store, parents, llm=llm, embedder=HashEmbedder(), cache=cache, operator="crossover")
        assert again.from_cache and db.statements - before <= budget


def test_starting_an_experiment_is_one_statement_and_a_rerun_keeps_its_row(tmp_path: Path) -> None:
    from furnace.evolution.records import ExperimentRecord
    from furnace.storage.duckdb.experiments import DuckDBExperimentResults

    db = Database(tmp_path / "f.duckdb")
    results = DuckDBExperimentResults(db)
    before = db.statements
    results.start_experiment(ExperimentRecord("exp", "first", {"seed": 1}, 1, "m"))
    assert db.statements == before + 1  # an upsert, autocommitted: no BEGIN/COMMIT
    started = results.get_experiment("exp")
    assert started is not None and started.status == "running" and started.config == {"seed": 1}

    results.finish_experiment("exp", "finished", {"best": 0.5})
    results.start_experiment(ExperimentRecord("exp", "renamed", {"seed": 2}, 2, "other"))
    again = results.get_experiment("exp")
    assert again is not None
    assert again.status == "running"  # back to running ...
    assert (again.name, again.config, again.seed, again.model) == ("first", {"seed": 1}, 1, "m")  # ... the row kept
    assert again.summary == {"best": 0.5}
    assert [e.experiment_id for e in results.list_experiments()] == ["exp"]
