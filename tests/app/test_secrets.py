"""The app never shows an API key, and `furnace app` binds 127.0.0.1 unless told otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import APP, no_errors

FAKE_KEY = "sk-furnace-test-7f3a9c1e5b2d4680aa11"
PAGES = [
    "screens/personas.py",
    "screens/furnace.py",
    "screens/revision.py",
    "screens/lineage.py",
    "screens/compare.py",
    "screens/arena.py",
    "screens/assistant.py",
]


def _texts(at) -> str:
    """Everything the page put on screen, as one string."""
    parts = []
    for kind in (
        "markdown",
        "code",
        "text",
        "caption",
        "title",
        "header",
        "subheader",
        "info",
        "success",
        "warning",
        "error",
        "json",
        "metric",
        "text_input",
        "text_area",
        "selectbox",
    ):
        for element in getattr(at, kind):
            for attr in ("value", "body", "label", "options"):
                value = getattr(element, attr, None)
                if value is not None:
                    parts.append(str(value))
    return "\n".join(parts)


def test_no_page_shows_the_key(app_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("FURNACE_API_KEY", FAKE_KEY)
    monkeypatch.setenv("DEEPSEEK_API_KEY", FAKE_KEY)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    seen = []
    for page in PAGES:
        at = at.switch_page(page).run()
        no_errors(at)
        text = _texts(at)
        seen.append(len(text))
        assert FAKE_KEY not in text and FAKE_KEY[:12] not in text, page
    assert all(n > 0 for n in seen)  # every page rendered something to scan
    stored = list(app_home.glob("furnace.sqlite*"))  # the live store (and its WAL while the app's runtime is open)
    raw = b"".join(p.read_bytes() for p in stored)
    assert stored and raw and FAKE_KEY.encode() not in raw


def test_furnace_app_binds_loopback_by_default() -> None:
    from furnace.cli.app_cmd import app_command
    from furnace.settings import FurnaceSettings

    settings = FurnaceSettings()
    cmd = app_command(APP, host=settings.app_host, port=settings.app_port)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8501"
