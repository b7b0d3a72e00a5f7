"""The arena's records in DuckDB (tables: ``0006_arena.sql``).

Each method is one unit of work (one transaction for several writes; a single
write statement is atomic by itself and runs without one), never held across a
model call. Writes are idempotent by natural keys: sessions by id, runs by
``run_id``, replies by ``reply_id``, checkpoints by (run, speaker index); a
run's plan is written only while it is NULL. Inserts guard with ``WHERE NOT
EXISTS`` rather than ``ON CONFLICT DO NOTHING``, which costs ~2.5 ms more CPU
per statement in DuckDB 2.0. A speaker's reply row is its checkpoint (migration
0015; ``arena_checkpoints`` holds the failed speakers), so a done speaker costs
one statement, its reply (after the last one, the run's end is written behind
it), and a cancel check before its call and after its record, which reads the
flag only when it may have changed (a cancel in this process, or another
process's turn on the file since it was last read); the lease is renewed once a
tenth of its TTL has passed. Sessions never change once saved, so
each is read once per store.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from furnace.arena.lease import Holder, is_free
from furnace.arena.models import ArenaSession, Checkpoint, Plan, ReplyRecord, RunRecord, RunStatus
from furnace.domain.errors import NotFound
from furnace.storage.duckdb.db import Database

_RUN_COLS = "run_id, session_id, turn, message, directive, plan, status, cancel_requested, created_at"
_RUN_NAMES = [c.strip() for c in _RUN_COLS.split(",")]
_SET_STATUS = "UPDATE arena_runs SET status = ?, updated_at = current_timestamp{also} WHERE run_id = ?"
_RELEASE = "DELETE FROM arena_leases WHERE run_id = ? AND token = ?"
_REPLY_COLS = (
    "reply_id, run_id, session_id, speaker_index, member_id, member_name, member_version, text, ordinal, "
    "corrected, created_at"
)


# (file, run id) -> (Database.opens, cancels requested in this process) when the run's cancel flag was
# last read as not set: see DuckDBArenaStore.cancel_requested.
_no_cancel: dict[tuple[str, str], tuple[int, int]] = {}
_no_cancel_lock = threading.Lock()
_cancels = 0


def _insert_reply(reply: ReplyRecord, attempts: int) -> tuple[str, list[Any]]:
    """The statement recording ``reply`` (unless it is recorded) and its parameters."""
    return (
        f"INSERT INTO arena_replies ({_REPLY_COLS}, attempts)"
        " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp, ?"
        " WHERE NOT EXISTS (SELECT 1 FROM arena_replies WHERE reply_id = ?)",
        [
            reply.reply_id,
            reply.run_id,
            reply.session_id,
            reply.speaker_index,
            reply.member_id,
            reply.member_name,
            reply.member_version,
            reply.text,
            reply.ordinal,
            reply.corrected,
            attempts,
            reply.reply_id,
        ],
    )


def _run(row: dict[str, Any]) -> RunRecord:
    plan = row.pop("plan")
    return RunRecord(**row, plan=Plan.model_validate_json(plan) if plan else None)


class DuckDBArenaStore:
    """:class:`furnace.arena.store.ArenaStore` on a :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._sessions_read: dict[str, ArenaSession] = {}  # sessions never change once saved: read once

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/storage.md)."""
        from furnace.storage.duckdb import snapshot

        snapshot.request(self.db)

    # --- sessions --------------------------------------------------------------

    def save_session(self, session: ArenaSession) -> None:
        with self.db.transaction() as con:
            con.execute(
                "INSERT INTO arena_sessions (session_id, title, model) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                [session.id, session.title, session.model],
            )
            con.executemany(
                "INSERT INTO arena_members (session_id, position, member_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                [[session.id, i, m] for i, m in enumerate(session.members)],
            )

    def _sessions(self, where: str = "", params: list[Any] | None = None) -> list[ArenaSession]:
        rows = self.db.query(  # one statement: the sessions with their members in position order
            "SELECT s.session_id, s.title, s.model, s.created_at, (SELECT list(m.member_id ORDER BY m.position)"
            " FROM arena_members m WHERE m.session_id = s.session_id)"
            f" FROM arena_sessions s {where} ORDER BY s.created_at DESC, s.session_id",
            params or [],
        )
        return [
            ArenaSession(id=sid, title=title, model=model, created_at=created, members=tuple(members or ()))
            for sid, title, model, created, members in rows
        ]

    def get_session(self, session_id: str) -> ArenaSession:
        known = self._sessions_read.get(session_id)
        if known is not None:
            return known
        found = self._sessions("WHERE s.session_id = ?", [session_id])
        if not found:
            raise NotFound(f"no arena session {session_id!r}", field="session")
        self._sessions_read[session_id] = found[0]
        return found[0]

    def list_sessions(self) -> list[ArenaSession]:
        return self._sessions()

    # --- runs ------------------------------------------------------------------

    def start_run(self, run: RunRecord) -> RunRecord:
        mark = self._mark()
        inserted = self.db.run(  # one statement: a new run comes back from RETURNING
            "INSERT INTO arena_runs (run_id, session_id, turn, message, directive, plan, status) "
            "SELECT ?, ?, (SELECT count(*) FROM arena_runs WHERE session_id = ?), ?, ?, ?, ? "
            f"WHERE NOT EXISTS (SELECT 1 FROM arena_runs WHERE run_id = ?) RETURNING {_RUN_COLS}",
            [
                run.run_id,
                run.session_id,
                run.session_id,
                run.message,
                run.directive,
                run.plan.model_dump_json() if run.plan else None,
                run.status,
                run.run_id,
            ],
        )
        if inserted:
            stored = _run(dict(zip(_RUN_NAMES, inserted[0], strict=True)))
            self._note_flag(stored.run_id, stored.cancel_requested, mark)  # a new run: not cancelled
            return stored
        return self.get_run(run.run_id)  # the run existed: idempotent

    def get_run(self, run_id: str) -> RunRecord:
        rows = self.db.query_dicts(f"SELECT {_RUN_COLS} FROM arena_runs WHERE run_id = ?", [run_id])
        if not rows:
            raise NotFound(f"no arena run {run_id!r}", field="run")
        return _run(rows[0])

    def list_runs(self, session_id: str) -> list[RunRecord]:
        rows = self.db.query_dicts(
            f"SELECT {_RUN_COLS} FROM arena_runs WHERE session_id = ? ORDER BY turn, created_at", [session_id]
        )
        return [_run(r) for r in rows]

    def set_plan(self, run_id: str, plan: Plan) -> RunRecord:
        mark = self._mark()
        rows = self.db.run(  # one statement: the run comes back with its cancel flag
            "UPDATE arena_runs SET plan = ?, updated_at = current_timestamp "
            f"WHERE run_id = ? AND plan IS NULL RETURNING {_RUN_COLS}",
            [plan.model_dump_json(), run_id],
        )
        if rows:
            stored = _run(dict(zip(_RUN_NAMES, rows[0], strict=True)))
            self._note_flag(run_id, stored.cancel_requested, mark)  # read by the same statement
            return stored
        return self.get_run(run_id)  # it had a plan: that one stands

    def set_status(self, run_id: str, status: RunStatus, *, clear_cancel: bool = False) -> None:
        self.db.execute(_SET_STATUS.format(also=", cancel_requested = false" if clear_cancel else ""), [status, run_id])

    def request_cancel(self, run_id: str) -> None:
        global _cancels
        self.get_run(run_id)
        self.db.execute(
            "UPDATE arena_runs SET cancel_requested = true, updated_at = current_timestamp WHERE run_id = ?", [run_id]
        )
        with _no_cancel_lock:  # after the write: a check that read before it looks again
            _cancels += 1

    def cancel_requested(self, run_id: str) -> bool:
        """The run's cancel flag. A flag read as not set is known to stay so, with no query, while this
        process has held the file since (another process writes only while this one has released it) and
        no cancel was requested in this process since (any store object on any file)."""
        key = (str(self.db.path), run_id)
        with _no_cancel_lock:
            seen = _no_cancel.get(key)
            if seen is not None and self.db.held and seen == (self.db.opens, _cancels):
                return False
        mark = self._mark()
        rows = self.db.query("SELECT cancel_requested FROM arena_runs WHERE run_id = ?", [run_id])
        flag = bool(rows and rows[0][0])
        self._note_flag(run_id, flag, mark)
        return flag

    def _mark(self) -> tuple[int, int]:
        """Taken before a read of a cancel flag: a cancel or a re-open of the file from here on looks again."""
        with _no_cancel_lock:
            return (self.db.opens, _cancels)

    def _note_flag(self, run_id: str, flag: bool, mark: tuple[int, int]) -> None:
        key = (str(self.db.path), run_id)
        with _no_cancel_lock:
            if flag:
                _no_cancel.pop(key, None)
                return
            _no_cancel[key] = mark
            while len(_no_cancel) > 4096:
                _no_cancel.pop(next(iter(_no_cancel)))

    # --- leases (one driver per run) --------------------------------------------

    def claim_run(self, run_id: str, holder: Holder, ttl_s: float) -> Holder | None:
        now = datetime.now(UTC).replace(tzinfo=None)
        expires = now + timedelta(seconds=ttl_s)
        # The usual cases take one statement each: taking a run nobody holds (every drive starts so),
        # renewing our own lease (rarer: a driver renews once a tenth of the TTL has passed).
        if self.db.run(
            "INSERT INTO arena_leases (run_id, token, host, pid, expires_at) SELECT ?, ?, ?, ?, ?"
            " WHERE NOT EXISTS (SELECT 1 FROM arena_leases WHERE run_id = ?) RETURNING run_id",
            [run_id, holder.token, holder.host, holder.pid, expires, run_id],
        ):
            return None
        if self.db.run(
            "UPDATE arena_leases SET expires_at = ? WHERE run_id = ? AND token = ? RETURNING run_id",
            [expires, run_id, holder.token],
        ):
            return None
        with self.db.transaction() as con:  # someone else's lease: take it over only when it is free
            rows = con.execute(
                "SELECT l.token, l.host, l.pid, l.expires_at, r.status FROM arena_leases l"
                " LEFT JOIN arena_runs r USING (run_id) WHERE l.run_id = ?",
                [run_id],
            ).fetchall()
            if rows:
                token, host, pid, expires_at, status = rows[0]
                current = Holder(token=token, host=host, pid=pid)
                if token != holder.token and not is_free(current, expires_at, now, finished=status == "finished"):
                    return current
            con.execute(
                "INSERT OR REPLACE INTO arena_leases (run_id, token, host, pid, expires_at) VALUES (?, ?, ?, ?, ?)",
                [run_id, holder.token, holder.host, holder.pid, expires],
            )
        return None

    def release_run(self, run_id: str, holder: Holder) -> None:
        self.db.execute(_RELEASE, [run_id, holder.token])

    # --- speakers --------------------------------------------------------------

    def record_speaker(
        self, checkpoint: Checkpoint, reply: ReplyRecord | None, *, finish: Holder | None = None
    ) -> bool:
        """A done speaker's record is one statement, its reply (the reply row is its checkpoint); a
        failed speaker's is its checkpoint row. The cancel flag is read after it (no query while it is
        known not set: :meth:`cancel_requested`). With ``finish``, the run's end (status finished, lease
        row removed) is written behind the record, off the turn's end: it reads as written in this
        process, and the file is not handed to another process before it is; a crash that loses it
        leaves a run whose speakers are all recorded, which ``arena resume`` finishes without a call."""
        if reply is not None and checkpoint.status == "done" and checkpoint.reply_id == reply.reply_id:
            self.db.write_one(lambda con: con.execute(*_insert_reply(reply, checkpoint.attempts)))
        else:
            with self.db.transaction() as con:  # a failed speaker (with a reply only in a repeated record)
                if reply is not None:
                    con.execute(*_insert_reply(reply, checkpoint.attempts))
                con.execute(
                    "INSERT INTO arena_checkpoints (run_id, speaker_index, status, reply_id, error, attempts)"
                    " SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS"
                    " (SELECT 1 FROM arena_checkpoints WHERE run_id = ? AND speaker_index = ?)"
                    " AND NOT EXISTS (SELECT 1 FROM arena_replies WHERE run_id = ? AND speaker_index = ?)",
                    [
                        checkpoint.run_id,
                        checkpoint.speaker_index,
                        checkpoint.status,
                        checkpoint.reply_id,
                        checkpoint.error,
                        checkpoint.attempts,
                        *[checkpoint.run_id, checkpoint.speaker_index] * 2,
                    ],
                )
        run_id = checkpoint.run_id
        if finish is None:
            return self.cancel_requested(run_id)
        token = finish.token
        self.db.write_behind(
            lambda con: con.execute(_SET_STATUS.format(also=""), ["finished", run_id]),
            what=f"arena run {run_id}'s finished status",
        )
        self.db.write_behind(  # a finished run's lease is free already (claim_run): this removes the row
            lambda con: con.execute(_RELEASE, [run_id, token]), what=f"arena run {run_id}'s lease"
        )
        return False  # nothing is left to cancel

    def checkpoints(self, run_id: str) -> dict[int, Checkpoint]:
        """The failed speakers' rows, and the done ones: each recorded reply (files written before
        migration 0015 also hold a done row beside the reply; it is read once)."""
        rows = self.db.query_dicts(
            "SELECT run_id, speaker_index, status, reply_id, error, attempts FROM arena_checkpoints"
            " WHERE run_id = ? UNION ALL"
            " SELECT run_id, speaker_index, 'done', reply_id, NULL, coalesce(attempts, 1) FROM arena_replies p"
            " WHERE run_id = ? AND NOT EXISTS (SELECT 1 FROM arena_checkpoints c"
            " WHERE c.run_id = p.run_id AND c.speaker_index = p.speaker_index)"
            " ORDER BY speaker_index",
            [run_id, run_id],
        )
        return {r["speaker_index"]: Checkpoint(**r) for r in rows}

    def replies(self, *, run_id: str | None = None, session_id: str | None = None) -> list[ReplyRecord]:
        where, params = [], []
        if run_id is not None:
            where.append("p.run_id = ?")
            params.append(run_id)
        if session_id is not None:
            where.append("p.session_id = ?")
            params.append(session_id)
        cols = ", ".join(f"p.{c.strip()}" for c in _REPLY_COLS.split(","))
        rows = self.db.query_dicts(
            f"SELECT {cols} FROM arena_replies p LEFT JOIN arena_runs r USING (run_id) "
            f"{'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY r.turn, p.run_id, p.speaker_index",
            params,
        )
        return [ReplyRecord(**r) for r in rows]
