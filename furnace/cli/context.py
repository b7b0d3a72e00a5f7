"""What every CLI command shares besides the :class:`~furnace.runtime.Runtime` (``ctx.obj``): the
runtime built for one invocation, the data-folder rule, and output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from furnace.domain.errors import InputError
from furnace.runtime import Runtime

# Commands that only read, or that change records which must already exist: a FURNACE_HOME that
# does not exist is an error for them (a mistyped path must not look like an empty library, nor be
# left behind as one). Every other command creates it.
READ_ONLY_COMMANDS = frozenset(
    {
        "snapshot",
        "agent load",
        "agent answer",
        "agent register",
        "agent alias",
        "agent promote",
        "elixir delete",
        "content rollback",
        "revise",
        "reflect",
        "arena say",
        "arena resume",
        "arena cancel",
        "cache prune",
        "elixir list",
        "elixir show",
        "elixir history",
        "elixir diff",
        "elixir render",
        "agent show",
        "lineage",
        "experiment list",
        "experiment show",
        "content list",
        "content show",
        "content history",
        "content diff",
        "prefs",
        "arena list",
        "arena show",
        "export",
        "ask",
        "cache stats",
        "pick",
    }
)


def _command_path() -> str:
    """The running command without the program name (``"elixir list"``), or "" outside click."""
    ctx = click.get_current_context(silent=True)
    return ctx.command_path.partition(" ")[2] if ctx is not None else ""


def ensure_home(home: Path, *, writes: bool | None = None) -> Path:
    """The data folder; a missing one is an error for read commands, created (and announced) for writers.

    ``writes`` None: decided by the running command (:data:`READ_ONLY_COMMANDS`).
    """
    if home.is_dir():
        return home
    if home.exists():
        raise InputError(f"FURNACE_HOME {home} is not a folder", field="home")
    if writes is None:
        writes = _command_path() not in READ_ONLY_COMMANDS
    if not writes:
        raise InputError(
            f"FURNACE_HOME {home} does not exist (mistyped? a command that writes creates it)", field="home"
        )
    home.mkdir(parents=True, exist_ok=True)
    click.echo(f"created FURNACE_HOME {home.resolve()}", err=True)
    return home


def cli_runtime(*, home: str | None = None) -> Runtime:
    """The runtime of one ``furnace`` invocation: settings from the environment (``--home`` wins); the
    live store opens only after :func:`ensure_home` agreed."""
    if home is not None and not home.strip():
        raise InputError("--home is empty: give the data folder, or leave the option out", field="home")
    runtime = Runtime.from_env(home=home)
    runtime.before_open = ensure_home
    return runtime


def emit(data: Any, *, as_json: bool, human: str | None = None) -> None:
    """Print ``data`` as JSON (``--json``) or ``human`` text."""
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        click.echo(human if human is not None else json.dumps(data, ensure_ascii=False, indent=2, default=str))


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
