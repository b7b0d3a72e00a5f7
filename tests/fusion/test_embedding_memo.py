"""The hash embedder's memoised word terms give the vectors of the plain feature-by-feature sum, bit for bit."""

from __future__ import annotations

import hashlib
import math
import unicodedata

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from furnace import resources
from furnace.fusion.embedding import _WORD, HashEmbedder, _features


def _reference(text: str, dim: int) -> list[float]:
    """The embedder as first written: every feature of the text hashed and added in order."""
    vec = [0.0] * dim
    for feat, weight in _features(text):
        digest = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[index] += sign * weight
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else vec


def _library_texts() -> list[str]:
    texts = []
    for path in sorted(resources.LIBRARY_DIR.glob("*.yaml")):
        raw = path.read_text(encoding="utf-8")
        texts.append(raw)
        texts.extend(str(v) for v in yaml.safe_load(raw).values())
    return texts


def test_library_texts_embed_exactly_as_the_plain_sum() -> None:
    texts = [*_library_texts(), "", "  ", "回答要简短一些 Answer briefly.", "ÉCOLE école Straße ﬁx", "a" * 300]
    for dim in (256, 64):
        embedder = HashEmbedder(dim)
        for text in texts:
            assert embedder.embed([text])[0] == _reference(text, dim), text[:60]


def test_features_are_the_words_features_in_order() -> None:
    text = "Cite sources, 回答要简短 and don't ramble."
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    assert words == ["cite", "sources", "回答要简短", "and", "don't", "ramble"]
    assert [f for f, _ in _features(text)][:2] == ["w:cite", "g: ci"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_any_text_embeds_exactly_as_the_plain_sum(text: str) -> None:
    assert HashEmbedder(32).embed([text])[0] == _reference(text, 32)
