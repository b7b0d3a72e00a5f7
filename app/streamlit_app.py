"""furnace — the Streamlit app. Start with ``furnace app`` (binds 127.0.0.1)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # so pages can `import services`

from furnace import offline_env  # noqa: E402

offline_env.apply()

import streamlit as st  # noqa: E402

st.set_page_config(page_title="furnace", page_icon="⚗️", layout="wide")

HERE = Path(__file__).resolve().parent
PAGES = [  # (file, title, icon)
    ("pages/personas.py", "Personas", "🧪"),
    ("pages/furnace.py", "Furnace", "🔥"),
    ("pages/revision.py", "Revision chat", "✍️"),
    ("pages/lineage.py", "Lineage", "🌳"),
    ("pages/compare.py", "Compare", "📊"),
    ("pages/arena.py", "Arena", "🏟️"),
    ("pages/assistant.py", "Assistant", "🔎"),
]

page = st.navigation(
    [
        st.Page(path, title=title, icon=icon, default=(i == 0))
        for i, (path, title, icon) in enumerate(PAGES)
        if (HERE / path).exists()
    ]
)
page.run()
