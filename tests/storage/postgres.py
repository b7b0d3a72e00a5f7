"""A throwaway PostgreSQL server for the contract suite (``make test`` installs Debian's ``postgresql``).

``TEST_POSTGRES_URL`` (a ``postgresql+psycopg://`` URL of a database the tests may empty) is used when
set (the ``postgres_url`` fixture, ``tests/conftest.py``). Otherwise, when ``initdb`` and ``pg_ctl`` are
found (on PATH or under ``/usr/lib/postgresql/*/bin``) and psycopg is installed, a cluster is made with ``initdb`` in a
temporary folder, run as an unprivileged user (``nobody`` through ``runuser`` when the tests run as
root), listening only on a unix socket in that folder, and stopped (folder removed) at the end.
Anything missing: the PostgreSQL tests skip, saying what is missing.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PORT = 54329  # names the socket file only (no TCP listener)


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def unavailable() -> str | None:
    """Why no throwaway server can be started here (None when one can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if _binary("initdb") is None or _binary("pg_ctl") is None:
        return "PostgreSQL's initdb/pg_ctl not found (make test installs Debian's postgresql as root)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: initdb cannot run as an unprivileged user"
    return None


def _as_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", "nobody", "--", *args] if os.geteuid() == 0 else args


@contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a cluster in a temporary folder; yields its URL (database ``furnace``); stops it after."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    assert initdb and pg_ctl
    folder = Path(tempfile.mkdtemp(prefix="furnace-pg-"))
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(folder, "nobody")
        shutil.chown(sockets, "nobody")
        os.chmod(folder, 0o755)
    user = "nobody" if os.geteuid() == 0 else os.environ.get("USER") or "postgres"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "check": True, "cwd": folder}
    try:
        subprocess.run(_as_user([initdb, "-D", str(data), "-U", user, "-A", "trust", "-E", "UTF8"]), **quiet)
        options = f"-c listen_addresses='' -k {sockets} -p {PORT} -c fsync=off"
        subprocess.run(
            _as_user([pg_ctl, "-D", str(data), "-o", options, "-w", "-l", str(folder / "log"), "start"]), **quiet
        )
        try:
            import psycopg

            with psycopg.connect(host=str(sockets), port=PORT, user=user, dbname="postgres", autocommit=True) as con:
                con.execute("CREATE DATABASE furnace")
            yield f"postgresql+psycopg://{user}@/furnace?host={sockets}&port={PORT}"
        finally:
            subprocess.run(_as_user([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), **quiet)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def open_sql(request: Any, kind: str, home: Path) -> Any:
    """A migrated, empty relational database of ``kind`` ("sqlite": in ``home``; "postgresql": the session's
    server, every table emptied) sealing with ``home``'s key."""
    from furnace.storage.sql.db import SQLDatabase, sqlite_url

    if kind == "sqlite":
        return SQLDatabase(sqlite_url(home), home=home)
    from furnace.storage.sql.schema import metadata

    db = SQLDatabase(request.getfixturevalue("postgres_url"), home=home)
    db.execute("TRUNCATE " + ", ".join(metadata.tables))
    return db
