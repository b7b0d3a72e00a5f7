"""Timestamps of written content, revisions and arena transcripts.

In memory and in the store's columns they are naive UTC: what SQLite's and PostgreSQL's ``timestamp``
columns hold, compared and sorted as they are. Wherever one leaves as JSON (``--json``, an export) it is
ISO 8601 with its ``+00:00`` offset, as an elixir's ``created_at`` is, so no reader takes it for local
time; read back, a value with an offset is converted to naive UTC, so a JSON round trip gives the same
value.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer


def utc_now() -> datetime:
    """Now, as naive UTC (what the stores keep)."""
    return datetime.now(UTC).replace(tzinfo=None)


def naive_utc(moment: datetime) -> datetime:
    """``moment`` as naive UTC (one with an offset converted; a naive one is taken as UTC already)."""
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _marked(moment: datetime) -> str:
    return moment.replace(tzinfo=UTC).isoformat()


UTCStamp = Annotated[datetime, AfterValidator(naive_utc), PlainSerializer(_marked, return_type=str, when_used="json")]
"""A naive UTC timestamp that says ``+00:00`` in JSON (see the module docstring)."""
