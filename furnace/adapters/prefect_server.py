"""A Prefect API for ``--prefect`` runs: the configured server, or a temporary one furnace owns.

With ``PREFECT_API_URL`` set (a ``prefect server start`` or Prefect Cloud), flows report
there. Without it, Prefect would start an ephemeral server of its own that outlives a
killed furnace. furnace starts that temporary server itself instead, as a child bound
to its life (:func:`furnace.adapters.processes.start_child`): stopped when the run ends,
on SIGTERM/SIGINT, and by the kernel when furnace is killed with SIGKILL. Its database
lives under ``FURNACE_HOME/prefect/`` and it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from furnace.adapters.processes import start_child, stop
from furnace.domain.errors import FurnaceError

DEFAULT_START_TIMEOUT_S = 300.0  # FURNACE_PREFECT_START_TIMEOUT_S (settings); a loaded machine took over 120 s


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:  # noqa: S310 - loopback only
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def prefect_api(
    home: Path, *, timeout_s: float = DEFAULT_START_TIMEOUT_S, on_status: Callable[[str], None] = lambda _: None
) -> Iterator[str]:
    """The Prefect API URL flows report to while the block runs (starting a temporary server if none, given
    ``timeout_s`` to answer its health check)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    configured = PREFECT_API_URL.value()
    if configured:
        yield str(configured)
        return
    import prefect

    data = home / "prefect"
    data.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_UI_ENABLED": "0",
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{data / 'server.db'}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    command = [
        sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parent.parent),
        "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "error", "--lifespan", "on",
    ]  # fmt: skip
    server = start_child(command, env=env)
    try:
        on_status(f"starting a temporary Prefect server (pid {server.pid}) at {url} — stopped with this run")
        deadline = time.monotonic() + timeout_s
        while not _healthy(url):
            if server.poll() is not None:
                raise FurnaceError(f"the temporary Prefect server exited (code {server.returncode}) before it was up")
            if time.monotonic() > deadline:
                raise FurnaceError(
                    f"the temporary Prefect server was not up after {timeout_s:g}s; nothing was run. On a loaded "
                    "machine raise FURNACE_PREFECT_START_TIMEOUT_S, or start `prefect server start` once and set "
                    "PREFECT_API_URL"
                )
            time.sleep(0.2)
        with temporary_settings(updates={PREFECT_API_URL: url}):
            try:
                yield url
            finally:
                _drain_to(url)
    finally:
        stop(server)


def _drain_to(url: str) -> None:
    """Send Prefect's queued logs and events while the temporary server still listens."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):
            worker.drain_all(timeout=10)
