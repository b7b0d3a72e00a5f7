"""Importing elixirs from files into a store.

- :func:`load_elixir_file` — a YAML/JSON elixir file (one elixir or a list).
- :func:`import_csv` — the awesome-chatgpt-prompts CSV corpus, read into elixirs.
- :func:`read_file` — dispatch on the file's type through :data:`READERS`
  (other formats, e.g. character cards, register themselves with :func:`register_reader`).
- :func:`import_file` — read and validate everything first, then write.

Elixir files are all-or-nothing: one invalid elixir and nothing is written.
A deleted (withdrawn) id is not invalid: it is skipped and reported, the rest imported.
The CSV corpus imports its valid rows and reports the rest as ``(row, reason)``.
Importing the same file twice creates nothing new (the store's identical-content no-op).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from furnace.domain.agent import AGENT_PREFIX
from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError, NotFound, short_path
from furnace.interop.importers.corpus import read_corpus
from furnace.interop.importers.files import JSON_SUFFIXES, YAML_SUFFIXES, load_elixir_file, parse_document, read_text
from furnace.interop.importers.report import ImportReport, ReadResult
from furnace.storage.store import ElixirStore

__all__ = [
    "READERS",
    "ImportReport",
    "ReadResult",
    "Reader",
    "import_csv",
    "import_elixirs",
    "import_file",
    "import_library",
    "load_elixir_file",
    "read_file",
    "register_reader",
]


@dataclass(frozen=True)
class Reader:
    """A file format: ``detect(path)`` says whether it applies, ``read(path)`` parses it."""

    name: str
    detect: Callable[[Path], bool]
    read: Callable[[Path], ReadResult]


def import_csv(path: str | Path) -> ReadResult:
    """Read the awesome-chatgpt-prompts CSV: TEXT rows as elixirs, the rest as ``(row, reason)``."""
    path = Path(path)
    return read_corpus(read_text(path), name=path.name)


def _read_elixir_file(path: Path) -> ReadResult:
    fmt = "json" if path.suffix.lower() in JSON_SUFFIXES else "yaml"
    return ReadResult(elixirs=parse_document(path.name, read_text(path), fmt=fmt))


def _suffix(*suffixes: str) -> Callable[[Path], bool]:
    return lambda path: path.suffix.lower() in suffixes


READERS: list[Reader] = [
    Reader("csv corpus", _suffix(".csv"), import_csv),
    Reader("elixir file", _suffix(*YAML_SUFFIXES, *JSON_SUFFIXES), _read_elixir_file),
]


def register_reader(reader: Reader, *, first: bool = True) -> None:
    """Add a file format; ``first`` puts it ahead of the built-in ones (for content sniffing)."""
    READERS[:] = [r for r in READERS if r.name != reader.name]
    if first:
        READERS.insert(0, reader)
    else:
        READERS.append(reader)


def _is_card(path: Path) -> bool:
    from furnace.interop.cards import is_card_file  # [interop]: Character Card V2/V3 JSON and PNG

    return is_card_file(path)


def _read_card(path: Path) -> ReadResult:
    from furnace.interop.cards import import_card_file

    return ReadResult(elixirs=[("card", import_card_file(path))])


register_reader(Reader("character card (.json/.png)", _is_card, _read_card))


def read_file(path: str | Path) -> ReadResult:
    """Read and validate every elixir in ``path`` with the first reader that accepts it."""
    path = Path(path)
    try:
        if not path.is_file():
            raise InputError(f"{short_path(path)}: no such file" if not path.exists() else f"{path}: not a file")
        for reader in READERS:
            if reader.detect(path):
                return reader.read(path)
    except OSError as err:  # a name too long, a folder not readable, a read that failed
        raise InputError.from_os_error(err, what="cannot read") from None
    known = ", ".join(r.name for r in READERS)
    raise InputError(f"{path.name}: unknown file type {path.suffix or '(none)'!r} (can import: {known})")


def _latest(store: ElixirStore, ids: list[str]) -> dict[str, Elixir]:
    """The latest stored version of each of ``ids`` that exists (deleted ones included)."""
    if len(ids) > 20:  # one query instead of one per id
        wanted = set(ids)
        return {e.id: e for e in store.list_elixirs(origin=None, include_deleted=True) if e.id in wanted}
    found = {}
    for id in ids:
        with contextlib.suppress(NotFound):
            found[id] = store.get_elixir(id)
    return found


def import_elixirs(
    elixirs: list[tuple[str, Elixir]],
    store: ElixirStore,
    *,
    skipped: list[tuple[int, str]] | None = None,
    row_wise: bool = False,
    keep_existing: bool = False,
    new_version: bool = False,
    skip_withdrawn: bool = False,
    source: str = "",
) -> ImportReport:
    """Save already-validated elixirs, reporting what was created, updated, unchanged or in conflict.

    Ids are owned: an ``agt-…`` id (an agent's, made by fusion) is refused; an id that was
    deleted is refused. Both are refused before anything is written, or, when ``row_wise``,
    their rows are skipped with the reason. With ``skip_withdrawn`` (importing files) a
    deleted id is skipped with the reason too and the rest imported: it was withdrawn on
    purpose, so it never comes back, but it does not abort the import either. An id that
    exists with different content is a **conflict**: left as it is and reported in
    ``conflicts`` (counted, with a message), unless ``new_version`` adds the content as its
    next version deliberately. With
    ``keep_existing`` (seeding a library) existing ids are reported as unchanged instead.
    """
    report = ImportReport(skipped=list(skipped or []))
    latest = _latest(store, [e.id for _, e in elixirs if not e.id.startswith(AGENT_PREFIX)])

    def label(where: str) -> str:  # "ada.yaml", "lib.yaml: item 2", "row 7"
        return ": ".join(part for part in (source, "" if where == "file" else where) if part) or where

    todo = []
    for where, elixir in elixirs:
        current = latest.get(elixir.id)
        if elixir.id.startswith(AGENT_PREFIX):
            problem = (
                f"id {elixir.id!r} belongs to an agent (agents are made by fusion, not imported); give it another id"
            )
        elif current is not None and current.withdrawn and not keep_existing:
            problem = f"elixir {elixir.id!r} was deleted; give it a new id"
        else:
            todo.append((where, elixir))
            continue
        row = int(where.removeprefix("row ")) if where.startswith("row ") else 0
        if row_wise:
            report.skipped.append((row, problem.partition(";")[0]))
        elif skip_withdrawn and current is not None and current.withdrawn:
            report.skipped.append((row, f"{label(where)}: {problem.partition(';')[0]}"))
        else:
            raise InputError(f"{label(where)}: {problem}", field="id")
    report.skipped.sort()
    to_write = []
    for where, elixir in todo:
        current = latest.get(elixir.id)
        if current is not None and (keep_existing or current.content_hash == elixir.content_hash):
            report.unchanged.append(current.ref)  # the store's no-op, without a write
        elif current is not None and not new_version:
            report.conflicts.append(
                (
                    current.ref,
                    f"{label(where)}: elixir {elixir.id!r} already exists (v{current.version}) with different content; "
                    "left as it is (use --new-version to add this as its next version)",
                )
            )
        else:
            to_write.append(elixir)
    for ref in store.save_elixirs(to_write):  # one transaction: all or nothing
        (report.created if latest.get(ref.id) is None else report.updated).append(ref)
    return report


def import_file(path: str | Path, store: ElixirStore, *, new_version: bool = False) -> ImportReport:
    """Import ``path`` into ``store``: validate everything first, then write.

    Elixir files are all-or-nothing; row-wise files (the CSV corpus) import the
    valid rows and report the others in ``ImportReport.skipped``. A deleted (withdrawn)
    id is skipped and reported there too, not imported again. Existing ids with
    different content are conflicts unless ``new_version`` (see :func:`import_elixirs`).
    """
    result = read_file(path)
    return import_elixirs(
        result.elixirs,
        store,
        skipped=result.skipped,
        row_wise=result.row_wise,
        new_version=new_version,
        skip_withdrawn=True,
        source=Path(path).name,
    )


def import_library(
    folder: str | Path, store: ElixirStore, *, keep_existing: bool = False, new_version: bool = False
) -> ImportReport:
    """Import every elixir file (``*.yaml``/``*.yml``/``*.json``) and character card (``.json``/``.png``) in
    ``folder`` (sorted; other files are left alone: a CSV corpus is imported on its own), all validated first.

    A user's elixir with the same id and different content is never replaced: it is a
    conflict (``new_version`` adds the library's as the next version; ``keep_existing``
    reports it as unchanged), see :func:`import_elixirs`. A library elixir the user deleted
    is skipped and reported in ``skipped``, never imported again.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder")
    taken = (*YAML_SUFFIXES, *JSON_SUFFIXES, ".png")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in taken and p.is_file())
    if not files:
        raise InputError(f"{folder}: holds no elixir file or character card (.yaml, .yml, .json, .png)")
    elixirs: list[tuple[str, Elixir]] = []
    seen: dict[str, str] = {}
    for path in files:
        for where, elixir in read_file(path).elixirs:
            label = f"{path.name}" + ("" if where in ("file", "card") else f" {where}")
            if elixir.id in seen:
                raise InputError(f"{label}: id {elixir.id!r} already used in {seen[elixir.id]}", field="id")
            seen[elixir.id] = label
            elixirs.append((label, elixir))
    return import_elixirs(elixirs, store, keep_existing=keep_existing, new_version=new_version, skip_withdrawn=True)
