"""Routing by meaning: the committee member whose profile a message is nearest to.

A member's *profile* is a few short texts: its name, its identity and each expertise item
(:func:`profile_texts`). A message's score for a member is the mean of its two best cosine
similarities to those texts (one strong match counts, a second one breaks ties), computed
with the embedder passed in on both sides *glossed into English*
(:func:`furnace.fusion.gloss.to_english`: the shipped MiniLM model is English-trained and
reads Chinese little better than by its characters, so a Chinese question, a member described
in Chinese, or both, are compared in the embedder's language), plus :data:`LEXICAL_WEIGHT`
times the same score with the lexical :class:`~furnace.fusion.embedding.HashEmbedder` on the
texts as written (shared words and CJK characters).

Deterministic (no randomness, ties go to the earlier member) and cheap: one embedding of the
message per routing; profile vectors are embedded once per (embedder, text) and kept in a
small process-wide cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from furnace.fusion.embedding import Embedder, HashEmbedder, cosine
from furnace.fusion.gloss import to_english

LEXICAL_WEIGHT = 0.5
TOP = 2
MAX_CACHED = 8192

_LEXICAL = HashEmbedder()
_PROFILE_VECTORS: dict[tuple[str, str], list[float]] = {}


def profile_texts(member: Mapping[str, Any]) -> list[str]:
    """The texts a member is routed by: name, identity (when known) and each expertise item, once each."""
    texts = [str(member.get("name") or ""), str(member.get("identity") or "")]
    texts += [str(x) for x in member.get("expertise") or ()]
    return list(dict.fromkeys(" ".join(t.split()) for t in texts if t.strip()))


def _profile_vectors(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """The vectors of profile texts, each embedded once per embedder (by its name) in this process."""
    missing = [t for t in dict.fromkeys(texts) if (embedder.name, t) not in _PROFILE_VECTORS]
    if missing:
        if len(_PROFILE_VECTORS) + len(missing) > MAX_CACHED:
            _PROFILE_VECTORS.clear()  # a bound, not an eviction policy: profiles are few and re-embedded cheaply
        for text, vector in zip(missing, embedder.embed(missing), strict=True):
            _PROFILE_VECTORS[(embedder.name, text)] = vector
    return [_PROFILE_VECTORS[(embedder.name, t)] for t in texts]


def _score(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> float:
    best = sorted((cosine(query, v) for v in vectors), reverse=True)[:TOP]
    return sum(best) / len(best) if best else 0.0


@dataclass(frozen=True)
class MeaningRoute:
    """The nearest member (an index into the members given) and every member's score, in order."""

    index: int
    scores: tuple[float, ...]

    @property
    def runner_up(self) -> int | None:
        """The second-best member's index (``None`` for a committee of one)."""
        others = [i for i in range(len(self.scores)) if i != self.index]
        return max(others, key=lambda i: (self.scores[i], -i)) if others else None


def route_by_meaning(message: str, members: Sequence[Mapping[str, Any]], embedder: Embedder) -> MeaningRoute:
    """The member (``{"name", "identity"?, "expertise"}``) whose profile ``message`` is nearest to."""
    if not members:
        raise ValueError("no members to route to")
    profiles = [profile_texts(m) for m in members]
    (query,) = embedder.embed([to_english(message)])
    (lexical,) = _LEXICAL.embed([message])
    scores = [
        _score(query, _profile_vectors(embedder, [to_english(t) for t in texts]))
        + LEXICAL_WEIGHT * _score(lexical, _profile_vectors(_LEXICAL, texts))
        for texts in profiles
    ]
    best = max(range(len(members)), key=lambda i: (scores[i], -i))
    return MeaningRoute(best, tuple(round(s, 4) for s in scores))
