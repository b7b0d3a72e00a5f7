"""``make lint`` holds: the import contracts of pyproject.toml ([tool.importlinter];
docs/architecture.md), ruff (rules and format) and mypy (strict on the core packages).

Run here as well as by ``make lint`` so that ``make test`` fails on an import that
breaks the layering (a core package reaching an adapter, a face importing another
face, a cycle inside a package), on a lint or format slip, and on a type error.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# The lines of the Makefile's `lint` recipe, as run there; lint-imports is the test just below.
LINT = [
    "ruff check furnace flows app bench tests notebooks",
    "ruff format --check furnace flows app bench tests notebooks",
    "mypy furnace flows app",
]


def _lint_recipe() -> list[str]:
    lines = (REPO / "Makefile").read_text(encoding="utf-8").split("lint: setup\n", 1)[1].splitlines()
    recipe = []
    for line in lines:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().removeprefix("$(BIN)/"))
    return recipe


def test_the_lint_tests_are_the_makefile_lint_target() -> None:
    assert _lint_recipe() == [*LINT, "lint-imports"]


@pytest.mark.longest  # a cold mypy cache (a fresh clone) takes minutes of CPU: start it first
@pytest.mark.parametrize("command", LINT, ids=[c.split()[0] + (" format" if "format" in c else "") for c in LINT])
def test_lint_is_clean(command: str) -> None:
    # mypy keeps its cache in the checkout's .mypy_cache (git-ignored): a few seconds once warm.
    tool, *args = command.split()
    out = subprocess.run([str(BIN / tool), *args], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def test_import_contracts_are_kept() -> None:
    lint = BIN / "lint-imports"
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
    faces_and_edges = {"adapters", "cli", "server", "resources", "storage"}
    packages = {p.name for p in (REPO / "furnace").iterdir() if (p / "__init__.py").exists()} - faces_and_edges
    assert {f"furnace.{p}" for p in packages} <= set(core["source_modules"])
    assert {"furnace.storage.store", "furnace.storage.memory"} <= set(core["source_modules"])


def test_the_unfollowed_packages_are_never_imported() -> None:
    """The transitive-only packages mypy does not follow (pyproject.toml) stay unimported by our code: an import
    of one would be checked against Any."""
    import re

    overrides = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["overrides"]
    [unfollowed] = [o["module"] for o in overrides if "narwhals.*" in o["module"]]
    names = [m.removesuffix(".*") for m in unfollowed]
    pattern = re.compile(rf"^\s*(?:import|from)\s+({'|'.join(map(re.escape, names))})\b", re.MULTILINE)
    found = {
        f"{path.relative_to(REPO)}: {hit}"
        for folder in ("furnace", "flows", "app")
        for path in (REPO / folder).rglob("*.py")
        for hit in pattern.findall(path.read_text(encoding="utf-8"))
    }
    assert not found, sorted(found)
