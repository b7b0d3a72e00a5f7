"""The embeddings seam: a small protocol, cosine similarity and a lexical fallback.

Operators compare texts (principles) through an :class:`Embedder` passed in as an
argument. The real embedder is ``furnace.adapters.minilm_embedder.MiniLMEmbedder``
(all-MiniLM-L6-v2, semantic); :class:`HashEmbedder` is the deterministic,
dependency-free fallback used only when that package is absent. The fallback is
*lexical*: it sees shared words and character n-grams, not meaning, so
"Answer briefly." and "Keep your answers short." stay apart with it.
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
import unicodedata
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

from furnace.domain.guarded import Guarded, serialized
from furnace.domain.vectors import cosine as cosine  # its home is the domain; fusion callers import it here
from furnace.storage.protocols import VectorStore as VectorStore  # declared with every store protocol

_WORD = re.compile(r"[\w']+", re.UNICODE)
_CJK = re.compile(r"[\u4e00-\u9fff]")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; ``name`` goes into lineage params."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


class MemoryVectors(Guarded):
    """:class:`VectorStore` in this process's memory (one coarse lock): e.g. a Dask worker's, which
    never opens the store, so that the units it runs embed each text once."""

    def __init__(self) -> None:
        self._vectors: dict[tuple[str, str], list[float]] = {}

    @serialized
    def get_many(self, model: str, text_hashes: Sequence[str]) -> dict[str, list[float]]:
        return {h: v for h in text_hashes if (v := self._vectors.get((model, h))) is not None}

    @serialized
    def put_many(self, model: str, vectors: Mapping[str, Sequence[float]]) -> None:
        for h, v in vectors.items():
            self._vectors.setdefault((model, h), list(v))


def text_hash(text: str) -> str:
    """The key of a text's vector: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StoredEmbedder:
    """An embedder whose vectors are kept in a store by text hash: ``inner`` (and whatever it
    loads -- a model) is used only for texts never embedded before."""

    def __init__(self, inner: Embedder, vectors: VectorStore) -> None:
        self.inner = inner
        self.vectors = vectors
        self.name = inner.name
        self.computed = 0  # texts the inner embedder had to embed (observable)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; only unseen texts reach the inner embedder."""
        texts = list(texts)
        keys = [text_hash(t) for t in texts]
        found = self.vectors.get_many(self.name, list(dict.fromkeys(keys)))
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if missing:
            fresh = dict(zip(missing, self.inner.embed(list(missing.values())), strict=True))
            self.computed += len(fresh)
            self.vectors.put_many(self.name, fresh)
            found.update(fresh)
        return [list(found[k]) for k in keys]


def _features(text: str) -> list[tuple[str, float]]:
    """Weighted features: words (weight 1), CJK characters and bigrams, char trigrams (0.5)."""
    norm = unicodedata.normalize("NFKC", text).casefold()
    feats: list[tuple[str, float]] = []
    for word in _WORD.findall(norm):
        feats.extend(_word_features(word))
    return feats


def _word_features(word: str) -> list[tuple[str, float]]:
    """The weighted features of one normalised word, in order (see :func:`_features`)."""
    if _CJK.search(word):
        chars = [c for c in word]
        return [(f"c:{c}", 0.5) for c in chars] + [(f"b:{x}{y}", 1.0) for x, y in zip(chars, chars[1:], strict=False)]
    padded = f" {word} "
    return [(f"w:{word}", 1.0)] + [(f"g:{padded[i : i + 3]}", 0.5) for i in range(len(padded) - 2)]


class HashEmbedder:
    """Deterministic hashed bag of words and character n-grams, L2-normalised.

    Stable across processes and platforms (blake2b, not Python's salted ``hash``).
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-ngram-{dim}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed each text; an empty text gives the zero vector."""
        return [list(_hashed(t, self.dim)) for t in texts]


@lru_cache(maxsize=65536)
def _word_terms(word: str, dim: int) -> tuple[tuple[int, float], ...]:
    """What one normalised word adds to a vector: ``(index, signed weight)`` per feature, in feature
    order (memoised: a persona's prompt is mostly words every other prompt has)."""
    terms = []
    for feat, weight in _word_features(word):
        digest = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
        sign = 1.0 if digest[4] & 1 else -1.0
        terms.append((int.from_bytes(digest[:4], "little") % dim, sign * weight))
    return tuple(terms)


@lru_cache(maxsize=8192)
def _hashed(text: str, dim: int) -> tuple[float, ...]:
    """The hashed vector of one text (memoised: the same principles recur across fusions). Each
    feature's term is added in text order, so the vector is the same to the last bit as adding the
    features one by one."""
    vec = [0.0] * dim
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        for index, term in _word_terms(word, dim):
            vec[index] += term
    norm = math.sqrt(sum(map(operator.mul, vec, vec)))
    return tuple(x / norm for x in vec) if norm else tuple(vec)
