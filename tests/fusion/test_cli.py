"""``furnace fuse`` / ``agent`` / ``lineage`` offline on the sample library."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from furnace import resources
from furnace.cli import cli

LIBRARY_DIR = resources.LIBRARY_DIR


@pytest.fixture()
def runner(home, monkeypatch) -> CliRunner:
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")  # the real model has its own test; keep this one fast
    r = CliRunner()
    for name in ("data-science-mentor", "socratic-math-tutor"):
        result = r.invoke(cli, ["import", str(LIBRARY_DIR / f"{name}.yaml")])
        assert result.exit_code == 0, result.output
    return r


def invoke(runner: CliRunner, *args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_fuse_twice_second_is_a_cache_hit(runner) -> None:
    first = json.loads(
        invoke(runner, "fuse", "data-science-mentor", "socratic-math-tutor", "--operator", "crossover", "--json")
    )
    assert first["from_cache"] is False and first["id"].startswith("agt-") and len(first["lineage_hash"]) == 64
    assert any(n["field"] == "constraints.max_length" for n in first["resolution_notes"])
    second = json.loads(
        invoke(runner, "fuse", "data-science-mentor", "socratic-math-tutor", "--operator", "crossover", "--json")
    )
    assert second["from_cache"] is True and second["model_calls"] == 0 and second["id"] == first["id"]
    text = invoke(runner, "fuse", "data-science-mentor", "socratic-math-tutor", "--operator", "crossover")
    assert f"agent         {first['id']}" in text and "from cache    yes" in text and "resolution notes:" in text


def test_mutation_show_promote_and_lineage(runner) -> None:
    mutant = json.loads(invoke(runner, "fuse", "data-science-mentor", "--seed", "4", "--rate", "0.2", "--json"))
    assert mutant["operator"] == "mutation" and mutant["params"]["rate"] == 0.2
    shown = invoke(runner, "agent", "show", mutant["id"])
    assert "## Identity" in shown and mutant["lineage_hash"] in shown
    assert "promoted" in invoke(runner, "agent", "promote", mutant["id"], "--name", "Mentor Prime")
    tree = invoke(runner, "lineage", "mentor-prime")
    assert mutant["id"] in tree and "data-science-mentor" in tree
    desc = json.loads(invoke(runner, "lineage", "data-science-mentor", "--descendants", "--json"))
    assert {mutant["id"], "mentor-prime"} <= {n["id"] for n in desc["descendants"]}


def test_errors_are_one_line(runner) -> None:
    result = runner.invoke(cli, ["fuse", "data-science-mentor", "nope"])
    assert result.exit_code != 0 and "nope" in str(result.exception)


def test_no_secret_in_any_stored_row(runner, home, monkeypatch) -> None:
    secret = "sk-test-DO-NOT-STORE-1234567890"
    monkeypatch.setenv("FURNACE_API_KEY", secret)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    invoke(runner, "fuse", "data-science-mentor", "socratic-math-tutor", "--operator", "crossover", "--seed", "9")
    invoke(runner, "fuse", "data-science-mentor", "--seed", "9")
    from sqlalchemy import inspect

    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    runtime = Runtime(FurnaceSettings(home=home))
    try:
        tables = inspect(runtime.sql.engine).get_table_names()
        assert "kv" in tables and runtime.sql.query("SELECT count(*) FROM kv")[0][0] > 0
        for table in tables:
            for row in runtime.sql.query(f'SELECT * FROM "{table}"'):
                assert secret not in repr(row), f"secret found in {table}"
    finally:
        runtime.close()


@pytest.mark.slow
def test_two_cli_processes_fusing_at_once_agree(runner, home) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "FURNACE_HOME": str(home), "FURNACE_EMBEDDER": "hash"}
    from pathlib import Path as _P

    args = [
        str(_P(sys.executable).parent / "furnace"),
        "fuse",
        "data-science-mentor",
        "socratic-math-tutor",
        "--operator",
        "crossover",
        "--seed",
        "42",
        "--json",
    ]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    assert outs[0]["id"] == outs[1]["id"] and outs[0]["lineage_hash"] == outs[1]["lineage_hash"]
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    runtime = Runtime(FurnaceSettings(home=home))
    key = "synth:" + outs[0]["lineage_hash"]
    assert len(runtime.sql.query("SELECT key FROM kv WHERE key = ?", [key])) == 1
    runtime.close()
    shown = json.loads(invoke(runner, "agent", "show", outs[0]["id"], "--json"))
    assert shown["id"] == outs[0]["id"]
