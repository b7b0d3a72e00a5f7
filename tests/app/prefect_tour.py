"""Take the Prefect page's screenshots: an evolution flow run's graph, its artifacts and the final leaderboard.

Run from the repo root: ``.venv/bin/python -m tests.app.prefect_tour [OUT_DIR]`` (default ``docs/img/``). It
starts ``prefect server start`` (with its UI) on 127.0.0.1 with a temporary database, runs the small test
experiment with ``--prefect`` against it into a temporary FURNACE_HOME, and drives Debian chromium through the
flow run's page, its Artifacts tab and the final leaderboard artifact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .browser import browser_missing, browser_page, free_port
from .helpers import REPO

CONFIG = REPO / "tests" / "experiments" / "data" / "small.yaml"
FURNACE = [sys.executable, "-c", "from furnace.cli import main; main()"]


def wait_up(url: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/health", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # polling the server's health endpoint


def main(out: Path) -> None:
    missing = browser_missing()
    if missing:
        raise SystemExit(missing)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="furnace-prefect-tour-") as tmp:
        work = Path(tmp)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FURNACE_", "PREFECT_"))}
        env |= {
            "PREFECT_HOME": str(work / "prefect"),
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{work / 'server.db'}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_API_URL": f"{url}/api",
            "DO_NOT_TRACK": "true",
        }
        command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
        with (work / "server.log").open("wb") as log:
            server = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_up(url)
            run_env = env | {
                "PREFECT_API_URL": f"{url}/api",
                "FURNACE_HOME": str(work / "home"),
                "FURNACE_EMBEDDER": "hash",
            }
            subprocess.run([*FURNACE, "import", "--library"], cwd=REPO, env=run_env, check=True, capture_output=True)
            ran = subprocess.run(
                [*FURNACE, "experiment", "run", str(CONFIG), "--prefect", "--yes", "--json"],
                cwd=REPO,
                env=run_env,
                check=True,
                capture_output=True,
                text=True,
            )
            report = json.loads(ran.stdout[ran.stdout.index("{") :])
            with browser_page(1400, 900) as page:
                page.goto(f"{url}/runs/flow-run/{report['prefect_flow_run_id']}", wait_until="networkidle")
                page.wait_for_timeout(5000)  # the graph animates into place
                page.screenshot(
                    path=str(out / "prefect-run-graph.png"), clip={"x": 250, "y": 0, "width": 1150, "height": 500}
                )
                page.get_by_text("Artifacts", exact=True).first.click()
                page.wait_for_timeout(3000)
                page.screenshot(path=str(out / "prefect-artifacts.png"))
                key = f"{report['experiment_id'].lower()}-leaderboard"
                page.goto(f"{url}/artifacts/key/{key}", wait_until="networkidle")
                page.locator("a[href*='/artifacts/artifact/']").first.click()  # the latest version: the final one
                page.wait_for_timeout(3000)
                page.screenshot(path=str(out / "prefect-leaderboard.png"))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "img")
