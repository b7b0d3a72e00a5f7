"""What every page shares: one :class:`~furnace.runtime.Runtime` per app process, and page helpers.

Only plain objects are cached (settings, the runtime). The store is SQLite in WAL mode (or PostgreSQL):
the app, experiments and CLI commands read and write it at once (docs/store.md).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from furnace.domain.errors import FurnaceError
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings

RECENT_AGENTS = 30  # agents offered in pickers (newest first); any other id can be typed or reached via lineage


@st.cache_resource(show_spinner=False)
def _runtime(home: str) -> Runtime:
    return Runtime(FurnaceSettings())


def services() -> Runtime:
    """The runtime shared by every page of this app process (keyed by FURNACE_HOME)."""
    settings = FurnaceSettings()
    return _runtime(str(settings.home.resolve()))


UNKNOWN = "—"


def for_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for a table: a value not known yet (None) reads "—", never 0 or "None"."""
    return [{k: UNKNOWN if v is None else v for k, v in row.items()} for row in rows]


def known_sum(rows: list[dict[str, Any]], key: str) -> str:
    """The sum of a column over the rows that know it, or "—" when none does."""
    values = [r[key] for r in rows if r.get(key) is not None]
    return f"{sum(values):,}" if values else UNKNOWN


def show_error(err: Exception) -> None:
    """Errors are caught at the page boundary and shown, never as a traceback."""
    if isinstance(err, FurnaceError):
        st.error(str(err))
    else:
        st.error(f"Something went wrong: {err.__class__.__name__}: {err}")


def picker(
    label: str, options: list[Any], *, key: str, pick_key: str, format_func: Any = str, default: Any = None
) -> Any:
    """A selectbox that moves to ``st.session_state[pick_key]`` whenever that pick changes.

    Other pages and actions (a save, a create, the assistant's "open" buttons)
    set the pick; the widget keeps its own state otherwise.
    """
    pick = st.session_state.get(pick_key)
    applied = f"_applied_{pick_key}"
    if pick is not None and pick in options and st.session_state.get(applied) != pick:
        st.session_state[key] = pick
        st.session_state[applied] = pick
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else options[0]
    return st.selectbox(label, options, key=key, format_func=format_func)


def subject_labels(svc: Runtime) -> dict[str, str]:
    """Library elixirs and the newest agents, id → label, for parent/agent pickers (stops the page on error)."""
    try:
        library = svc.store.list_elixirs()
        agents = svc.store.list_agents(limit=RECENT_AGENTS)
    except FurnaceError as err:
        show_error(err)
        st.stop()
    labels = {e.id: f"{e.name} ({e.id} v{e.version})" for e in library}
    labels.update({a.id: f"{a.elixir.name} ({a.id}, {a.lineage.operator})" for a in agents})
    return labels
