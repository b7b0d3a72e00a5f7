"""File importers under load: a 5 MB CSV, a 100k-item file, and a share of the fuzz run.

Targets (issue #15): a ~5 MB awesome-chatgpt-prompts-style CSV imports into DuckDB in
< 10 s (read, validate and write, one transaction); a YAML or JSON file with 100,000 items
is rejected in < 1 s (shape limits are checked before parsing); 1,000 fuzz cases give 0
internal errors (``make fuzz`` runs 10,000). The store is the one ``furnace import`` writes to, built
through the runtime on a temporary home (:mod:`bench.stack`).
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stack import main_for, stack

CSV_TARGET_S = 10.0
REJECT_TARGET_S = 1.0
CSV_BYTES = 4_900_000  # just under the 5,000,000-byte file cap
CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus" / "awesome-chatgpt-prompts.csv"


def _big_csv(path: Path) -> int:
    """The corpus rows repeated (each copy's roles renamed) up to :data:`CSV_BYTES` of UTF-8."""
    rows = list(csv.reader(CORPUS.open(encoding="utf-8", newline="")))
    header, body = rows[0], rows[1:]

    def line(row: list[str]) -> bytes:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow(row)
        return out.getvalue().encode("utf-8")

    parts, size, copy = [line(header)], 0, 0
    size = len(parts[0])
    while True:
        for row in body:
            encoded = line([f"{row[0]} {copy}", *row[1:]])
            if size + len(encoded) > CSV_BYTES:
                path.write_bytes(b"".join(parts))
                return size
            parts.append(encoded)
            size += len(encoded)
        copy += 1


def _timed_reject(path: Path, store: Any) -> tuple[float, str]:
    from furnace.domain.errors import InputError
    from furnace.interop.importers import import_file

    started = time.perf_counter()
    try:
        import_file(path, store)
    except InputError as err:
        return time.perf_counter() - started, str(err)
    return time.perf_counter() - started, "ACCEPTED (should have been refused)"


def run() -> bool:
    from bench.fuzz_importers import run_fuzz
    from furnace.interop.importers import import_file

    ok = True
    with tempfile.TemporaryDirectory(prefix="furnace-bench-import-") as tmp, stack() as built:
        folder = Path(tmp)
        path = folder / "big.csv"
        size = _big_csv(path)
        store = built.runtime.store  # what ``furnace import`` writes to
        started = time.perf_counter()
        report = import_file(path, store)
        took = time.perf_counter() - started
        met = took < CSV_TARGET_S
        ok &= met
        print(
            f"   CSV {size / 1e6:.1f} MB → the runtime's store: {len(report.created)} created, "
            f"{len(report.skipped)} skipped "
            f"in {took:.2f}s (target < {CSV_TARGET_S:.0f}s) {'ok' if met else 'MISSED'}"
        )
        big_yaml = folder / "big.yaml"
        big_yaml.write_text("id: big\nname: Big\nidentity: x\nprinciples:\n" + "- p\n" * 100_000)
        big_json = folder / "big.json"
        big_json.write_text(json.dumps([{"id": f"e{i}", "name": "x"} for i in range(100_000)]))
        for file in (big_yaml, big_json):
            took, message = _timed_reject(file, store)
            met = took < REJECT_TARGET_S and "ACCEPTED" not in message
            ok &= met
            print(
                f"   100k items ({file.suffix}) rejected in {took * 1000:.0f} ms (target < 1 s) "
                f"{'ok' if met else 'MISSED'}: {message}"
            )
    started = time.perf_counter()
    tried, failures = run_fuzz(1_000, seed=1)
    ok &= not failures
    print(
        f"   fuzz: {tried} cases, {len(failures)} internal errors (target 0) in {time.perf_counter() - started:.1f}s"
        f" {'ok' if not failures else 'MISSED'}"
    )
    return ok


main = main_for("importers", run)
