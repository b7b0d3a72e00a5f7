"""A non-editable install works: the wheel ships every file the package reads and the faces (``flows/`` as
``furnace_flows``, ``app/`` as ``furnace_app``), ``furnace demo`` runs from it outside the checkout to the end,
and ``furnace app`` and ``furnace serve`` start from it (no network: built and installed with ``--no-index``).

That run is the suite's one end-to-end run of ``furnace demo``: :func:`check_demo_run` holds what it must
produce (report, DuckDB, MLflow, promotion, the preference loop); running the demo a second time from the
checkout would prove nothing more and cost ~20 s."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from furnace.adapters.processes import stop

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "furnace"
FACES = {"furnace_flows": "flows", "furnace_app": "app"}  # installed name -> folder in the checkout (setup.py)

pytestmark = pytest.mark.slow

# Run ``furnace demo`` and, at exit, fail if any furnace module came from somewhere other than SITE.
DRIVER = """
import atexit, os, sys
site = os.path.realpath(sys.argv[1])
def check():
    outside = sorted(
        name for name, mod in list(sys.modules.items())
        if name.split(".")[0] in ("furnace", "furnace_flows", "furnace_app") and getattr(mod, "__file__", None)
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
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src)
    for folder in ("furnace", *FACES.values()):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp / "dist"), str(src), cwd=tmp)
    (built,) = (tmp / "dist").glob("furnace-*.whl")
    return built


def test_wheel_ships_the_app_and_every_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = shipped_files() - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    sources = {p.relative_to(REPO).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    assert not sources - names, f"modules not in the wheel: {sorted(sources - names)}"
    for name, folder in FACES.items():  # the faces, under their own names; no generic flows/ or app/ package
        modules = {p.relative_to(REPO / folder).as_posix() for p in (REPO / folder).rglob("*.py")}
        modules -= {m for m in modules if "__pycache__" in m}
        assert {f"{name}/{m}" for m in modules} <= names, sorted({f"{name}/{m}" for m in modules} - names)
    assert "furnace_app/streamlit_app.py" in names and "furnace_app/screens/personas.py" in names
    assert not {n.split("/")[0] for n in names} & {"flows", "app"}
    assert any(n.startswith("furnace/resources/elixirs/") and n.endswith(".yaml") for n in names)
    assert any(n.startswith("furnace/storage/duckdb/migrations/") and n.endswith(".sql") for n in names)


def check_demo_run(out: str, home: Path) -> None:
    """``furnace demo`` (printing ``out``, into ``home``) ran the demo experiment to the end: report, the live
    store, MLflow, promotion, then the preference loop."""
    assert "5. Evolution experiment" in out and "— finished" in out
    assert "best agent promoted to the library as demo-champion@1" in out
    assert "mlflow ui --backend-store-uri sqlite:///" in out and "furnace app" in out
    assert (home / "furnace.sqlite").is_file() and (home / "mlflow.db").exists()

    from furnace.adapters.mlflow_tracker import run_summary
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    results = Runtime(FurnaceSettings(home=home)).results
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


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """The wheel installed (non-editable, no dependencies: they come from this venv) into a folder put on
    PYTHONPATH: (site, a run folder outside the checkout, the environment)."""
    tmp = tmp_path_factory.mktemp("installed")
    site = tmp / "site"
    pip("install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel), cwd=tmp)
    assert not (site / "furnace" / "__init__.py").is_symlink()
    run_dir = tmp / "elsewhere"  # not the checkout, so the sources are not importable from cwd
    run_dir.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("FURNACE_") or k in {"PYTHONPATH", "PYTHONSAFEPATH", "PYTHONHOME", "PREFECT_API_URL"})
    }
    env |= {"PYTHONPATH": str(site), "FURNACE_EMBEDDER": "hash"}
    return site, run_dir, env


def test_furnace_demo_runs_end_to_end_from_the_installed_wheel(installed, tmp_path: Path) -> None:
    site, run_dir, env = installed
    home = tmp_path / "home"
    cmd = [sys.executable, "-c", DRIVER, str(site), "demo"]
    result = subprocess.run(
        cmd, cwd=run_dir, env=env | {"FURNACE_HOME": str(home)}, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"furnace from {os.path.realpath(site / 'furnace')}" in result.stdout
    assert "leaderboard" in result.stdout
    check_demo_run(result.stdout, home)


def _started(cmd: list[str], *, env: dict[str, str], cwd: Path, ready: Callable[[], bool], log: Path) -> None:
    """Start ``cmd``, wait until ``ready()`` (or fail with its output if it exits first), then stop it."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        # No deadline (no wall-clock assertion): the server is up, or it exited and its output says why.
        while not ready():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)  # polling the started server, not waiting for it
            assert proc.poll() is None, f"exited with {proc.returncode}: {log.read_text()[-3000:]}"
    finally:
        stop(proc)


def test_furnace_app_starts_from_the_installed_wheel(installed, tmp_path: Path) -> None:
    """``furnace app`` runs the installed ``furnace_app`` entry: Streamlit answers, and the entry's own imports
    (``furnace_app.services``, the screens) resolve inside the install."""
    site, run_dir, env = installed
    probe = "from furnace.cli.app_cmd import app_entry\nimport furnace_app.services as m\n"
    probe += "print(app_entry(), m.__file__)"
    shown = subprocess.run([sys.executable, "-c", probe], cwd=run_dir, env=env, capture_output=True, text=True)
    entry, services = (Path(line) for line in shown.stdout.split())
    assert entry.is_file() and entry.is_relative_to(site.resolve()), shown.stdout + shown.stderr
    assert Path(services).resolve().is_relative_to(site.resolve())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    def health() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    cmd = [sys.executable, "-c", DRIVER, str(site), "app", "--port", str(port)]
    home = {"FURNACE_HOME": str(tmp_path / "home")}
    _started(cmd, env=env | home, cwd=run_dir, ready=health, log=tmp_path / "app.log")


def test_furnace_serve_registers_its_deployment_from_the_installed_wheel(
    installed, prefect_harness, tmp_path: Path
) -> None:
    """``furnace serve FILE`` from the install registers the evolution flow's deployment with a Prefect server
    (the session's test server: this file is in the Prefect harness unit, see tests/conftest.py)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    site, run_dir, env = installed
    config = REPO / "tests" / "experiments" / "data" / "small.yaml"
    home = tmp_path / "home"
    name = "furnace-wheel-serve-check"  # no other test registers this name on the shared server
    url = str(PREFECT_API_URL.value())
    assert url.startswith("http://127.0.0.1:")

    def deployed() -> bool:
        with get_client(sync_client=True) as client:
            return any(d.name == name for d in client.read_deployments())

    assert not deployed()
    cmd = [sys.executable, "-c", DRIVER, str(site), "serve", str(config), "--name", name]
    served = env | {"FURNACE_HOME": str(home), "PREFECT_API_URL": url}
    _started(cmd, env=served, cwd=run_dir, ready=deployed, log=tmp_path / "serve.log")
    with get_client(sync_client=True) as client:
        [deployment] = [d for d in client.read_deployments() if d.name == name]
        assert client.read_flow(deployment.flow_id).name == "furnace-evolution"
        assert deployment.parameters["file"] == str(config.resolve())
