"""What every page shares: settings and adapters built once per app process.

Only plain objects are cached (settings, the Database owner, which holds no
open connection); DuckDB connections stay short-lived inside furnace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from furnace.errors import FurnaceError
from furnace.settings import FurnaceSettings


@dataclass
class Services:
    settings: FurnaceSettings
    _built: dict[str, Any] = field(default_factory=dict)

    def _get(self, name: str, build: Any) -> Any:
        if name not in self._built:
            self._built[name] = build()
        return self._built[name]

    @property
    def db(self) -> Any:
        from furnace.adapters.factory import build_db

        return self._get("db", lambda: build_db(self.settings))

    @property
    def store(self) -> Any:
        from furnace.adapters.factory import build_store

        return self._get("store", lambda: build_store(self.settings, db=self.db))

    @property
    def llm(self) -> Any:
        from furnace.adapters.factory import build_llm

        return self._get("llm", lambda: build_llm(self.settings, db=self.db))

    @property
    def embedder(self) -> Any:
        from furnace.adapters.factory import build_embedder

        return self._get("embedder", lambda: build_embedder(self.settings))


@st.cache_resource(show_spinner=False)
def _services(home: str) -> Services:
    return Services(settings=FurnaceSettings())


def services() -> Services:
    """The shared services for this app process (keyed by FURNACE_HOME)."""
    settings = FurnaceSettings()
    return _services(str(settings.home.resolve()))


def show_error(err: Exception) -> None:
    """Errors are caught at the page boundary and shown, never as a traceback."""
    if isinstance(err, FurnaceError):
        st.error(str(err))
    else:
        st.error(f"Something went wrong: {err.__class__.__name__}: {err}")
