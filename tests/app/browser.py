"""A real app server in a subprocess and a Playwright browser against it (shared by the
browser test and the docs screenshot script)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .helpers import APP, REPO

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def browser_missing() -> str | None:
    """Why the browser test cannot run here (None when it can)."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (make test installs Debian chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install '.[dev]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def app_server(home: Path, *, timeout_s: float = 60.0) -> Iterator[str]:
    """``streamlit run`` on 127.0.0.1 with ``home`` as FURNACE_HOME; yields the base URL; stopped in a finally."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FURNACE_") and not k.endswith("_API_KEY")}
    env.update(FURNACE_HOME=str(home), FURNACE_EMBEDDER="hash")
    from furnace.cli.app_cmd import app_command  # the command `furnace app` runs

    cmd = [*app_command(APP, host="127.0.0.1", port=port), "--server.fileWatcherType", "none"]
    log = (home / "streamlit.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"streamlit exited with {proc.returncode}: {(home / 'streamlit.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # polling the health endpoint, not waiting for the UI
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextmanager
def chromium() -> Iterator[Any]:
    """A Playwright browser: Debian chromium (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, width: int = 1400, height: int = 1000) -> Any:
    """A page in a new browser context of its own (no cookies or storage shared with another page)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(60_000)
    return page


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A Playwright page in Debian chromium (never a downloaded browser)."""
    with chromium() as browser:
        yield new_page(browser, width, height)


def settle(page: Any) -> None:
    """Wait until the app has finished its rerun (the 'running' indicator is gone)."""
    page.wait_for_load_state("networkidle")
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden")
    page.locator('[data-testid="stApp"][data-test-script-state="running"]').wait_for(state="detached")


def pick_on_the_judge_page(page: Any, who: str, reason: str) -> None:
    """On the Judge page: say who picks, give a reason, pick A, and wait for the pick's reveal."""
    name = page.get_by_label("Your name (stored with each pick)")
    name.fill(who)
    name.press("Enter")
    settle(page)
    why = page.get_by_label("Why (optional)")
    why.fill(reason)
    why.press("Enter")
    settle(page)
    page.get_by_role("button", name="A is better").click()
    page.get_by_text("Stored pick-").first.wait_for()
    settle(page)


def clear(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path
