"""``furnace cache stats|prune`` and the automatic purge of expired model responses."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from furnace.cli import EXIT_OK, main
from furnace.domain.times import utc_now
from furnace.llm.seam import Completion
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings
from furnace.storage.sql.llm_calls import SQLResponseCache
from furnace.storage.sql.schema import llm_responses


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code: object = 0
    try:
        main(list(argv))
    except SystemExit as done:
        code = done.code
    return (0 if code is None else int(code)), capsys.readouterr().out  # type: ignore[call-overload]


def _seed(home: Path, ages_days: dict[str, float]) -> None:
    """Cached responses in the home's live store, each dated ``age`` days back."""
    runtime = Runtime(FurnaceSettings(home=home))
    cache = SQLResponseCache(runtime.sql, ttl_s=None)
    for key, age in ages_days.items():
        cache.put(key, Completion(text=key, model="m"), task="judge")
        runtime.sql.execute(
            update(llm_responses)
            .where(llm_responses.c.cache_key == key)
            .values(created_at=utc_now() - timedelta(days=age))
        )
    runtime.close()


def test_stats_and_prune_by_the_ttl(capsys, home: Path, monkeypatch) -> None:
    monkeypatch.setenv("FURNACE_CACHE_TTL_DAYS", "30")
    _seed(home, {"old": 40, "older": 400, "fresh": 1})
    code, out = _run(capsys, "cache", "stats", "--json")
    stats = json.loads(out)
    assert code == EXIT_OK and (stats["responses"], stats["expired"], stats["ttl_days"]) == (3, 2, 30)
    assert stats["by_task"] == {"judge": 3}
    code, out = _run(capsys, "cache", "prune", "--json")
    assert code == EXIT_OK and json.loads(out)["responses_deleted"] == 2
    assert json.loads(_run(capsys, "cache", "stats", "--json")[1])["responses"] == 1
    code, out = _run(capsys, "cache", "prune", "--older-than", "0")
    assert code == EXIT_OK and "deleted 1 cached responses" in out


def test_an_expired_response_is_not_served_and_is_purged_when_the_model_is_built(home: Path) -> None:
    _seed(home, {"old": 100, "fresh": 0})
    runtime = Runtime(FurnaceSettings(home=home, cache_ttl_days=90))
    llm = runtime.llm  # building the model runs the automatic purge
    assert [r[0] for r in runtime.sql.query("SELECT cache_key FROM llm_responses")] == ["fresh"]
    assert llm.cache.get("fresh") is not None and llm.cache.get("old") is None
    runtime.close()
