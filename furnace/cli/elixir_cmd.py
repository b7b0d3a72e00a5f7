"""``furnace elixir ...`` and ``furnace import``: the elixir library from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from furnace import resources
from furnace.cli.context import emit, json_option
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import InputError
from furnace.runtime import Runtime
from furnace.storage.store import ElixirStore, ElixirSummary

if TYPE_CHECKING:
    from furnace.interop.importers.report import ImportReport

LIBRARY_DIR = resources.LIBRARY_DIR


def parse_ref(text: str) -> tuple[str, int | None]:
    """``ID`` or ``ID@VERSION`` → ``(id, version or None)``."""
    id, sep, version = text.strip().partition("@")
    if not id:
        raise InputError(f"expected ID or ID@VERSION, got {text!r}", field="id")
    if not sep:
        return id, None
    if not version.isdigit() or int(version) < 1:
        raise InputError(f"version must be a positive integer, got {version!r} in {text!r}", field="version")
    return id, int(version)


def load(store: ElixirStore, text: str) -> Elixir:
    """The elixir named by ``ID[@VERSION]``."""
    id, version = parse_ref(text)
    return store.get_elixir(id, version)


def summary(elixir: Elixir | ElixirSummary) -> dict[str, Any]:
    """The short form used by ``list`` and ``history``."""
    s = elixir if isinstance(elixir, ElixirSummary) else ElixirSummary.of(elixir)
    return {
        "id": s.id,
        "version": s.version,
        "name": s.name,
        "language": s.language,
        "expertise": list(s.expertise),
        "content_hash": s.content_hash,
        "created_at": s.created_at.isoformat() if s.created_at else None,
        "deleted": s.deleted,
    }


def full(elixir: Elixir) -> dict[str, Any]:
    """Every field, JSON-ready (``content_hash`` included)."""
    return elixir.model_dump(mode="json")


def show_text(elixir: Elixir) -> str:
    """An elixir as readable YAML, headed by its ref."""
    data = full(elixir)
    head = f"# {elixir.id}@{elixir.version}  {elixir.content_hash}" + ("  (deleted)" if elixir.withdrawn else "")
    return head + "\n" + yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100).rstrip()


def history_line(e: Elixir) -> str:
    """``v3  2026-01-01T00:00:00  <hash16>  (deleted)`` for `elixir history`."""
    created = e.created_at.isoformat(timespec="seconds") if e.created_at else "-"
    return f"v{e.version:<3} {created:<25} {e.content_hash[:16]}" + ("  (deleted)" if e.withdrawn else "")


def ref_line(ref: ElixirRef, status: str) -> str:
    """``id  v2  <hash>  status``."""
    return f"{ref.id}  v{ref.version}  {ref.content_hash}  {status}"


def report_lines(report: ImportReport) -> str:
    """Human output of an import report: one line per ref, skipped rows, then a summary."""
    lines = [
        ref_line(r, s)
        for s, refs in (("created", report.created), ("updated", report.updated), ("unchanged", report.unchanged))
        for r in refs
    ]
    lines += [f"skipped row {row}: {reason}" if row else f"skipped: {reason}" for row, reason in report.skipped]
    lines += [f"conflict: {message}" for _, message in report.conflicts]
    lines.append(report.summary())
    return "\n".join(lines)


def diff_payload(a: Elixir, b: Elixir) -> tuple[list[dict[str, Any]], str]:
    """The field changes from ``a`` to ``b`` as JSON data and as text."""
    from furnace.domain.diff import diff_elixirs, format_diff

    changes = diff_elixirs(a, b)
    data = [{"field": c.field, "kind": c.kind, "before": c.before, "after": c.after} for c in changes]
    return data, f"{a.id}@{a.version} → {b.id}@{b.version}\n" + format_diff(changes)


@click.group("elixir")
def elixir_group() -> None:
    """Add, list, show, diff, render and delete elixirs."""


@elixir_group.command("add")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@click.pass_obj
def add(ctx: Runtime, file: Path, as_json: bool) -> None:
    """Add the elixir(s) in a YAML or JSON FILE (all validated before any is saved)."""
    from furnace.interop.importers import import_elixirs, load_elixir_file

    elixirs = load_elixir_file(file)
    report = import_elixirs([(file.name, e) for e in elixirs], ctx.store, new_version=True)  # add = new versions
    rows = [
        {**r.model_dump(mode="json"), "status": s}
        for s, refs in (("created", report.created), ("updated", report.updated), ("unchanged", report.unchanged))
        for r in refs
    ]
    emit(
        rows if len(rows) > 1 else rows[0],
        as_json=as_json,
        human="\n".join(
            ref_line(ElixirRef(**{k: r[k] for k in ("id", "version", "content_hash")}), r["status"]) for r in rows
        ),
    )


@elixir_group.command("list")
@click.option("--query", "-q", default=None, help="Match name, id or expertise (case-insensitive).")
@click.option("--all", "include_deleted", is_flag=True, help="Include deleted elixirs.")
@click.option("--limit", type=click.IntRange(min=1), default=None)
@json_option
@click.pass_obj
def list_(ctx: Runtime, query: str | None, include_deleted: bool, limit: int | None, as_json: bool) -> None:
    """List the library (latest versions)."""
    elixirs = ctx.store.list_summaries(query=query, include_deleted=include_deleted, limit=limit)
    rows = [summary(e) for e in elixirs]
    width = max((len(e.id) for e in elixirs), default=0)
    human = "\n".join(
        f"{e.id:<{width}}  v{e.version:<3} {e.language}  {e.name}" + ("  (deleted)" if e.deleted else "")
        for e in elixirs
    ) or "no elixirs" + (f" match {query!r}" if query else "")
    emit(rows, as_json=as_json, human=human)


@elixir_group.command("show")
@click.argument("ref")
@json_option
@click.pass_obj
def show(ctx: Runtime, ref: str, as_json: bool) -> None:
    """Show every field of ID[@VERSION] (latest by default)."""
    elixir = load(ctx.store, ref)
    emit(full(elixir), as_json=as_json, human=show_text(elixir))


@elixir_group.command("history")
@click.argument("id")
@json_option
@click.pass_obj
def history(ctx: Runtime, id: str, as_json: bool) -> None:
    """Every version of ID, oldest first."""
    versions = ctx.store.history(id)
    human = "\n".join(history_line(e) for e in versions)
    emit([summary(e) for e in versions], as_json=as_json, human=human)


@elixir_group.command("diff")
@click.argument("a")
@click.argument("b")
@json_option
@click.pass_obj
def diff(ctx: Runtime, a: str, b: str, as_json: bool) -> None:
    """Field-level changes from ID@A to ID@B (any two versions or elixirs)."""
    left, right = load(ctx.store, a), load(ctx.store, b)
    data, human = diff_payload(left, right)
    emit(
        {"from": f"{left.id}@{left.version}", "to": f"{right.id}@{right.version}", "changes": data},
        as_json=as_json,
        human=human,
    )


@elixir_group.command("render")
@click.argument("ref")
@click.option(
    "--lang", type=click.Choice(["zh", "en"]), default=None, help="Template language (default: the elixir's)."
)
@json_option
@click.pass_obj
def render(ctx: Runtime, ref: str, lang: str | None, as_json: bool) -> None:
    """Print the system prompt of ID[@VERSION]."""
    from furnace.domain.render import render_prompt

    elixir = load(ctx.store, ref)
    prompt = render_prompt(elixir, lang)
    data = {"id": elixir.id, "version": elixir.version, "language": lang or elixir.language, "prompt": prompt}
    emit(data, as_json=as_json, human=prompt.rstrip("\n"))


@elixir_group.command("delete")
@click.argument("id")
@json_option
@click.pass_obj
def delete(ctx: Runtime, id: str, as_json: bool) -> None:
    """Soft-delete ID: every version stays readable, none can be fused. An ID deleted already is left as
    it is (exit 0, "already deleted", nothing withdrawn)."""
    versions = ctx.store.history(id)  # NotFound for an unknown id
    live = sum(1 for v in versions if not v.withdrawn)
    if live:
        ctx.store.delete_elixir(id)
        human = f"deleted {id} ({live} version(s) withdrawn)"
    else:
        human = f"{id} was already deleted ({len(versions)} version(s) withdrawn before); nothing changed"
    emit(
        {"id": id, "deleted": True, "versions": len(versions), "withdrawn": live, "already_deleted": not live},
        as_json=as_json,
        human=human,
    )


@click.command("import")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option(
    "--library", is_flag=True, help="Import every elixir file in furnace/resources/elixirs (the sample library)."
)
@click.option(
    "--new-version",
    is_flag=True,
    help="An id that exists with different content gets it as its next version (default: a conflict, left as is).",
)
@json_option
@click.pass_obj
def import_(ctx: Runtime, file: Path | None, library: bool, new_version: bool, as_json: bool) -> None:
    """Import FILE (.yaml/.yml/.json elixirs, the awesome-chatgpt-prompts .csv, or a character card .json/.png).

    FILE may be a folder: every elixir file and character card in it (.yaml/.yml/.json/.png;
    a .csv corpus is imported on its own), all validated before any is written.
    Ids are owned: agent ids (agt-…) are refused, and an existing id with different
    content is reported as a conflict and left as it is unless --new-version.
    """
    from furnace.interop.importers import import_file, import_library

    if library and file is None:
        report = import_library(LIBRARY_DIR, ctx.store, new_version=new_version)
    elif file is not None and not library and file.is_dir():
        report = import_library(file, ctx.store, new_version=new_version)
    elif file is not None and not library:
        report = import_file(file, ctx.store, new_version=new_version)
    else:
        raise InputError("give either FILE or --library")
    emit(report.as_dict(), as_json=as_json, human=report_lines(report))


def register(cli: click.Group) -> None:
    """Add ``elixir`` and ``import`` to the ``furnace`` command."""
    cli.add_command(elixir_group)
    cli.add_command(import_)
