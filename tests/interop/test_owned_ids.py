"""Ids are owned: agent ids cannot be imported, and an import never silently replaces an elixir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import make_agent, make_native

from furnace import resources
from furnace.cli import cli
from furnace.domain.elixir import edit
from furnace.domain.errors import InputError
from furnace.interop.cards import export_card_json
from furnace.interop.importers import import_file, import_library
from furnace.storage.memory import MemoryStore

GOOD = {"id": "ada", "name": "Ada", "identity": "You are Ada.", "expertise": ["math"], "principles": ["Be exact."]}


def test_an_agent_id_cannot_be_imported_as_an_elixir(tmp_path: Path) -> None:
    store = MemoryStore()
    native = make_native()
    agent = make_agent(native, native)
    store.save_agent(agent)
    before = store.get_agent(agent.id)
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "id": agent.id, "identity": "v2 … updated"}))
    with pytest.raises(InputError, match="belongs to an agent"):
        import_file(path, store, new_version=True)
    assert store.get_agent(agent.id) == before and len(store.history(agent.id)) == 1


def test_an_agent_id_row_in_a_csv_is_skipped(tmp_path: Path) -> None:
    from furnace.interop.importers import import_elixirs
    from furnace.interop.importers.files import parse_document

    ((_, elixir),) = parse_document("x.yaml", yaml.safe_dump({**GOOD, "id": "agt-0123456789abcdef0123"}), fmt="yaml")
    report = import_elixirs([("row 2", elixir)], MemoryStore(), row_wise=True)
    assert report.skipped == [
        (2, "id 'agt-0123456789abcdef0123' belongs to an agent (agents are made by fusion, not imported)")
    ]


def test_an_agents_card_imports_as_a_new_elixir(tmp_path: Path) -> None:
    native = make_native()
    agent = make_agent(native, native)
    path = tmp_path / "agent.card.json"
    path.write_bytes(export_card_json(agent, "v3"))
    store = MemoryStore()
    report = import_file(path, store)
    (ref,) = report.created
    assert not ref.id.startswith("agt-")


def test_import_library_never_replaces_a_users_own_elixir() -> None:
    store = MemoryStore()
    mine = edit(_go_reviewer(), language="zh", identity="你是一位严格的 Go 代码审查员。")
    store.save_elixir(mine)
    report = import_library(resources.LIBRARY_DIR, store)
    assert [r.id for r, _ in report.conflicts] == ["go-reviewer"]
    assert store.get_elixir("go-reviewer").language == "zh" and store.get_elixir("go-reviewer").version == 1
    assert len(report.created) >= 12


def test_import_library_skips_a_deleted_elixir_and_imports_the_rest() -> None:
    store = MemoryStore()
    import_library(resources.LIBRARY_DIR, store)
    store.delete_elixir("viral-copywriter")
    report = import_library(resources.LIBRARY_DIR, store)
    assert report.skipped == [(0, "viral-copywriter.yaml: elixir 'viral-copywriter' was deleted")]
    assert len(report.unchanged) >= 12 and not report.created and not report.updated and not report.conflicts
    assert store.get_elixir("viral-copywriter").withdrawn and len(store.history("viral-copywriter")) == 1


def _go_reviewer():
    from furnace.interop.importers import load_elixir_file

    return load_elixir_file(resources.LIBRARY_DIR / "go-reviewer.yaml")[0]


def test_cli_reports_and_counts_conflicts_and_new_version_adds(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "ada.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    assert runner.invoke(cli, ["import", str(path)]).exit_code == 0
    path.write_text(yaml.safe_dump({**GOOD, "principles": ["Be exact.", "Show your work."]}))
    result = runner.invoke(cli, ["import", str(path)])
    assert result.exit_code == 0
    assert "conflict: ada.yaml: elixir 'ada' already exists (v1) with different content" in result.output
    assert "conflicts 1" in result.output
    data = json.loads(runner.invoke(cli, ["import", str(path), "--json"]).output)
    assert len(data["conflicts"]) == 1 and not data["updated"]
    added = json.loads(runner.invoke(cli, ["import", str(path), "--new-version", "--json"]).output)
    assert [r["version"] for r in added["updated"]] == [2] and not added["conflicts"]


def test_cli_import_library_after_a_delete_goes_on(home: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["import", "--library"]).exit_code == 0
    assert runner.invoke(cli, ["elixir", "delete", "viral-copywriter"]).exit_code == 0
    result = runner.invoke(cli, ["import", "--library"])
    assert result.exit_code == 0, result.output
    assert "skipped: viral-copywriter.yaml: elixir 'viral-copywriter' was deleted" in result.output
    assert ", skipped 1, conflicts 0" in result.output
