"""A fresh process's first write to SQLite runs one full garbage collection before it takes the write lock
(so the first full collection does not land inside the transaction), once per process, and a read runs none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import gc, sys
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from pathlib import Path
gc.disable()  # only the collections asked for explicitly happen
events = []
gc.callbacks.append(lambda phase, info: events.append("full") if phase == "start" and info["generation"] == 2 else None)
home = Path(sys.argv[1])
db = SQLDatabase(sqlite_url(home), home=home)
db.query("SELECT 1")
events.append("read")
db.write(lambda conn: events.append("write"))
db.write(lambda conn: events.append("write"))
print(" ".join(events))
"""


def test_the_first_write_collects_once_before_its_transaction(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out == ["read", "full", "write", "write"]  # a read collects nothing; the first write, once, first
