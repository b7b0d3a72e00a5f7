"""The synthesis cache's key-value stores (memory, SQLite, PostgreSQL): insert-if-absent, TTL, and two
processes racing on one key of a home's live store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from furnace.fusion.synthesis import MemoryKV, SubResultCache, SynthesisCache
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLKV


def _live(home: Path) -> SQLDatabase:
    """``home``'s live store (``furnace.sqlite``), as a new process opens it."""
    return SQLDatabase(sqlite_url(home), home=home)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def kv_and_clock(request, tmp_path):
    clock = Clock()
    if request.param == "memory":
        return MemoryKV(clock=clock), clock
    from furnace.storage.sql.kv import SQLKV
    from tests.storage.postgres import open_sql

    return SQLKV(open_sql(request, request.param, tmp_path), clock=clock), clock


def test_put_if_absent_returns_the_winner_and_expires(kv_and_clock) -> None:
    kv, clock = kv_and_clock
    assert kv.get("k") is None
    assert kv.put_if_absent("k", {"v": 1}, ttl_s=60) == {"v": 1}
    assert kv.put_if_absent("k", {"v": 2}, ttl_s=60) == {"v": 1}
    assert kv.get("k") == {"v": 1}
    clock.now += 61
    assert kv.get("k") is None
    assert kv.put_if_absent("k", {"v": 3}, ttl_s=None) == {"v": 3}
    clock.now += 10**9
    assert kv.get("k") == {"v": 3}


def test_sub_results_are_cached_by_content(kv_and_clock) -> None:
    kv, _ = kv_and_clock
    sub = SubResultCache(kv)
    calls = []
    for _ in range(3):
        assert (
            sub.get_or_compute("identity", {"parents": ["a", "b"]}, lambda: calls.append(1) or "You are X.")
            == "You are X."
        )
    assert len(calls) == 1 and sub.hits == 2
    assert sub.get_or_compute("identity", {"parents": ["a", "c"]}, lambda: "Y") == "Y"


def test_synthesis_cache_on_the_live_store_survives_a_new_cache_object(tmp_path) -> None:
    from sqlalchemy import select

    from furnace.storage.sql.schema import kv

    db = _live(tmp_path)
    built = []
    value, hit = SynthesisCache(SQLKV(db)).get_or_build("h1", lambda: built.append(1) or {"prompt": "p"})
    assert not hit and value["prompt"] == "p" and value["lineage_hash"] == "h1" and "built_at" in value
    again = SynthesisCache(SQLKV(_live(tmp_path)))  # another process on the same home
    value2, hit2 = again.get_or_build("h1", lambda: built.append(1) or {"prompt": "q"})
    assert hit2 and value2 == value and built == [1]
    [(key, created_at, expires_at)] = db.query(select(kv.c.key, kv.c.created_at, kv.c.expires_at))
    assert key == "synth:h1" and expires_at > created_at


RACER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.kv import SQLKV
    from furnace.fusion.synthesis import SynthesisCache
    home = Path(sys.argv[1])
    db = SQLDatabase(sqlite_url(home), home=home)
    open(sys.argv[2] + ".ready.%d" % os.getpid(), "w").close()
    while not os.path.exists(sys.argv[2]):  # both racers start together
        time.sleep(0.001)
    cache = SynthesisCache(SQLKV(db))
    value, hit = cache.get_or_build("race", lambda: {"prompt": "built by %d" % os.getpid(), "pid": os.getpid()})
    print(json.dumps({"pid": os.getpid(), "value": value, "hit": hit, "builds": cache.builds}))
    """
)


def test_two_processes_racing_on_one_key_agree_on_one_winner(tmp_path: Path) -> None:
    path = tmp_path / "home"
    _live(path).close()  # migrate once up front (and the key file made)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(path), str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    deadline = time.time() + 60
    while len(list(tmp_path.glob("go.ready.*"))) < 2 and time.time() < deadline:
        time.sleep(0.01)
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    values = [o["value"] for o in outs]
    assert values[0] == values[1]
    winner = values[0]["pid"]
    assert winner in {o["pid"] for o in outs}
    db = _live(path)
    assert SQLKV(db).get("synth:race")["pid"] == winner
    assert len(db.query("SELECT key FROM kv WHERE key = 'synth:race'")) == 1


def test_put_many_inserts_new_keys_and_keeps_live_winners(kv_and_clock) -> None:
    kv, clock = kv_and_clock
    kv.put_if_absent("live", {"v": "first"}, ttl_s=60)
    kv.put_if_absent("old", {"v": "expired"}, ttl_s=1)
    clock.now += 2
    stored = kv.put_many_if_absent(
        [
            ("new", {"v": 1}, 60),
            ("live", {"v": "second"}, 60),
            ("old", {"v": "replaced"}, None),
            ("new", {"v": "listed twice"}, 60),
        ],
    )
    assert stored == [{"v": 1}, {"v": "first"}, {"v": "replaced"}, {"v": 1}]
    assert [kv.get(k) for k in ("new", "live", "old")] == [{"v": 1}, {"v": "first"}, {"v": "replaced"}]
    clock.now += 61
    assert (kv.get("new"), kv.get("live"), kv.get("old")) == (None, None, {"v": "replaced"})  # each its own ttl


def test_deferred_sub_results_are_stored_only_when_asked(kv_and_clock) -> None:
    kv, _ = kv_and_clock
    sub = SubResultCache(kv, 60, defer=True)
    computed = []

    def compute() -> str:
        computed.append(1)
        return "answer"

    assert sub.get_or_compute("identity", {"p": 1}, compute) == "answer"
    assert sub.get_or_compute("identity", {"p": 1}, compute) == "answer"  # served from pending
    assert len(computed) == 1
    [(key, value, ttl)] = sub.entries()
    assert kv.get(key) is None and ttl == 60
    kv.put_many_if_absent(sub.entries())
    assert kv.get(key) == value == {"result": "answer"}


def test_put_many_beyond_one_chunk_replaces_expired_values_in_every_chunk(kv_and_clock) -> None:
    """More keys than one statement binds (``chunks``): an expired value in the last chunk is replaced
    and a live one kept, as in the first."""
    from furnace.storage.sql.store import CHUNK

    kv, clock = kv_and_clock
    keys = [f"k{i}" for i in range(CHUNK + 3)]
    kv.put_many_if_absent([(keys[0], {"v": "old"}, 1), (keys[-1], {"v": "old"}, 1), (keys[-2], {"v": "live"}, None)])
    clock.now += 2
    stored = kv.put_many_if_absent([(k, {"v": k}, None) for k in keys])
    assert stored[0] == {"v": keys[0]} and stored[-1] == {"v": keys[-1]} and stored[-2] == {"v": "live"}
    assert [kv.get(k) for k in (keys[0], keys[-1], keys[-2], keys[1])] == [
        {"v": keys[0]},
        {"v": keys[-1]},
        {"v": "live"},
        {"v": keys[1]},
    ]
