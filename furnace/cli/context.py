"""What every CLI command shares: settings, lazily built adapters, output."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from furnace.domain.errors import InputError
from furnace.settings import FurnaceSettings

_ROLES = {"experiment": "the experiment writer", "demo": "the demo", "arena": "the arena", "sweep": "the sweep"}

# Commands that only read: a FURNACE_HOME that does not exist is an error for them (a
# mistyped path must not look like an empty library). Every other command creates it.
READ_ONLY_COMMANDS = frozenset(
    {
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
    }
)


def _command_path() -> str:
    """The running command without the program name (``"elixir list"``), or "" outside click."""
    ctx = click.get_current_context(silent=True)
    return ctx.command_path.partition(" ")[2] if ctx is not None else ""


@dataclass
class CliContext:
    """Built once per invocation; adapters are created on first use."""

    settings: FurnaceSettings
    _cache: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, *, home: str | None = None, command: str | None = None) -> CliContext:
        settings = FurnaceSettings()
        if home:
            settings = settings.model_copy(update={"home": Path(home)})
        if command:
            from furnace.storage.duckdb.db import set_role

            # named in the waiting message of another process ("waiting for the experiment writer…")
            set_role(_ROLES.get(command, f"`furnace {command}`"))
        return cls(settings=settings)

    def close(self) -> None:
        """Release the DuckDB file (if this command opened it)."""
        db = self._cache.get("db")
        if db is not None:
            from furnace.storage.duckdb import snapshot

            snapshot.wait_pending()  # the command's last snapshot request is served before it ends
            db.close()

    def ensure_home(self, *, writes: bool | None = None) -> Path:
        """The data folder; a missing one is an error for read commands, created (and announced) for writers.

        ``writes`` None: decided by the running command (:data:`READ_ONLY_COMMANDS`).
        """
        home = self.settings.home
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

    def _get(self, key: str, build: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = build(self.settings)
        return self._cache[key]

    @property
    def db(self) -> Any:
        from furnace.adapters.factory import build_db

        if "db" not in self._cache:
            self.ensure_home()
        return self._get("db", build_db)

    @property
    def store(self) -> Any:
        from furnace.adapters.factory import build_store

        return self._get("store", lambda s: build_store(s, db=self.db))

    @property
    def llm(self) -> Any:
        from furnace.adapters.factory import build_llm

        return self._get("llm", lambda s: build_llm(s, db=self.db))

    @property
    def embedder(self) -> Any:
        from furnace.adapters.factory import build_embedder

        return self._get("embedder", lambda s: build_embedder(s, db=self.db))


def emit(data: Any, *, as_json: bool, human: str | None = None) -> None:
    """Print ``data`` as JSON (``--json``) or ``human`` text."""
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        click.echo(human if human is not None else json.dumps(data, ensure_ascii=False, indent=2, default=str))


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
