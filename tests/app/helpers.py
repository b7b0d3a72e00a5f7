"""Helpers for the app tests."""

from __future__ import annotations

from pathlib import Path

from furnace import resources

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "furnace" / "app" / "streamlit_app.py"
LIBRARY_DIR = resources.LIBRARY_DIR


def seed_home(path: Path) -> Path:
    """A FURNACE_HOME holding the sample library (``data/elixirs``)."""
    from furnace.adapters.factory import build_store
    from furnace.interop.importers import import_library
    from furnace.settings import FurnaceSettings

    path.mkdir(parents=True, exist_ok=True)
    import_library(LIBRARY_DIR, build_store(FurnaceSettings(home=path)), keep_existing=True)
    return path


def store_for(home: Path):
    """The DuckDB store of ``home`` (what the app writes to)."""
    from furnace.adapters.factory import build_store
    from furnace.settings import FurnaceSettings

    return build_store(FurnaceSettings(home=home))


def no_errors(at) -> None:
    """The page rendered without an exception or an error box."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
