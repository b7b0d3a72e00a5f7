"""The import contracts of pyproject.toml ([tool.importlinter]; docs/architecture.md) hold.

Run here as well as by ``make lint`` so that ``make test`` fails on an import that
breaks the layering (a core package reaching an adapter, a face importing another
face, a cycle inside a package).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run(
        [str(lint), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in out.stdout


def test_the_core_contract_covers_every_core_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    [core] = [c for c in config["contracts"] if c["name"].startswith("The core never imports")]
    faces_and_edges = {"adapters", "cli", "flows", "app", "resources", "storage"}
    packages = {p.name for p in (REPO / "furnace").iterdir() if (p / "__init__.py").exists()} - faces_and_edges
    assert {f"furnace.{p}" for p in packages} <= set(core["source_modules"])
    assert {"furnace.storage.store", "furnace.storage.memory"} <= set(core["source_modules"])
