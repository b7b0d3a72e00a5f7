"""A Prefect server database already migrated, made once per test run and copied for every server a test starts.

A Prefect server migrates a fresh database with Alembic and registers Prefect's block types before it answers
(~5 s of its ~10 s of CPU to start); started on a copy of a database at Alembic's head it finds nothing to
migrate. The run's template lives in the run's temp directory, which the run's xdist workers share; a file lock
makes one of them make it while the others wait. It never outlives the run: a stale template cannot survive a
Prefect upgrade. The first server to need it makes it: the session's Prefect harness migrates its own database
and keeps a snapshot (:func:`server_database`); a test that comes first builds one (:func:`migrated_template`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

# What a fresh server does before it answers: Alembic to head, then Prefect's block types.
_BUILD = """
import asyncio
from prefect.server.database import provide_database_interface
from prefect.server.models.block_registration import run_block_auto_registration

async def build():
    db = provide_database_interface()
    await db.create_db()
    async with await db.session() as session:
        await run_block_auto_registration(session=session)
        await session.commit()
    await (await db.engine()).dispose()

asyncio.run(build())
"""


def _run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temp directory of this test run: shared by its xdist workers (each has its own basetemp under it),
    the basetemp itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _locked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IO[str]]:
    """The run's template path, and the template lock, held (released when the returned file closes)."""
    shared = _run_dir(tmp_path_factory)
    lock = (shared / "prefect-server-template.lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here while one makes the template
    return shared / "prefect-server-template.db", lock


def _save(database: Path, template: Path) -> None:
    """A consistent copy of ``database`` (a server may be using it) as the template: one file, no WAL beside it."""
    making = template.with_suffix(".making")
    making.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(database)) as src, contextlib.closing(sqlite3.connect(making)) as dst:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    making.rename(template)


def place_copy(template: Path, database: Path) -> Path:
    """A copy of ``template`` at ``database`` (its directory created), for one server to start on."""
    database.parent.mkdir(parents=True, exist_ok=True)
    database.write_bytes(template.read_bytes())
    return database


def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's migrated Prefect server database; built here (a Prefect process, ~9 s of CPU) if none yet."""
    template, lock = _locked(tmp_path_factory)
    with lock:
        if not template.exists():
            building = template.with_suffix(".building")
            building.unlink(missing_ok=True)
            env = {**os.environ, "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{building}"}
            subprocess.run([sys.executable, "-c", _BUILD], env=env, check=True)
            _save(building, template)
            building.unlink()
    return template


@contextlib.contextmanager
def server_database(tmp_path_factory: pytest.TempPathFactory, database: Path) -> Iterator[Callable[[], None]]:
    """For a server started in the block on ``database``: a copy of the run's template placed there; or, when the
    run has none yet, no file (the server migrates its own) and the template lock held until the yielded
    ``migrated`` is called, once the server is up: it keeps a snapshot of ``database`` as the template."""
    template, lock = _locked(tmp_path_factory)
    with lock:
        if template.exists():
            lock.close()  # others may copy it meanwhile
            place_copy(template, database)
            yield lambda: None
            return

        def migrated() -> None:
            if not lock.closed:
                _save(database, template)
                lock.close()

        yield migrated
