"""What several experiment test files share: the small experiment cut down further."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFIG = Path(__file__).parent / "data" / "small.yaml"


def write_smaller(path: Path) -> Path:
    """CONFIG cut to a population of 3 and 2 generations of children after the seeds (so parent edges, caching
    and per-generation artifacts still exist), written to ``path``."""
    text = CONFIG.read_text(encoding="utf-8")
    cut = text.replace("generations: 3", "generations: 2").replace("population: 4", "population: 3")
    cut = cut.replace(", socratic-math-tutor]", "]")
    assert cut.count("\n") == text.count("\n") and cut != text
    path.write_text(cut, encoding="utf-8")
    return path


@pytest.fixture()
def smaller(tmp_path) -> Path:
    """The smaller experiment (:func:`write_smaller`): for the tests whose checks do not depend on its size."""
    return write_smaller(tmp_path / "smaller.yaml")
