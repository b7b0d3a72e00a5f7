"""A fresh process's first write to SQLite moves its heap out of the collector's reach before it takes the
write lock (so the first full collection does not land inside the transaction)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import gc, sys
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from pathlib import Path
home = Path(sys.argv[1])
db = SQLDatabase(sqlite_url(home), home=home)
before = gc.get_freeze_count()
db.query("SELECT 1")
after_read = gc.get_freeze_count()
db.write(lambda conn: None)
print(before, after_read, gc.get_freeze_count())
"""


def test_the_first_write_freezes_what_the_process_allocated_before_it(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    before, after_read, after_write = (int(n) for n in out)
    assert before == 0 and after_read == 0  # a read takes no turn to write
    assert after_write > 1000  # the imports' objects (sqlalchemy, furnace) are frozen
