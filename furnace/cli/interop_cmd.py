"""``furnace export``: elixirs and agents as Character Cards (V2/V3, JSON/PNG) and skills."""

from __future__ import annotations

from pathlib import Path

import click

from furnace.cli.context import emit, json_option
from furnace.domain.agent import AGENT_PREFIX, Agent
from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError, NotFound
from furnace.runtime import Runtime
from furnace.storage.store import ElixirStore

FORMATS = ("card-v2", "card-v3", "card-png", "skill", "skill-zip")


def resolve_target(store: ElixirStore, text: str) -> Elixir | Agent:
    """``ID[@VERSION]`` of an elixir, or an agent id (``agt-…``; other ids fall back to agents)."""
    from furnace.cli.elixir_cmd import parse_ref

    id, version = parse_ref(text)
    if id.startswith(AGENT_PREFIX) and version is None:
        try:
            return store.get_agent(id)
        except NotFound:
            pass
    try:
        return store.get_elixir(id, version)
    except NotFound:
        if version is not None:
            raise
        try:
            return store.get_agent(id)
        except NotFound:
            raise NotFound(f"no elixir or agent {id!r}", field="id") from None


def _default_out(fmt: str, slug: str) -> Path:
    return Path(
        {
            "card-v2": f"{slug}.card-v2.json",
            "card-v3": f"{slug}.card-v3.json",
            "card-png": f"{slug}.card.png",
            "skill": ".",
            "skill-zip": f"{slug}.skill.zip",
        }[fmt]
    )


def export_target(target: Elixir | Agent, fmt: str, out: Path | None) -> tuple[Path | None, int, bytes | None]:
    """Write ``target`` in ``fmt``; returns (path written or None for stdout, size, stdout bytes)."""
    from furnace.interop.cards import export_card_json, export_card_png
    from furnace.interop.skill import skill_slug, skill_zip_bytes, write_skill_folder

    slug = skill_slug(target.id)
    if fmt == "skill":
        folder = write_skill_folder(target, out or _default_out(fmt, slug))
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        return folder, size, None
    if fmt == "card-png":
        payload = export_card_png(target)
    elif fmt == "skill-zip":
        payload = skill_zip_bytes(target)
    else:
        payload = export_card_json(target, "v2" if fmt == "card-v2" else "v3")
    if out is not None and str(out) == "-":
        if fmt in ("card-png", "skill-zip"):
            raise InputError(f"--out - (stdout) is only for JSON cards, not {fmt}", field="out")
        return None, len(payload), payload
    path = out or _default_out(fmt, slug)
    if path.is_dir():
        path = path / _default_out(fmt, slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return path, len(payload), None


@click.command("export")
@click.argument("ref")
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True, help="Output format.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="File (cards, skill-zip; '-' = stdout for JSON cards) or parent folder (skill).",
)
@json_option
@click.pass_obj
def export(ctx: Runtime, ref: str, fmt: str, out: Path | None, as_json: bool) -> None:
    """Export REF (an elixir ID[@VERSION] or an agent id) as a character card or a skill."""
    target = resolve_target(ctx.store, ref)
    path, size, stdout = export_target(target, fmt, out)
    if stdout is not None:
        click.echo(stdout.decode("utf-8"), nl=False)
        return
    elixir = target.elixir if isinstance(target, Agent) else target
    kind = "agent" if isinstance(target, Agent) else "elixir"
    info = {
        "kind": kind,
        "id": target.id,
        "version": elixir.version,
        "content_hash": elixir.content_hash,
        "format": fmt,
        "path": str(path),
        "bytes": size,
    }
    emit(info, as_json=as_json, human=f"exported {kind} {target.id} v{elixir.version} as {fmt} → {path} ({size} bytes)")


def register(cli: click.Group) -> None:
    """Add ``export`` to the ``furnace`` command."""
    cli.add_command(export)
