"""The arena's records in the relational store (:class:`furnace.arena.store.ArenaStore`).

Each method is one transaction, never held across a model call, idempotent by natural keys: sessions by
id, runs by ``run_id``, replies by ``reply_id``, failed speakers by (run, speaker index); a run's plan is
written only while it is NULL. A done speaker's reply row is its checkpoint; a run's end (status
finished, lease removed) is written in the same transaction as its last speaker's record.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, delete, func, literal, select, union_all, update

from furnace.arena.lease import Holder, is_free
from furnace.arena.models import ArenaSession, Checkpoint, Plan, ReplyRecord, RunRecord, RunStatus
from furnace.domain.errors import NotFound
from furnace.domain.times import utc_now
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import (
    arena_checkpoints,
    arena_leases,
    arena_members,
    arena_replies,
    arena_runs,
    arena_sessions,
)

_RUN = arena_runs.c
_P = arena_replies.c
_K = arena_checkpoints.c
_L = arena_leases.c
_RUN_COLS = ("run_id", "session_id", "turn", "message", "directive", "plan", "status", "cancel_requested", "created_at")
_REPLY_COLS = (
    "reply_id",
    "run_id",
    "session_id",
    "speaker_index",
    "member_id",
    "member_name",
    "member_version",
    "text",
    "ordinal",
    "corrected",
    "created_at",
)


def _run(row: Any) -> RunRecord:
    data = dict(zip(_RUN_COLS, row, strict=True))
    plan = data.pop("plan")
    return RunRecord(**data, plan=Plan.model_validate_json(plan) if plan else None)


class SQLArenaStore:
    """Arena sessions, runs, replies, checkpoints and leases."""

    def __init__(self, db: SQLDatabase) -> None:
        self.db = db

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/store.md)."""
        self.db.snapshot_soon()

    # --- sessions ------------------------------------------------------------------------------------

    def save_session(self, session: ArenaSession) -> None:
        def work(conn: Connection) -> None:
            row = {"session_id": session.id, "title": session.title, "model": session.model, "created_at": utc_now()}
            conn.execute(self.db.insert(arena_sessions).on_conflict_do_nothing(), row)
            members = [{"session_id": session.id, "position": i, "member_id": m} for i, m in enumerate(session.members)]
            if members:
                conn.execute(self.db.insert(arena_members).on_conflict_do_nothing(), members)

        self.db.write(work)

    def _sessions(self, session_id: str | None = None) -> list[ArenaSession]:
        query = select(arena_sessions).order_by(arena_sessions.c.created_at.desc(), arena_sessions.c.session_id)
        members = select(arena_members).order_by(arena_members.c.session_id, arena_members.c.position)
        if session_id is not None:
            query = query.where(arena_sessions.c.session_id == session_id)
            members = members.where(arena_members.c.session_id == session_id)
        with self.db.connect() as conn:
            rows = conn.execute(query).all()
            by_session: dict[str, list[str]] = {}
            for sid, _, member in conn.execute(members):
                by_session.setdefault(sid, []).append(member)
        return [
            ArenaSession(id=sid, title=title, model=model, created_at=created, members=tuple(by_session.get(sid, ())))
            for sid, title, model, created in rows
        ]

    def get_session(self, session_id: str) -> ArenaSession:
        found = self._sessions(session_id)
        if not found:
            raise NotFound(f"no arena session {session_id!r}", field="session")
        return found[0]

    def list_sessions(self) -> list[ArenaSession]:
        return self._sessions()

    # --- runs ----------------------------------------------------------------------------------------

    def start_run(self, run: RunRecord) -> RunRecord:
        def work(conn: Connection) -> None:
            if conn.execute(select(_RUN.run_id).where(_RUN.run_id == run.run_id)).first() is not None:
                return  # the run existed: idempotent
            turn = conn.execute(select(func.count()).where(_RUN.session_id == run.session_id)).scalar()
            now = utc_now()
            conn.execute(
                arena_runs.insert(),
                {
                    "run_id": run.run_id,
                    "session_id": run.session_id,
                    "turn": int(turn or 0),
                    "message": run.message,
                    "directive": run.directive,
                    "plan": run.plan.model_dump_json() if run.plan else None,
                    "status": run.status,
                    "cancel_requested": False,
                    "created_at": now,
                    "updated_at": now,
                },
            )

        self.db.write(work)
        return self.get_run(run.run_id)

    def get_run(self, run_id: str) -> RunRecord:
        rows = self.db.query(select(*(arena_runs.c[c] for c in _RUN_COLS)).where(_RUN.run_id == run_id))
        if not rows:
            raise NotFound(f"no arena run {run_id!r}", field="run")
        return _run(rows[0])

    def list_runs(self, session_id: str) -> list[RunRecord]:
        query = select(*(arena_runs.c[c] for c in _RUN_COLS)).where(_RUN.session_id == session_id)
        return [_run(r) for r in self.db.query(query.order_by(_RUN.turn, _RUN.created_at))]

    def set_plan(self, run_id: str, plan: Plan) -> RunRecord:
        statement = (
            update(arena_runs)
            .where(_RUN.run_id == run_id, _RUN.plan.is_(None))
            .values(plan=plan.model_dump_json(), updated_at=utc_now())
        )
        self.db.write(lambda conn: conn.execute(statement))
        return self.get_run(run_id)  # a plan set before stands

    def set_status(self, run_id: str, status: RunStatus, *, clear_cancel: bool = False) -> None:
        values: dict[str, Any] = {"status": status, "updated_at": utc_now()}
        if clear_cancel:
            values["cancel_requested"] = False
        self.db.write(lambda conn: conn.execute(update(arena_runs).where(_RUN.run_id == run_id).values(values)))

    def request_cancel(self, run_id: str) -> None:
        self.get_run(run_id)
        statement = update(arena_runs).where(_RUN.run_id == run_id).values(cancel_requested=True, updated_at=utc_now())
        self.db.write(lambda conn: conn.execute(statement))

    def cancel_requested(self, run_id: str) -> bool:
        rows = self.db.query(select(_RUN.cancel_requested).where(_RUN.run_id == run_id))
        return bool(rows and rows[0][0])

    # --- leases (one driver per run) ------------------------------------------------------------------

    def claim_run(self, run_id: str, holder: Holder, ttl_s: float) -> Holder | None:
        """Take (or renew) the run's lease; the current holder when someone else holds it."""

        def work(conn: Connection) -> Holder | None:
            now = utc_now()
            found = conn.execute(
                select(_L.token, _L.host, _L.pid, _L.expires_at, _RUN.status)
                .select_from(arena_leases.outerjoin(arena_runs, _RUN.run_id == _L.run_id))
                .where(_L.run_id == run_id)
            ).first()
            if found is not None:
                token, host, pid, expires_at, status = found
                current = Holder(token=token, host=host, pid=pid)
                if token != holder.token and not is_free(current, expires_at, now, finished=status == "finished"):
                    return current
                conn.execute(delete(arena_leases).where(_L.run_id == run_id))
            conn.execute(
                arena_leases.insert(),
                {
                    "run_id": run_id,
                    "token": holder.token,
                    "host": holder.host,
                    "pid": holder.pid,
                    "expires_at": now + timedelta(seconds=ttl_s),
                },
            )
            return None

        return self.db.write(work)

    def release_run(self, run_id: str, holder: Holder) -> None:
        statement = delete(arena_leases).where(_L.run_id == run_id, _L.token == holder.token)
        self.db.write(lambda conn: conn.execute(statement))

    # --- speakers ------------------------------------------------------------------------------------

    def record_speaker(
        self, checkpoint: Checkpoint, reply: ReplyRecord | None, *, finish: Holder | None = None
    ) -> bool:
        """Record a speaker in one transaction: a done speaker's reply (its checkpoint), a failed one's
        checkpoint row; with ``finish``, the run's end too (status finished, lease removed). Returns the
        run's cancel flag (False once finished)."""

        def work(conn: Connection) -> None:
            if reply is not None:
                row = {name: getattr(reply, name) for name in _REPLY_COLS if name != "created_at"}
                row.update(created_at=utc_now(), attempts=checkpoint.attempts)
                conn.execute(self.db.insert(arena_replies).on_conflict_do_nothing(), row)
            done = reply is not None and checkpoint.status == "done" and checkpoint.reply_id == reply.reply_id
            if not done:
                has_reply = conn.execute(
                    select(_P.reply_id).where(
                        _P.run_id == checkpoint.run_id, _P.speaker_index == checkpoint.speaker_index
                    )
                ).first()
                if has_reply is None:
                    conn.execute(
                        self.db.insert(arena_checkpoints).on_conflict_do_nothing(),
                        {
                            "run_id": checkpoint.run_id,
                            "speaker_index": checkpoint.speaker_index,
                            "status": checkpoint.status,
                            "reply_id": checkpoint.reply_id,
                            "error": checkpoint.error,
                            "attempts": checkpoint.attempts,
                            "created_at": utc_now(),
                        },
                    )
            if finish is not None:
                conn.execute(
                    update(arena_runs)
                    .where(_RUN.run_id == checkpoint.run_id)
                    .values(status="finished", updated_at=utc_now())
                )
                conn.execute(delete(arena_leases).where(_L.run_id == checkpoint.run_id, _L.token == finish.token))

        self.db.write(work)
        return False if finish is not None else self.cancel_requested(checkpoint.run_id)

    def checkpoints(self, run_id: str) -> dict[int, Checkpoint]:
        """The failed speakers' rows, and the done ones: each recorded reply."""
        failed = select(_K.run_id, _K.speaker_index, _K.status, _K.reply_id, _K.error, _K.attempts).where(
            _K.run_id == run_id
        )
        no_row = ~select(_K.run_id).where(_K.run_id == _P.run_id, _K.speaker_index == _P.speaker_index).exists()
        done = select(
            _P.run_id,
            _P.speaker_index,
            literal("done"),
            _P.reply_id,
            literal(None),
            func.coalesce(_P.attempts, 1),
        ).where(_P.run_id == run_id, no_row)
        rows = self.db.query(union_all(failed, done))
        keys = ("run_id", "speaker_index", "status", "reply_id", "error", "attempts")
        return {r[1]: Checkpoint(**dict(zip(keys, r, strict=True))) for r in sorted(rows, key=lambda r: r[1])}

    def replies(self, *, run_id: str | None = None, session_id: str | None = None) -> list[ReplyRecord]:
        query = select(*(arena_replies.c[c] for c in _REPLY_COLS)).select_from(
            arena_replies.outerjoin(arena_runs, _RUN.run_id == _P.run_id)
        )
        if run_id is not None:
            query = query.where(_P.run_id == run_id)
        if session_id is not None:
            query = query.where(_P.session_id == session_id)
        rows = self.db.query(query.order_by(_RUN.turn, _P.run_id, _P.speaker_index))
        return [ReplyRecord(**dict(zip(_REPLY_COLS, r, strict=True))) for r in rows]
