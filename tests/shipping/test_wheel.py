"""A non-editable install works: the wheel ships every file the package reads, and ``furnace demo`` runs
from it outside the checkout to the end (no network: built and installed with ``--no-index``).

That run is the suite's one end-to-end run of ``furnace demo``: :func:`check_demo_run` holds what it must
produce (report, DuckDB, MLflow, promotion, the preference loop); running the demo a second time from the
checkout would prove nothing more and cost ~20 s."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "furnace"

pytestmark = pytest.mark.slow

# Run ``furnace demo`` and, at exit, fail if any furnace module came from somewhere other than SITE.
DRIVER = """
import atexit, os, sys
site = os.path.realpath(sys.argv[1])
def check():
    outside = sorted(
        name for name, mod in list(sys.modules.items())
        if (name == "furnace" or name.startswith("furnace.")) and getattr(mod, "__file__", None)
        and not os.path.realpath(mod.__file__).startswith(site + os.sep)
    )
    if outside:
        print("imported from outside the install: " + ", ".join(outside), file=sys.stderr)
        os._exit(3)
atexit.register(check)
import furnace
print("furnace from " + os.path.dirname(os.path.realpath(furnace.__file__)))
from furnace.cli import main
main(sys.argv[2:])
"""


def shipped_files() -> set[str]:
    """Every non-Python file in the source package: all of them are read at run time."""
    return {
        p.relative_to(REPO).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    }


def pip(*args: str, cwd: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel from a copy of the sources (the checkout gets no build/ or egg-info)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    shutil.copy(REPO / "pyproject.toml", src)
    shutil.copy(REPO / "README.md", src)
    shutil.copytree(PACKAGE, src / "furnace", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp / "dist"), str(src), cwd=tmp)
    (built,) = (tmp / "dist").glob("furnace-*.whl")
    return built


def test_wheel_ships_the_app_and_every_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = shipped_files() - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    sources = {p.relative_to(REPO).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    assert not sources - names, f"modules not in the wheel: {sorted(sources - names)}"
    assert "furnace/app/streamlit_app.py" in names
    assert any(n.startswith("furnace/app/screens/") for n in names)
    assert any(n.startswith("furnace/resources/elixirs/") and n.endswith(".yaml") for n in names)
    assert any(n.startswith("furnace/storage/duckdb/migrations/") and n.endswith(".sql") for n in names)


def check_demo_run(out: str, home: Path) -> None:
    """``furnace demo`` (printing ``out``, into ``home``) ran the demo experiment to the end: report, DuckDB,
    MLflow, promotion, then the preference loop."""
    assert "5. Evolution experiment" in out and "— finished" in out
    assert "best agent promoted to the library as demo-champion@1" in out
    assert "mlflow ui --backend-store-uri sqlite:///" in out and "furnace app" in out
    assert (home / "furnace.duckdb").is_file() and (home / "mlflow.db").exists()

    from furnace.adapters.mlflow_tracker import run_summary
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings
    from furnace.storage.duckdb.db import Database
    from furnace.storage.duckdb.experiments import DuckDBExperimentResults

    results = DuckDBExperimentResults(Database(home / "furnace.duckdb"))
    (exp,) = results.list_experiments()
    gens = results.generations(exp.experiment_id)
    assert len(gens) == 5 and gens[-1].best_fitness > gens[0].best_fitness  # evolution improved on the seeds
    assert gens[-1].best_fitness > gens[1].best_fitness  # and kept improving after generation 1 (it was flat)
    summary = run_summary(FurnaceSettings(home=home).tracking_uri, exp.experiment_id)
    assert summary and summary["status"] == "FINISHED" and len(summary["best_fitness_steps"]) == 5

    # step 6: the preference loop — revise by chat, learn, write again with what was learned
    assert "6. Revision chat: skincare-science-writer-zh@1" in out
    assert "V1→V2" in out and "V3→V4" in out
    persona = Runtime(FurnaceSettings(home=home)).store.get_elixir("skincare-science-writer-zh")
    learned = {(p.dimension, p.value) for p in persona.style_preferences}
    assert {("tone", "lively"), ("emoji", "more")} <= learned
    assert f"learned preferences → skincare-science-writer-zh@{persona.version}" in out
    assert "prompts:/furnace-demo-champion@champion" in out


def test_furnace_demo_runs_end_to_end_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    pip("install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel), cwd=tmp_path)
    assert not (site / "furnace" / "__init__.py").is_symlink()
    run_dir = tmp_path / "elsewhere"  # not the checkout, so the sources are not importable from cwd
    run_dir.mkdir()
    home = tmp_path / "home"
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("FURNACE_") or k in {"PYTHONPATH", "PYTHONSAFEPATH", "PYTHONHOME"})
    }
    env |= {"PYTHONPATH": str(site), "FURNACE_HOME": str(home), "FURNACE_EMBEDDER": "hash"}
    cmd = [sys.executable, "-c", DRIVER, str(site), "demo"]
    result = subprocess.run(cmd, cwd=run_dir, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"furnace from {os.path.realpath(site / 'furnace')}" in result.stdout
    assert "leaderboard" in result.stdout
    check_demo_run(result.stdout, home)
    # the app's entry point resolves inside the install (its screens are in the wheel, checked above)
    probe = "from furnace.cli.app_cmd import APP_ENTRY; print(APP_ENTRY.resolve())"
    shown = subprocess.run([sys.executable, "-c", probe], cwd=run_dir, env=env, capture_output=True, text=True)
    entry = Path(shown.stdout.strip())
    assert entry.is_file() and entry.is_relative_to(site.resolve()), shown.stdout + shown.stderr
