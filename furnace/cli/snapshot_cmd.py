"""``furnace snapshot``: refresh the Parquet snapshots that analysis reads (docs/store.md)."""

from __future__ import annotations

import click

from furnace.cli.context import emit, json_option
from furnace.runtime import Runtime


@click.command("snapshot")
@json_option
@click.pass_obj
def snapshot_cmd(obj: Runtime, as_json: bool) -> None:
    """Copy every table to a fresh Parquet snapshot (read by furnace.analysis.connect())."""
    from furnace.storage.duckdb import snapshot

    folder = snapshot.refresh(obj.sql)
    manifest = snapshot.manifest(folder)
    rows = sum(manifest["tables"].values())
    emit(
        {"snapshot": str(folder), **manifest},
        as_json=as_json,
        human=f"snapshot {folder.name}: {len(manifest['tables'])} tables, {rows:,} rows in {folder}",
    )


def register(cli: click.Group) -> None:
    cli.add_command(snapshot_cmd)
