"""What every CLI command shares: settings, lazily built adapters, output."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from furnace.settings import FurnaceSettings

_ROLES = {"experiment": "the experiment writer", "demo": "the demo", "arena": "the arena", "sweep": "the sweep"}


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

    def _get(self, key: str, build: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = build(self.settings)
        return self._cache[key]

    @property
    def db(self) -> Any:
        from furnace.adapters.factory import build_db

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
