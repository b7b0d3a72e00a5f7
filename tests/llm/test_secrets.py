"""No secret in any stored row: run real HTTP calls with a fake key, then scan the DuckDB file."""

from __future__ import annotations

from furnace.domain.errors import LLMError
from furnace.llm.cache import CachedLLM
from furnace.llm.seam import TaskKind, system_user
from furnace.runtime import build_llm
from furnace.settings import FurnaceSettings
from furnace.storage.duckdb.db import Database

from .stub_server import Reply, chat_body, error_body

SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


def scan(db: Database, *needles: str) -> dict[str, list[str]]:
    """For each needle, every ``table.column`` whose text contains it (all VARCHAR/JSON columns, one connection)."""
    found: dict[str, list[str]] = {n: [] for n in needles}
    with db.connect(read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'main' AND (data_type IN ('VARCHAR', 'JSON') OR data_type LIKE 'VARCHAR%')"
        ).fetchall()
        assert columns, "no text columns found: the scan would prove nothing"
        for table, column in columns:
            text = f'CAST("{column}" AS VARCHAR)'
            counts = con.execute(
                f'SELECT {", ".join(f"count(*) FILTER (WHERE {text} LIKE ?)" for _ in needles)} FROM "{table}"',
                [f"%{n}%" for n in needles],
            ).fetchall()[0]
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
    db = Database(settings.db_path)
    llm = build_llm(settings, db=db)
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
    db_bytes = settings.db_path.read_bytes()
    assert fake_key.encode() not in db_bytes
