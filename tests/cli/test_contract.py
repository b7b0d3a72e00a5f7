"""The CLI contract: exit codes 0/1/3 (a usage error is one line, exit 1), ``--version``, and a
FURNACE_HOME that is never silently invented."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace import resources
from furnace.cli import EXIT_FAILED, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from tests.conftest import run_cli as _run


def test_version(capsys, home: Path) -> None:
    code, out, _ = _run(capsys, "--version")
    assert code == EXIT_OK and out.startswith("furnace ") and out.split()[1][0].isdigit()


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (("no-such-command",), "error: No such command 'no-such-command' (furnace --help)"),
        (
            ("elixir", "list", "--no-such-option"),
            "error: No such option '--no-such-option' (furnace elixir list --help)",
        ),
        (
            ("elixir", "render", "go-reviewer", "--lang", "fr"),
            "error: Invalid value for '--lang': 'fr' is not one of 'zh', 'en' (furnace elixir render --help)",
        ),
        (("experiment", "show"), "error: Missing argument 'EXPERIMENT_ID' (furnace experiment show --help)"),
        (("export", "x", "--format", "yaml"), "error: Invalid value for '--format': 'yaml' is not one of"),
        (("elixir", "render", "go-reviewer", "--lang"), "error: Option '--lang' requires an argument"),
    ],
)
def test_usage_errors_are_one_line_on_stderr_exit_1(capsys, home: Path, argv: tuple[str, ...], line: str) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == EXIT_USAGE == EXIT_FAILED
    assert err.startswith(line) and err.count("\n") == 1, err
    assert "Usage:" not in err and "Try '" not in err and out == ""


def test_a_missing_experiment_file_is_one_line_exit_1(capsys, home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    code, _, err = _run(capsys, "experiment", "run", str(missing))
    assert code == EXIT_FAILED and err.count("\n") == 1, err
    assert err.startswith("error: Invalid value for 'FILE'") and str(missing) in err and "does not exist" in err


def test_help_still_prints_the_full_help_and_exits_0(capsys, home: Path) -> None:
    code, out, err = _run(capsys, "experiment", "show", "--help")
    assert code == EXIT_OK and out.startswith("Usage: furnace experiment show [OPTIONS] EXPERIMENT_ID") and err == ""
    code, out, _ = _run(capsys, "--help")
    assert code == EXIT_OK and "Commands:" in out and "experiment" in out


def test_a_group_without_a_command_prints_its_help_and_exits_1(capsys, home: Path) -> None:
    code, _, err = _run(capsys, "experiment")
    assert code == EXIT_FAILED and err.startswith("Usage: furnace experiment") and "Commands:" in err


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
