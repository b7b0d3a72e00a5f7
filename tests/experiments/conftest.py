"""What several experiment test files share: the small experiment cut down further."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFIG = Path(__file__).parent / "data" / "small.yaml"


@pytest.fixture()
def smaller(tmp_path) -> Path:
    """CONFIG cut to a population of 3 and 2 generations of children after the seeds (so parent edges, caching
    and per-generation artifacts still exist): for the tests whose checks do not depend on its size."""
    path = tmp_path / "smaller.yaml"
    text = CONFIG.read_text(encoding="utf-8")
    cut = text.replace("generations: 3", "generations: 2").replace("population: 4", "population: 3")
    cut = cut.replace(", socratic-math-tutor]", "]")
    assert cut.count("\n") == text.count("\n") and cut != text
    path.write_text(cut, encoding="utf-8")
    return path
