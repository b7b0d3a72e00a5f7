"""The assistant tests' shared data set."""

from __future__ import annotations

import pytest

from furnace.storage.duckdb.assist import DuckDBAssistData

from .dataset import build_live


@pytest.fixture(scope="session")
def assist_data(tmp_path_factory: pytest.TempPathFactory) -> DuckDBAssistData:
    """The seeded data set (tests/assistant/dataset.py) in a live store, built once per test process: the
    assistant only reads it (a test's scope lock lives in its own ``AssistantState``)."""
    return build_live(tmp_path_factory.mktemp("assist"))
