"""Processes furnace starts stop with it: SIGTERM/SIGINT are forwarded, SIGKILL is noticed by the child."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import seed_home

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie has stopped running (nobody reaped it yet)


def _children(pid: int, timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            found = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except FileNotFoundError:
            found = []
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child")


def _gone(pids: list[int], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _env(home: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), FURNACE_HOME=str(home))


PARENT = (
    "import sys\n"
    "from furnace.adapters.processes import run_child\n"
    "sys.exit(run_child([sys.executable, '-c', 'import time; time.sleep(600)']))\n"
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["TERM", "INT", "KILL"])
def test_child_is_stopped_when_the_parent_is_signalled(sig: signal.Signals, tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], env=_env(tmp_path))
    try:
        children = _children(parent.pid)
        time.sleep(0.3)  # past the child's exec
        parent.send_signal(sig)
        code = parent.wait(30)
        assert _gone(children), f"child {children} still running after {sig.name} of its parent"
        if sig != signal.SIGKILL:
            assert code == 128 + sig.value
    finally:
        parent.kill()
        parent.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_furnace_app_leaves_no_streamlit_behind(sig: signal.Signals, tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = subprocess.Popen(
        [sys.executable, "-c", "from furnace.cli import main; main()", "app", "--port", str(_free_port())],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        streamlit = _children(app.pid)
        time.sleep(1.0)
        app.send_signal(sig)
        app.wait(30)
        assert _gone(streamlit), f"streamlit {streamlit} still running after {sig.name} of furnace app"
    finally:
        app.kill()
        app.wait()


def _up(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_a_prefect_run_leaves_no_temporary_server_behind(
    sig: signal.Signals, tmp_path: Path, prefect_server_template: Path
) -> None:
    import re

    from tests.prefect_db import place_copy

    home = tmp_path / "home"
    env = {k: v for k, v in _env(home).items() if k != "PREFECT_API_URL"}
    env["FURNACE_EMBEDDER"] = "hash"
    furnace = [sys.executable, "-c", "from furnace.cli import main; main()"]
    seed_home(home)  # in this process: one interpreter start fewer per case
    # the server furnace starts finds its database migrated (~5 s of CPU fewer; nothing of its stop changes)
    database = place_copy(prefect_server_template, home / "prefect" / "server.db")
    demo = REPO / "furnace" / "resources" / "experiments" / "demo.yaml"
    run = subprocess.Popen(
        [*furnace, "experiment", "run", str(demo), "--prefect", "--no-mlflow", "--yes"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stderr is not None
        found = None
        for line in run.stderr:  # the announcement comes first
            found = re.search(r"temporary Prefect server \(pid (\d+)\) at (\S+)", line)
            if found:
                break
        assert found, "no temporary Prefect server was announced"
        server, url = int(found.group(1)), found.group(2)
        from furnace.adapters.prefect_server import DEFAULT_START_TIMEOUT_S

        deadline = time.monotonic() + DEFAULT_START_TIMEOUT_S  # as long as the run itself waits for it (loaded CI)
        while not _up(url) and time.monotonic() < deadline and _alive(server):
            time.sleep(0.2)
        assert _up(url), "the temporary Prefect server never came up"
        served = Path(f"/proc/{server}/environ").read_bytes().split(b"\0")  # its database: under FURNACE_HOME
        assert f"PREFECT_API_DATABASE_CONNECTION_URL=sqlite+aiosqlite:///{database}".encode() in served, (
            "not the database placed"
        )
        assert url.startswith("http://127.0.0.1:")
        run.send_signal(sig)
        run.wait(60)
        assert _gone([server]), f"Prefect server {server} still running after {sig.name} of furnace"
        assert not _up(url)
    finally:
        run.kill()
        run.wait()
