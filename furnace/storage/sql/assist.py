"""The lab assistant's sessions in the relational store (its reads run on the analysis snapshot)."""

from __future__ import annotations

from sqlalchemy import select

from furnace.assistant.answer import AssistantState
from furnace.domain.times import utc_now
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import assistant_sessions


class SQLAssistSessions:
    """Assistant sessions (the locked scope and the question/answer history) by id."""

    def __init__(self, db: SQLDatabase) -> None:
        self.db = db

    def load_state(self, session_id: str) -> AssistantState:
        rows = self.db.query(select(assistant_sessions.c.state).where(assistant_sessions.c.session_id == session_id))
        return AssistantState.model_validate_json(rows[0][0]) if rows else AssistantState(session_id=session_id)

    def save_state(self, state: AssistantState) -> None:
        row = {"session_id": state.session_id, "state": state.model_dump_json(), "updated_at": utc_now()}
        statement = (
            self.db.insert(assistant_sessions)
            .values(row)
            .on_conflict_do_update(
                index_elements=["session_id"], set_={"state": row["state"], "updated_at": row["updated_at"]}
            )
        )
        self.db.write(lambda conn: conn.execute(statement))
