"""A small, complete furnace database for the assistant's tests and bench: every kind of fact it answers about.

Written with plain SQL into a real DuckDB file (an old home's schema; the personas sealed as furnace writes them,
the other rows without seals).
:func:`build_live` moves those rows into a home's live store (``furnace.sqlite``) and reads them as the
assistant does for users: DuckDB SQL over the live store's Parquet snapshot.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from furnace.domain.elixir import parse_elixir
from furnace.storage.duckdb.assist import DuckDBAssistData
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.snapshot import SnapshotReader

NOW = datetime(2026, 11, 30, 10, 0)
PERSONAS = {
    "tea-master": ("茶艺大师", "zh", ["乌龙茶", "茶具"]),
    "go-reviewer": ("Terse Go Reviewer", "en", ["go", "code review"]),
    "empathetic-coach": ("Empathetic Coach", "en", ["coaching"]),
    "home-chef-zh": ("家常川菜师傅", "zh", ["川菜"]),
}
EXPERIMENTS = {  # id -> (name, created hours ago); the newest is exp-tea
    "exp-night": ("night sweep", 40),
    "exp-tea": ("tea evolution", 3),
}
# experiment -> {seed persona: fitness} (generation 0, operator "seed", agent id = the persona's id)
SEEDS = {
    "exp-night": {"tea-master": 0.62, "go-reviewer": 0.58},
    "exp-tea": {"tea-master": 0.69, "home-chef-zh": 0.73},
}
# agent -> (experiment, generation, operator, parents, fitness, failures)
AGENTS = {
    "agt-aaa111": ("exp-night", 1, "crossover", ["tea-master", "go-reviewer"], 0.71, 0),
    "agt-bbb222": ("exp-night", 2, "mutation", ["agt-aaa111"], 0.78, 0),
    "agt-ccc333": ("exp-night", 2, "crossover", ["agt-aaa111", "empathetic-coach"], 0.66, 1),
    "agt-ddd444": ("exp-tea", 1, "mutation", ["tea-master"], 0.82, 0),
    "agt-eee555": ("exp-tea", 2, "crossover", ["agt-ddd444", "home-chef-zh"], 0.88, 0),
    "agt-fff666": ("exp-tea", 2, "mutation", ["agt-ddd444"], 0.74, 2),
    "agt-ggg777": ("exp-tea", 2, "ensemble", ["agt-ddd444", "agt-eee555"], 0.8, 0),
}
# experiment -> its summary's held-out part, as a finished run stores it (exp-night finished before test
# probes existed: no figures). Tested: the champion and the generations' bests; agt-fff666 was not.
HELD_OUT = {
    "exp-tea": {
        "champion": "agt-eee555",
        "agents": {
            "agt-eee555": {
                "validation": 0.88,
                "train": 0.91,
                "test": 0.8125,
                "test_low": 0.7701,
                "test_high": 0.8512,
                "gap": 0.0975,
            },
            "agt-ddd444": {
                "validation": 0.82,
                "train": 0.84,
                "test": 0.79,
                "test_low": 0.74,
                "test_high": 0.83,
                "gap": 0.05,
            },
            "home-chef-zh": {
                "validation": 0.73,
                "train": 0.75,
                "test": 0.7,
                "test_low": 0.66,
                "test_high": 0.74,
                "gap": 0.05,
            },
        },
    },
}
ARENA = ("arena-s1", ["tea-master", "go-reviewer"])


def build(path: Path) -> Database:
    """Create the database at ``path`` and fill it; returns its owner."""
    from furnace.storage.sql.store import SQLStore
    from tests.storage.old_home import insert_rows, scratch, sql_rows

    db = Database(path)
    personas = scratch(path.parent)  # sealed with this folder's key, as furnace writes them
    store = SQLStore(personas, clock=lambda: NOW - timedelta(days=10))
    for pid, (name, language, expertise) in PERSONAS.items():
        base = {
            "id": pid,
            "name": name,
            "language": language,
            "identity": f"{name}.",
            "expertise": expertise,
            "principles": ["Be concise." if language == "en" else "回答要简短。"],
        }
        store.save_elixir(parse_elixir(base))
        if pid == "tea-master":  # a second version: one more skill and a learned preference
            prefs = [{"dimension": "tone", "value": "lively", "count": 2, "weight": 0.7, "evidence": "活泼点"}]
            store.save_elixir(parse_elixir({**base, "expertise": [*expertise, "红茶"], "style_preferences": prefs}))
    insert_rows(db, "elixir_versions", sql_rows(personas, "elixir_versions"))
    personas.close()
    for made in path.parent.glob("scratch.sqlite*"):
        made.unlink()
    with db.transaction() as con:
        for eid, (name, hours) in EXPERIMENTS.items():
            config = {"name": name, "seeds": {"ids": sorted(SEEDS[eid])}}
            con.execute(
                "INSERT INTO experiments (experiment_id, name, config, seed, model, status, summary, created_at) "
                "VALUES (?, ?, ?, 1, 'offline', 'finished', ?, ?)",
                [
                    eid,
                    name,
                    json.dumps(config),
                    json.dumps({"held_out": HELD_OUT.get(eid, {})}),
                    NOW - timedelta(hours=hours),
                ],
            )
            for gen in (0, 1, 2):
                con.execute(
                    "INSERT INTO experiment_generations (experiment_id, generation, survivors, best_fitness,"
                    " mean_fitness, operator_weights) VALUES (?, ?, '[]', ?, ?, '{}')",
                    [eid, gen, 0.6 + gen * 0.1 + (0.05 if eid == "exp-tea" else 0), 0.55 + gen * 0.05],
                )
        for eid, seeds in SEEDS.items():
            for slot, (pid, fit) in enumerate(seeds.items(), start=100):
                con.execute(
                    "INSERT INTO experiment_individuals (experiment_id, generation, agent_id, slot, operator,"
                    " parents, elixir, system_prompt, fitness, objectives, failures, failure_reasons, calls, tokens,"
                    " cost_usd, created_at) VALUES (?, 0, ?, ?, 'seed', '[]', '{}', '', ?, '{}', 0, '[]', 0, 0, 0, ?)",
                    [eid, pid, slot, fit, NOW - timedelta(hours=EXPERIMENTS[eid][1])],
                )
        for slot, (agent, (eid, gen, op, parents, fit, fails)) in enumerate(AGENTS.items()):
            created = NOW - timedelta(hours=EXPERIMENTS[eid][1] - gen)
            reasons = [f"reply to probe {k}: timeout after 30s" for k in range(fails)]
            con.execute(
                "INSERT INTO experiment_individuals (experiment_id, generation, agent_id, slot, operator, parents,"
                " elixir, system_prompt, fitness, objectives, failures, failure_reasons, calls, tokens, cost_usd,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, '{}', '', ?, '{}', ?, ?, 6, 1200, 0.003, ?)",
                [eid, gen, agent, slot, op, json.dumps(parents), fit, fails, json.dumps(reasons), created],
            )
            for parent in parents:
                con.execute("INSERT INTO lineage_edges VALUES (?, ?, ?, '1', 1)", [parent, agent, op])
            con.execute(
                "INSERT INTO agents (id, lineage, lineage_hash, elixir_version, system_prompt, tools, members,"
                " created_at) VALUES (?, '{}', ?, 1, '', '[]', '[]', ?)",
                [agent, f"lh-{agent}", created],
            )
            for probe, value in (("autumn-tea", fit - 0.1), ("code-review", fit)):
                con.execute(
                    "INSERT INTO experiment_scores VALUES (?, ?, ?, ?, 'fidelity', ?, ?, false, ?)",
                    [eid, gen, agent, probe, value, "1/3 target descriptors present", f"missing: {probe} terms"],
                )
            if fails:
                con.execute(
                    "INSERT INTO experiment_scores VALUES (?, ?, ?, 'autumn-tea', 'judge', 0, ?, true, '')",
                    [eid, gen, agent, "judge unavailable: HTTP 503"],
                )
        for k, (eid, task, status) in enumerate(
            [
                ("exp-night", "reply", "ok"),
                ("exp-night", "judge", "ok"),
                ("exp-tea", "reply", "ok"),
                ("exp-tea", "judge", "error"),
                ("exp-tea", "fuse", "ok"),
                (None, "edit", "ok"),
            ]
        ):
            for n in range(3):
                con.execute(
                    "INSERT INTO llm_calls (id, run_id, task, model, cache_key, prompt_tokens, completion_tokens,"
                    " cost_usd, latency_s, cached, status, created_at) VALUES (?, ?, ?, 'offline', ?, 100, 50, 0.001,"
                    " 0.05, ?, ?, ?)",
                    [f"call-{k}-{n}", eid, task, f"key-{k}-{n}", n == 2, status, NOW - timedelta(days=k % 3, hours=n)],
                )
        con.execute(
            "INSERT INTO contents VALUES ('c1', 'tea-master', 2, '秋天喝什么茶', 'zh', ?)", [NOW - timedelta(days=2)]
        )
        for version, source in ((1, "generate"), (2, "revise"), (3, "revise")):
            con.execute(
                "INSERT INTO content_versions VALUES ('c1', ?, ?, '正文', 10, ?, ?, '', ?)",
                [
                    version,
                    f"秋天喝什么茶 V{version}",
                    source,
                    f"rev-c1-v{version}" if version > 1 else None,
                    NOW - timedelta(days=2, hours=-version),
                ],
            )
        con.execute(
            "INSERT INTO revisions VALUES ('rev-c1-v2', 'c1', 's1', 'tea-master', 2, ?, 1, 2, 't', 'b', 't', 'b2',"
            " 'offline', ?)",
            [json.dumps(["太正式了，活泼点"], ensure_ascii=False), NOW - timedelta(days=1)],
        )
        session, members = ARENA
        con.execute("INSERT INTO arena_sessions VALUES (?, '茶话会', 'offline', ?)", [session, NOW - timedelta(days=1)])
        for pos, member in enumerate(members):
            con.execute("INSERT INTO arena_members VALUES (?, ?, ?)", [session, pos, member])
        con.execute(
            "INSERT INTO arena_runs (run_id, session_id, turn, message, directive, status, created_at) "
            "VALUES ('run-1', ?, 1, '报数', 'rollcall', 'finished', ?)",
            [session, NOW - timedelta(days=1)],
        )
        con.execute(
            "INSERT INTO arena_checkpoints (run_id, speaker_index, status, error, created_at) "
            "VALUES ('run-1', 1, 'failed', 'model timeout after 2 attempts', ?)",
            [NOW - timedelta(days=1)],
        )
        con.execute(
            "INSERT INTO arena_replies (reply_id, run_id, session_id, speaker_index, member_id, member_name, text) "
            "VALUES ('r1', 'run-1', ?, 0, 'tea-master', '茶艺大师', '1')",
            [session],
        )
    return db


def build_live(folder: Path) -> DuckDBAssistData:
    """The dataset in the live store of the home ``folder`` (``furnace.sqlite``), read as users' assistants
    read it (see :func:`live_data`)."""
    return live_data(build(folder / "dataset.duckdb"), folder)


def live_data(source: Database, home: Path) -> DuckDBAssistData:
    """``source``'s rows (written raw into a DuckDB file in ``home``, so sealed with the home's key) moved
    into ``home``'s live store, read as the runtime's assist data reads it: DuckDB SQL over a fresh
    snapshot, a persona's versions and the sessions in the live store (no experiment seals are checked:
    the rows were written raw)."""
    from furnace.storage.duckdb import snapshot
    from furnace.storage.migrate import copy_rows
    from furnace.storage.sql.assist import SQLAssistSessions
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.store import SQLStore

    live = SQLDatabase(sqlite_url(home), home=home)
    copy_rows(source, live)
    source.close()
    snapshot.refresh(live)
    return DuckDBAssistData(SnapshotReader(live), history=SQLStore(live).history, sessions=SQLAssistSessions(live))
