"""furnace — the Streamlit app. Start with ``furnace app`` (binds 127.0.0.1)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from furnace import offline_env

offline_env.apply()

import streamlit as st  # noqa: E402

st.set_page_config(page_title="furnace", page_icon=":material/science:", layout="wide")
DEBUG = bool(os.environ.get("FURNACE_DEBUG"))
# An error on a page is one clear message (show_error below); Streamlit's own traceback view
# only with FURNACE_DEBUG=1 (then exceptions also propagate to it).
st.set_option("client.showErrorDetails", "full" if DEBUG else "none")

HERE = Path(__file__).resolve().parent
PAGES = [  # (file, title, icon)
    ("screens/personas.py", "Personas", ":material/science:"),
    ("screens/furnace.py", "Furnace", ":material/local_fire_department:"),
    ("screens/revision.py", "Revision chat", ":material/edit_note:"),
    ("screens/lineage.py", "Lineage", ":material/account_tree:"),
    ("screens/compare.py", "Compare", ":material/bar_chart:"),
    ("screens/judge.py", "Judge", ":material/thumbs_up_down:"),
    ("screens/arena.py", "Arena", ":material/forum:"),
    ("screens/assistant.py", "Assistant", ":material/search:"),
]

page = st.navigation(
    [
        st.Page(path, title=title, icon=icon, default=(i == 0))
        for i, (path, title, icon) in enumerate(PAGES)
        if (HERE / path).exists()
    ]
)


def run_page() -> None:
    """Run the page; an exception becomes one message on it (logged with its traceback), unless FURNACE_DEBUG."""
    from furnace_app.services import show_error

    try:
        page.run()
    except Exception as err:  # st.stop/st.rerun/switch_page are BaseExceptions and pass through
        if DEBUG:
            raise
        logging.getLogger("furnace_app").exception("page %s failed", page.title)
        show_error(err)
        st.caption("The details are in the app's log; set FURNACE_DEBUG=1 to see the traceback here.")


run_page()
