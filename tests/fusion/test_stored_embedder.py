"""Embeddings kept by text hash in the home's live store: the model is used only for texts never seen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from furnace.fusion.embedding import HashEmbedder, StoredEmbedder, text_hash
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLVectors

REPO = Path(__file__).resolve().parents[2]


def _vectors(home: Path) -> SQLVectors:
    """The vector table of ``home``'s live store (``furnace.sqlite``), as a new process opens it."""
    return SQLVectors(SQLDatabase(sqlite_url(home), home=home))


class Counting:
    """An inner embedder that records what it was asked to embed."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(dim=16)
        self.name = "counting-16"
        self.asked: list[str] = []

    def embed(self, texts):
        self.asked.extend(texts)
        return self.inner.embed(texts)


def test_only_unseen_texts_reach_the_model_and_vectors_survive_the_process(tmp_path: Path) -> None:
    first = Counting()
    embedder = StoredEmbedder(first, _vectors(tmp_path))
    vectors = embedder.embed(["Answer briefly.", "Cite sources.", "Answer briefly."])
    assert first.asked == ["Answer briefly.", "Cite sources."]  # a repeated text is embedded once
    assert vectors[0] == vectors[2] == first.inner.embed(["Answer briefly."])[0]

    again = Counting()  # a new embedder (a new process would read the same table)
    other = StoredEmbedder(again, _vectors(tmp_path))
    assert other.embed(["Cite sources.", "Answer briefly.", "Be kind."]) == [
        vectors[1],
        vectors[0],
        again.inner.embed(["Be kind."])[0],
    ]
    assert again.asked == ["Be kind."]
    assert other.computed == 1


def test_vectors_are_kept_per_model(tmp_path: Path) -> None:
    vectors = _vectors(tmp_path)
    vectors.put_many("model-a", {text_hash("x"): [1.0, 0.0]})
    assert vectors.get_many("model-b", [text_hash("x")]) == {}
    assert vectors.get_many("model-a", [text_hash("x"), text_hash("y")]) == {text_hash("x"): [1.0, 0.0]}


_COLD = """
import sys
from furnace.adapters.minilm_embedder import MODEL_NAME, MiniLMEmbedder
from furnace.fusion.embedding import StoredEmbedder
from pathlib import Path
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLVectors

home = Path(sys.argv[1])
embedder = StoredEmbedder(MiniLMEmbedder(), SQLVectors(SQLDatabase(sqlite_url(home), home=home)))
print(len(embedder.embed(["Answer briefly.", "Cite sources."])), embedder.computed, "torch" in sys.modules)
"""


def test_a_cold_process_with_every_text_stored_never_imports_the_embedding_stack(tmp_path: Path) -> None:
    from furnace.adapters.minilm_embedder import MODEL_NAME

    stored = _vectors(tmp_path)
    stored.put_many(MODEL_NAME, {text_hash(t): [0.5] * 384 for t in ("Answer briefly.", "Cite sources.")})
    stored.db.close()
    out = subprocess.run(
        [sys.executable, "-c", _COLD, str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "0", "False"]


@pytest.mark.parametrize("texts", [[], ["only"]])
def test_empty_and_single_batches(tmp_path: Path, texts: list[str]) -> None:
    inner = Counting()
    embedder = StoredEmbedder(inner, _vectors(tmp_path))
    assert len(embedder.embed(texts)) == len(texts)
