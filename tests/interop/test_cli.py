"""``furnace export`` and card detection in ``furnace import``."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from cards_data import V2_CARD, card
from click.testing import CliRunner
from conftest import make_agent

from furnace.domain.elixir import Elixir, edit
from furnace.domain.errors import InputError, NotFound
from furnace.interop.cards import read_card_file


@pytest.fixture()
def runner(settings, native: Elixir, tmp_path: Path):
    from furnace.runtime import Runtime

    store = Runtime(settings).store
    store.save_elixir(native)
    store.save_elixir(edit(native, identity="A slower, gentler night editor."))
    agent = make_agent(edit(native, identity="A faster night editor."), store.get_elixir("night-editor", 1))
    store.save_agent(agent)
    return CliRunner(), settings, agent


def _invoke(runner: CliRunner, *args: str):
    from furnace.cli import cli

    return runner.invoke(cli, list(args), catch_exceptions=True)


def test_export_each_format(runner, native: Elixir, tmp_path: Path) -> None:
    cli_runner, settings, agent = runner
    out = tmp_path / "out"
    for fmt, name in [("card-v2", "e.json"), ("card-v3", "e3.json"), ("card-png", "e.png"), ("skill-zip", "e.zip")]:
        result = _invoke(cli_runner, "export", "night-editor@1", "--format", fmt, "--out", str(out / name), "--json")
        assert result.exit_code == 0, result.output
        info = json.loads(result.output)
        assert info["path"] == str(out / name) and info["version"] == 1 and info["bytes"] > 0
    for name in ("e.json", "e3.json", "e.png"):
        assert read_card_file(out / name).elixir.content_hash == native.content_hash
    assert zipfile.ZipFile(out / "e.zip").namelist() == [
        "night-editor/SKILL.md",
        "night-editor/references/persona.json",
    ]
    result = _invoke(cli_runner, "export", "night-editor", "--format", "skill", "--out", str(out))
    assert result.exit_code == 0 and "v2 as skill" in result.output
    assert (out / "night-editor" / "SKILL.md").exists()


def test_export_card_to_stdout_and_agent(runner) -> None:
    cli_runner, _, agent = runner
    result = _invoke(cli_runner, "export", agent.id, "--format", "card-v3", "--out", "-")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["data"]
    assert data["source"][0] == f"furnace:lineage:{agent.lineage_hash}"
    assert data["extensions"]["furnace"]["agent_id"] == agent.id


def test_export_errors(runner) -> None:
    cli_runner, _, _ = runner
    assert isinstance(_invoke(cli_runner, "export", "nobody", "--format", "skill").exception, NotFound)
    assert isinstance(_invoke(cli_runner, "export", "night-editor@9", "--format", "skill").exception, NotFound)
    result = _invoke(cli_runner, "export", "night-editor", "--format", "skill-zip", "--out", "-")
    assert isinstance(result.exception, InputError)
    assert _invoke(cli_runner, "export", "night-editor", "--format", "yaml").exit_code == 2


def test_import_detects_cards(runner, tmp_path: Path) -> None:
    cli_runner, settings, _ = runner
    path = tmp_path / "mirela.json"
    path.write_text(json.dumps(card(V2_CARD)))
    result = _invoke(cli_runner, "import", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in json.loads(result.output)["created"]] == ["captain-mirela-voss"]
    png = tmp_path / "mirela.png"
    assert (
        _invoke(cli_runner, "export", "captain-mirela-voss", "--format", "card-png", "--out", str(png)).exit_code == 0
    )
    again = json.loads(_invoke(cli_runner, "import", str(png), "--json").output)
    assert [r["id"] for r in again["unchanged"]] == ["captain-mirela-voss"]
