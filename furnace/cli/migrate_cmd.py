"""``furnace migrate``: move a home's ``furnace.duckdb`` into the relational store (docs/store.md)."""

from __future__ import annotations

import click

from furnace.cli.context import emit, json_option
from furnace.runtime import Runtime


@click.command("migrate")
@json_option
@click.pass_obj
def migrate_cmd(obj: Runtime, as_json: bool) -> None:
    """Copy furnace.duckdb into the relational store (FURNACE_DATABASE_URL, else furnace.sqlite in the home),
    then check every table's row count and every seal. The DuckDB file is kept."""
    moved, target = obj.migrate_home()
    rows = sum(moved.rows.values())
    checked = ", ".join(f"{n:,} {kind}" for kind, n in moved.verified.items())
    emit(
        {"target": target, "rows": moved.rows, "verified": moved.verified, "kept": str(obj.settings.db_path)},
        as_json=as_json,
        human=f"copied {rows:,} rows into {target}; seals verified: {checked}\n"
        f"{obj.settings.db_path} is kept: delete it when you no longer need it",
    )


def register(cli: click.Group) -> None:
    cli.add_command(migrate_cmd)
