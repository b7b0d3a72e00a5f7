"""No secret in any stored row: run real HTTP calls with a fake key, then scan the home's live store."""

from __future__ import annotations

from furnace.domain.errors import LLMError
from furnace.llm.cache import CachedLLM
from furnace.llm.seam import TaskKind, system_user
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings
from furnace.storage.sql.db import SQLDatabase

from .stub_server import Reply, chat_body, error_body

SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


def scan(db: SQLDatabase, *needles: str) -> dict[str, list[str]]:
    """For each needle, every ``table.column`` whose text contains it (every column read as text)."""
    from sqlalchemy import inspect

    found: dict[str, list[str]] = {n: [] for n in needles}
    tables = inspect(db.engine).get_table_names()
    columns = [(t, c["name"]) for t in tables for c in inspect(db.engine).get_columns(t)]
    assert columns, "no columns found: the scan would prove nothing"
    for table, column in columns:
        text = f'CAST("{column}" AS TEXT)'
        counts = db.query(
            f"SELECT {', '.join(f'coalesce(sum(CASE WHEN {text} LIKE ? THEN 1 ELSE 0 END), 0)' for _ in needles)}"
            f' FROM "{table}"',
            [f"%{n}%" for n in needles],
        )[0]
        for needle, count in zip(needles, counts, strict=False):
            if count:
                found[needle].append(f"{table}.{column}")
    return found


def test_no_key_in_any_stored_row(stub, fake_key, home, monkeypatch):
    monkeypatch.setenv("FURNACE_API_KEY", fake_key)
    monkeypatch.setenv("DEEPSEEK_API_KEY", fake_key)
    monkeypatch.setenv("FURNACE_MODEL", "openai/stub")
    monkeypatch.setenv("FURNACE_API_BASE", stub.api_base)
    monkeypatch.setenv("FURNACE_MAX_RETRIES", "1")
    settings = FurnaceSettings()
    assert settings.api_key is not None and settings.api_key.get_secret_value() == fake_key
    runtime = Runtime(settings)
    db = runtime.sql
    llm = runtime.llm
    assert isinstance(llm, CachedLLM) and llm.model_name == "openai/stub"
    assert fake_key not in repr(llm) and fake_key not in repr(settings)

    run = llm.for_run("run-secret-scan")
    stub.push(
        Reply(body=chat_body("plain answer")),
        Reply(body=chat_body('{"score": 0.9}')),
        # a hostile server echoing the key in its errors
        Reply(status=401, body=error_body(f"Incorrect API key provided: {fake_key}")),
        Reply(status=500, body=error_body(f"upstream failed for Bearer {fake_key}")),
        Reply(status=500, body=error_body(f"upstream failed for Bearer {fake_key}")),
    )
    assert run.complete(system_user(TaskKind.REPLY, "sys", "hi", seed=1)).text == "plain answer"
    assert run.complete(system_user(TaskKind.JUDGE, "sys", "score", json_schema=SCHEMA)).parsed == {"score": 0.9}
    assert run.complete(system_user(TaskKind.REPLY, "sys", "hi", seed=1)).cached
    for user in ("unauthorised", "server down"):
        try:
            run.complete(system_user(TaskKind.REPLY, "sys", user))
        except LLMError as err:
            assert fake_key not in str(err)
        else:  # pragma: no cover - the script above makes these fail
            raise AssertionError("expected an LLMError")

    totals = run.totals("run-secret-scan")
    assert (totals.calls, totals.cached_calls, totals.failed_calls) == (5, 1, 2)
    assert stub.calls == 5  # 2 successes + 401 (not retried) + two 500s (one retry)

    llm.ledger.flush()
    found = scan(db, fake_key, fake_key[-12:], "plain answer")
    assert found[fake_key] == [] and found[fake_key[-12:]] == []  # not the key, not even a fragment
    assert found["plain answer"] == ["llm_responses.completion"]  # the scan does find stored text
    runtime.close()
    stored = list(settings.home.glob("furnace.sqlite*"))  # the file (and a WAL, were one left)
    assert stored and all(fake_key.encode() not in path.read_bytes() for path in stored)
