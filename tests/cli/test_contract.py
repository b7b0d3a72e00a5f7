"""The CLI contract: exit codes 0/1/2/3, ``--version``, and a FURNACE_HOME that is never silently invented."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace import resources
from furnace.cli import EXIT_FAILED, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from tests.conftest import run_cli as _run


def test_version(capsys, home: Path) -> None:
    code, out, _ = _run(capsys, "--version")
    assert code == EXIT_OK and out.startswith("furnace ") and out.split()[1][0].isdigit()


def test_usage_errors_exit_2(capsys, home: Path) -> None:
    assert _run(capsys, "no-such-command")[0] == EXIT_USAGE
    assert _run(capsys, "elixir", "list", "--no-such-option")[0] == EXIT_USAGE
    assert _run(capsys, "export", "x", "--format", "yaml")[0] == EXIT_USAGE


def test_user_errors_exit_1(capsys, home: Path) -> None:
    code, _, err = _run(capsys, "elixir", "show", "no-such-elixir")
    assert code == EXIT_FAILED and err.startswith("error: ") and err.count("\n") == 1


def test_internal_error_exits_3_with_a_debug_hint(capsys, home: Path, monkeypatch, tmp_path: Path) -> None:
    import furnace.interop.importers as importers

    def broken(*_args, **_kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(importers, "import_file", broken)
    monkeypatch.delenv("FURNACE_DEBUG", raising=False)
    path = tmp_path / "x.yaml"
    path.write_text("id: x\n")
    code, _, err = _run(capsys, "import", str(path))
    assert code == EXIT_INTERNAL
    assert "internal error: RuntimeError: a bug" in err and "FURNACE_DEBUG=1" in err


@pytest.mark.parametrize(
    "argv",
    [("elixir", "list"), ("elixir", "show", "go-reviewer"), ("lineage", "go-reviewer"), ("experiment", "list")],
)
def test_missing_home_is_an_error_for_read_commands(capsys, tmp_path: Path, monkeypatch, argv) -> None:
    missing = tmp_path / "typo"
    monkeypatch.setenv("FURNACE_HOME", str(missing))
    code, out, err = _run(capsys, *argv)
    assert code == EXIT_FAILED and "does not exist" in err and str(missing) in err
    assert not missing.exists()


def test_missing_home_is_created_and_announced_by_a_writer(capsys, tmp_path: Path, monkeypatch) -> None:
    missing = tmp_path / "new-home"
    monkeypatch.setenv("FURNACE_HOME", str(missing))
    code, _, err = _run(capsys, "import", str(resources.LIBRARY_DIR / "go-reviewer.yaml"))
    assert code == EXIT_OK
    assert f"created FURNACE_HOME {missing.resolve()}" in err
    assert (missing / "furnace.sqlite").exists()
    # now it exists, a read command works and says nothing about creating it
    code, out, err = _run(capsys, "elixir", "list")
    assert code == EXIT_OK and "go-reviewer" in out and "created" not in err


def test_home_that_is_a_file_is_an_error(capsys, tmp_path: Path, monkeypatch) -> None:
    file = tmp_path / "file"
    file.write_text("")
    monkeypatch.setenv("FURNACE_HOME", str(file))
    code, _, err = _run(capsys, "import", str(resources.LIBRARY_DIR / "go-reviewer.yaml"))
    assert code == EXIT_FAILED and "not a folder" in err
