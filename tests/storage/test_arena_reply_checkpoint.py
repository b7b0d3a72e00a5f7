"""A reply is its speaker's checkpoint (DuckDB migration 0015): an old home written before it keeps its
checkpoints through the move into the live store."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace.arena.models import Checkpoint, ReplyRecord
from furnace.storage.sql.arena import SQLArenaStore

from .old_home import move, older_schema


def _reply(index: int) -> ReplyRecord:
    return ReplyRecord(
        reply_id=f"run-1-{index}",
        run_id="run-1",
        session_id="s-1",
        speaker_index=index,
        member_id=f"m{index}",
        member_name=f"M{index}",
        member_version=1,
        text=f"reply {index}",
    )


def test_an_older_files_checkpoints_read_once_beside_the_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with older_schema(monkeypatch, tmp_path / "furnace.duckdb", before=15) as old:
        old.execute(
            "INSERT INTO arena_runs (run_id, session_id, turn, message, directive)"
            " VALUES ('run-1', 's-1', 0, 'hi', 'open')"
        )
        for index in (0, 1):  # done before the upgrade: a reply and a done row each, as furnace wrote them
            r = _reply(index)
            old.execute(
                "INSERT INTO arena_replies (reply_id, run_id, session_id, speaker_index, member_id, member_name, text)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [r.reply_id, r.run_id, r.session_id, r.speaker_index, r.member_id, r.member_name, r.text],
            )
            old.execute(
                "INSERT INTO arena_checkpoints (run_id, speaker_index, status, reply_id, attempts)"
                " VALUES ('run-1', ?, 'done', ?, 2)",
                [index, r.reply_id],
            )
        old.execute(
            "INSERT INTO arena_checkpoints (run_id, speaker_index, status, error, attempts)"
            " VALUES ('run-1', 2, 'failed', 'boom', 3)"
        )
    target, _ = move(old)
    store = SQLArenaStore(target)
    done = store.checkpoints("run-1")
    assert {i: (c.status, c.reply_id, c.attempts) for i, c in done.items()} == {
        0: ("done", "run-1-0", 2),
        1: ("done", "run-1-1", 2),
        2: ("failed", None, 3),
    }

    store.record_speaker(
        Checkpoint(run_id="run-1", speaker_index=3, status="done", reply_id="run-1-3", attempts=2), _reply(3)
    )
    assert target.query("SELECT count(*) FROM arena_checkpoints WHERE speaker_index = 3") == [(0,)]  # the reply is it
    assert (store.checkpoints("run-1")[3].status, store.checkpoints("run-1")[3].attempts) == ("done", 2)
    # a failure recorded later for a speaker that is done changes nothing
    store.record_speaker(Checkpoint(run_id="run-1", speaker_index=3, status="failed", error="late"), None)
    assert store.checkpoints("run-1")[3].status == "done"
    assert sorted(store.checkpoints("run-1")) == [0, 1, 2, 3]
