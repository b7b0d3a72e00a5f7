"""Content's and the arena's timestamps: naive UTC in memory, ``+00:00`` in JSON, the same after a round trip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from furnace.arena.models import ArenaSession
from furnace.writing.content import Content


def test_a_timestamp_is_said_to_be_utc_in_json_and_comes_back_the_same() -> None:
    content = Content(id="cnt-1", persona_id="p", persona_version=1, topic="t", created_at=datetime(2026, 12, 7, 8, 30))
    said = content.model_dump(mode="json")["created_at"]
    assert said == "2026-12-07T08:30:00+00:00"
    assert Content.model_validate_json(content.model_dump_json()) == content
    assert content.model_dump()["created_at"] == datetime(2026, 12, 7, 8, 30)  # naive in Python, as the stores keep it


def test_a_timestamp_with_another_offset_is_kept_as_naive_utc() -> None:
    beijing = datetime(2026, 12, 7, 16, 30, tzinfo=timezone(timedelta(hours=8)))
    session = ArenaSession(id="ses-1", members=["a", "b"], model="m", created_at=beijing)
    assert session.created_at == datetime(2026, 12, 7, 8, 30) and session.created_at.tzinfo is None
    assert (
        ArenaSession(id="ses-2", members=["a", "b"], model="m", created_at=beijing.astimezone(UTC)).created_at
        == session.created_at
    )
    assert ArenaSession(id="ses-3", members=["a", "b"], model="m").model_dump(mode="json")["created_at"] is None
