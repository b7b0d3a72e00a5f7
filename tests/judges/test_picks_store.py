"""One contract, three pick stores (memory, SQLite, PostgreSQL): added, read back, undone but kept,
never clobbered."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.errors import InputError, NotFound
from furnace.scoring.picks import MemoryPicks, Pick, new_pick_id
from tests.storage.conftest import TickClock


def _stored(request: pytest.FixtureRequest, kind: str, home: Path, **kw: Any) -> tuple[Any, Any]:
    """(the database, its pick store) of ``kind``: "sqlite" or "postgresql"."""
    from furnace.storage.sql.picks import SQLPicks
    from tests.storage.postgres import open_sql

    sql = open_sql(request, kind, home)
    return sql, SQLPicks(sql, **kw)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def picks(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryPicks(clock=TickClock())
    else:
        db, store = _stored(request, request.param, tmp_path, clock=TickClock())
        yield store
        db.close()


def _pick(who: str = "ana", choice: str = "A", **over: Any) -> Pick:
    values: dict[str, Any] = {
        "pick_id": new_pick_id(),
        "experiment_id": "exp-1",
        "probe": "launch-note",
        "agent_a": "agt-a",
        "generation_a": 2,
        "agent_b": "agt-b",
        "generation_b": 3,
        "choice": choice,
        "who": who,
        "reason": "warmer",
        "order_seed": 41,
    }
    return Pick(**{**values, **over})


def test_added_picks_read_back_whole_and_in_order(picks: Any) -> None:
    first = picks.add(_pick())
    second = picks.add(_pick(who="bo", choice="tie", reason=""))
    assert first.created_at is not None and second.created_at > first.created_at
    got = picks.picks("exp-1")
    assert [p.pick_id for p in got] == [first.pick_id, second.pick_id]
    assert (got[0].agent_a, got[0].generation_b, got[0].choice, got[0].reason, got[0].order_seed) == (
        "agt-a",
        3,
        "A",
        "warmer",
        41,
    )
    assert got[0].winner == "agt-a" and got[1].winner is None and got[1].outcome() == ("agt-a", "agt-b", 0.5)
    assert picks.picks("exp-other") == []
    assert picks.add(_pick(pick_id=first.pick_id, choice="B")) == first  # the same id again: unchanged


def test_undo_keeps_the_pick_and_only_its_author_may(picks: Any) -> None:
    mine = picks.add(_pick())
    theirs = picks.add(_pick(who="bo"))
    assert picks.last("exp-1", "ana") == mine
    with pytest.raises(InputError, match="only they can undo"):
        picks.undo(theirs.pick_id, who="ana")
    with pytest.raises(NotFound):
        picks.undo("pick-none", who="ana")
    undone = picks.undo(mine.pick_id, who="ana")
    assert undone.undone and picks.undo(mine.pick_id, who="ana").undone_at == undone.undone_at
    assert [p.pick_id for p in picks.picks("exp-1")] == [theirs.pick_id]
    assert {p.pick_id for p in picks.picks("exp-1", include_undone=True)} == {mine.pick_id, theirs.pick_id}
    assert picks.last("exp-1", "ana") is None


def test_people_picking_at_once_never_clobber_each_other(picks: Any) -> None:
    def person(name: str) -> None:
        for _ in range(10):
            picks.add(_pick(who=name))

    threads = [threading.Thread(target=person, args=(n,)) for n in ("ana", "bo", "cy")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = picks.picks("exp-1")
    assert len(rows) == 30 and {p.who for p in rows} == {"ana", "bo", "cy"}


def test_a_bad_pick_is_refused() -> None:
    with pytest.raises(InputError):
        _pick(choice="C")
    with pytest.raises(InputError):
        _pick(agent_b="agt-a", generation_b=2)
    with pytest.raises(InputError):
        _pick(who=" ")


_PICKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from furnace.runtime import Runtime
    from furnace.scoring.picks import Pick, new_pick_id
    from furnace.settings import FurnaceSettings

    picks = Runtime(FurnaceSettings(home=Path(sys.argv[1]))).picks
    print("ready", flush=True)
    for i in range(int(sys.argv[2])):
        picks.add(Pick(new_pick_id(), "exp-1", "p", "agt-a", 1, "agt-b", 1, "B", "bo", reason=f"bo {i}"))
    """
)


@pytest.mark.slow
def test_two_people_in_two_processes_lose_no_pick(tmp_path: Path) -> None:
    """Two ``furnace pick`` sessions on one home's live store, each in its own process."""
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    path = tmp_path / "home"
    runtime = Runtime(FurnaceSettings(home=path))
    picks = runtime.picks
    picks.picks("exp-1")  # migrated before the other process opens it
    n = 15
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", _PICKER, str(path), str(n)],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for i in range(n):
            picks.add(_pick(reason=f"ana {i}"))
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    reasons = {p.reason for p in picks.picks("exp-1")}
    runtime.close()
    assert reasons == {f"ana {i}" for i in range(n)} | {f"bo {i}" for i in range(n)}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_pick_changed_outside_furnace_is_refused_by_name(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    from furnace.domain.errors import SealError

    db, picks = _stored(request, kind, tmp_path)
    kept = picks.add(_pick())
    assert picks.undo(picks.add(_pick(who="bo")).pick_id, who="bo").undone  # an undo is sealed too
    assert len(picks.picks("exp-1", include_undone=True)) == 2
    db.execute("UPDATE human_picks SET choice = 'B' WHERE pick_id = ?", [kept.pick_id])
    with pytest.raises(SealError, match=f"pick {kept.pick_id} does not match its keyed seal"):
        picks.picks("exp-1")


def test_a_runtime_on_the_relational_store_keeps_its_picks_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home's picks live in its ``furnace.sqlite``; with ``FURNACE_DATABASE_URL`` they live in the
    database it names, and the home's own file is left alone."""
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings
    from furnace.storage.sql.picks import SQLPicks

    home = tmp_path / "home"
    runtime = Runtime(FurnaceSettings(home=home))
    try:
        assert isinstance(runtime.picks, SQLPicks) and runtime.sql.path == (home / "furnace.sqlite").resolve()
        kept = runtime.picks.add(_pick())
        assert runtime.sql.query("SELECT pick_id, seal IS NOT NULL FROM human_picks") == [(kept.pick_id, True)]
    finally:
        runtime.close()
    monkeypatch.setenv("FURNACE_DATABASE_URL", f"sqlite:///{tmp_path / 'team.sqlite'}")
    runtime = Runtime(FurnaceSettings(home=home))
    try:
        assert runtime.picks.picks("exp-1") == []  # the team's database, not the home's file
        other = runtime.picks.add(_pick(who="bo"))
        assert runtime.sql.query("SELECT pick_id FROM human_picks") == [(other.pick_id,)]
    finally:
        runtime.close()
    monkeypatch.delenv("FURNACE_DATABASE_URL")
    runtime = Runtime(FurnaceSettings(home=home))
    try:
        assert [p.pick_id for p in runtime.picks.picks("exp-1")] == [kept.pick_id]
    finally:
        runtime.close()
