"""Bad input is a user error (exit 1, one line on stderr), never an internal error or a dump: bad
``FURNACE_*`` values, an empty home, over-long paths, damaged or foreign database files, other OS
errors; and a command that only reads (or changes existing records) never creates a missing home."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace import resources
from furnace.cli import EXIT_FAILED, EXIT_OK, cli
from furnace.cli.context import READ_ONLY_COMMANDS
from furnace.domain.errors import InputError
from tests.conftest import run_cli as _run
from tests.conftest import seed_home

GO = str(resources.LIBRARY_DIR / "go-reviewer.yaml")


def _one_line_user_error(code: int, err: str) -> str:
    assert code == EXIT_FAILED, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err and "pydantic" not in err
    return err


# --- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "accepts"),
    [
        ("FURNACE_TIMEOUT_S", "abc", "a number"),
        ("FURNACE_DASK_WORKERS", "0", "a whole number >= 1"),
        ("FURNACE_CACHE_TTL_DAYS", "-3", "a number > 0"),
        ("FURNACE_APP_PORT", "85o1", "a whole number"),
    ],
)
def test_a_bad_setting_is_a_user_error_naming_the_variable_and_what_it_accepts(
    capsys, home: Path, monkeypatch, variable: str, value: str, accepts: str
) -> None:
    monkeypatch.setenv(variable, value)
    err = _one_line_user_error(*_run(capsys, "elixir", "list")[::2])
    assert f"{variable}={value!r}" in err and f"it must be {accepts}" in err
    assert "validation error" not in err and "errors.pydantic.dev" not in err


def test_every_bad_setting_is_named_in_one_error(monkeypatch, home: Path) -> None:
    from furnace.settings import FurnaceSettings

    monkeypatch.setenv("FURNACE_MAX_RETRIES", "two")
    monkeypatch.setenv("FURNACE_SIMILARITY_THRESHOLD", "high")
    with pytest.raises(InputError) as raised:
        FurnaceSettings()
    assert {field for field, _ in raised.value.problems} == {"FURNACE_MAX_RETRIES", "FURNACE_SIMILARITY_THRESHOLD"}
    assert "\n" not in str(raised.value)


def test_an_empty_home_is_a_user_error_and_creates_nothing(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FURNACE_HOME", "")
    err = _one_line_user_error(*_run(capsys, "elixir", "list")[::2])
    assert "FURNACE_HOME is empty" in err
    monkeypatch.delenv("FURNACE_HOME")
    err = _one_line_user_error(*_run(capsys, "--home", " ", "import", GO)[::2])
    assert "--home is empty" in err
    assert list(tmp_path.iterdir()) == []  # no furnace.sqlite in the current folder, no ./data


# --- paths and files ----------------------------------------------------------------------------


def test_an_over_long_path_is_a_user_error_with_a_short_line(capsys, home: Path, tmp_path: Path) -> None:
    long = tmp_path / ("a" * 5000 + ".yaml")
    err = _one_line_user_error(*_run(capsys, "import", str(long))[::2])
    assert "File name too long" in err and "5," in err and len(err) < 300


def test_an_os_error_on_the_users_output_path_is_a_user_error(capsys, home: Path, tmp_path: Path) -> None:
    seed_home(home)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "card.json"  # a folder that is a file
    err = _one_line_user_error(*_run(capsys, "export", "go-reviewer", "--format", "card-v2", "--out", str(out))[::2])
    assert str(blocker) in err


def test_malformed_experiment_yaml_names_the_line_like_the_importer(capsys, home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n", encoding="utf-8")
    err = _one_line_user_error(*_run(capsys, "experiment", "run", str(bad))[::2])
    assert err.startswith("error: bad.yaml: line 2, column ") and "expected ',' or ']'" in err, err
    imported = _one_line_user_error(*_run(capsys, "import", str(bad))[::2])
    assert imported.startswith("error: bad.yaml: line 2: "), imported


def _seeded_then_truncated(home: Path, keep: float) -> Path:
    seed_home(home)
    db = home / "furnace.sqlite"
    size = db.stat().st_size
    with db.open("r+b") as file:
        file.truncate(int(size * keep))
    return db


@pytest.mark.parametrize("keep", [0.05, 0.2], ids=["twentieth", "fifth"])
@pytest.mark.parametrize("argv", [("elixir", "list"), ("import", GO)], ids=["list", "import"])
def test_a_truncated_database_is_a_user_error(capsys, home: Path, keep: float, argv: tuple[str, ...]) -> None:
    _seeded_then_truncated(home, keep)
    err = _one_line_user_error(*_run(capsys, *argv)[::2])
    assert "furnace.sqlite" in err and "damaged" in err


def _duckdb_file(path: Path) -> bytes:
    """The bytes of another engine's database (a DuckDB file, as furnace homes once held)."""
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE elixirs (id TEXT)")
    con.close()
    content = path.read_bytes()
    path.unlink()
    return content


@pytest.mark.parametrize("content", ["text", "bin", "duckdb"])
def test_a_foreign_database_file_is_a_user_error(capsys, home: Path, tmp_path: Path, content: str) -> None:
    foreign = {
        "text": lambda: b"id: not a database\n",
        "bin": lambda: bytes(range(256)) * 64,
        "duckdb": lambda: _duckdb_file(tmp_path / "other.duckdb"),
    }[content]()
    (home / "furnace.sqlite").write_bytes(foreign)
    err = _one_line_user_error(*_run(capsys, "elixir", "list")[::2])
    assert "furnace.sqlite" in err and "not a furnace database" in err
    assert (home / "furnace.sqlite").read_bytes() == foreign  # the user's file is left as it was


def test_a_folder_in_the_databases_place_is_a_user_error(capsys, home: Path) -> None:
    (home / "furnace.sqlite").mkdir()
    err = _one_line_user_error(*_run(capsys, "elixir", "list")[::2])
    assert str(home / "furnace.sqlite") in err and "a folder in its place" in err


def test_an_empty_database_file_becomes_a_new_store(capsys, home: Path) -> None:
    """SQLite takes an empty file for an empty database (``touch furnace.sqlite``): furnace makes its store in it."""
    (home / "furnace.sqlite").write_bytes(b"")
    assert _run(capsys, "import", GO)[0] == EXIT_OK
    code, out, err = _run(capsys, "elixir", "list")
    assert code == EXIT_OK and "go-reviewer" in out, err


# --- a missing home -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("snapshot",),
        ("agent", "load", "prompts:/furnace-x@champion"),
        ("agent", "answer", "agt-x", "hello"),
        ("agent", "alias", "furnace-x", "1", "champion"),
        ("agent", "promote", "agt-x"),
        ("elixir", "delete", "go-reviewer"),
        ("cache", "prune"),
        ("content", "rollback", "c-x", "1"),
        ("arena", "cancel", "run-x"),
    ],
    ids=lambda argv: "-".join(argv[:2]),
)
def test_commands_on_existing_data_never_create_a_missing_home(capsys, tmp_path: Path, monkeypatch, argv) -> None:
    missing = tmp_path / "typo"
    monkeypatch.setenv("FURNACE_HOME", str(missing))
    code, out, err = _run(capsys, *argv)
    assert code == EXIT_FAILED and "does not exist" in err, err
    assert not missing.exists() and out == ""


def test_the_read_only_commands_are_commands() -> None:
    import click

    def paths(group: click.Group, prefix: str = "") -> set[str]:
        found: set[str] = set()
        for name, command in group.commands.items():
            path = f"{prefix}{name}"
            found |= paths(command, f"{path} ") if isinstance(command, click.Group) else {path}
        return found

    assert paths(cli) >= READ_ONLY_COMMANDS, READ_ONLY_COMMANDS - paths(cli)


def test_a_writer_still_creates_the_home(capsys, tmp_path: Path, monkeypatch) -> None:
    missing = tmp_path / "new"
    monkeypatch.setenv("FURNACE_HOME", str(missing))
    code, _, err = _run(capsys, "import", GO)
    assert code == EXIT_OK and "created FURNACE_HOME" in err and (missing / "furnace.sqlite").exists()
