"""``furnace demo`` (library part): import, render zh/en, edit into v2, versions, diff — idempotent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from furnace.cli import main
from furnace.cli.demo_cmd import DEMO_PERSONA, DEMO_PRINCIPLE, run_library_demo
from furnace.storage.memory import MemoryStore


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    main(list(args))
    return capsys.readouterr().out


def test_demo_json_twice_stores_nothing_new(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = json.loads(_run(capsys, "demo", "--json"))
    assert len(first["import"]["created"]) >= 12 and first["new_version"] is True
    assert "## 身份" in first["prompts"]["zh"] and "## Identity" in first["prompts"]["en"]
    assert first["edited"]["version"] == 2
    again = json.loads(_run(capsys, "demo", "--json"))
    assert again["new_version"] is False and not again["import"]["created"]
    assert [v["version"] for v in again["versions"]] == [1, 2]
    assert {"field": "tone.humor", "kind": "changed", "before": 0.75, "after": 0.85} in again["diff"]
    assert {"field": "principles", "kind": "added", "before": None, "after": DEMO_PRINCIPLE} in again["diff"]


def test_demo_keeps_later_edits() -> None:
    store = MemoryStore()
    run_library_demo(store)
    result = run_library_demo(store)
    assert not result["new_version"] and len(result["versions"]) == 2
    assert store.get_elixir(DEMO_PERSONA).version == 2
