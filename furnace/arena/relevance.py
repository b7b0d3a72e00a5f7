"""Rank by meaning: which texts (members' profiles) are closest to a question.

:func:`rank_by_meaning` is the general helper: one ``embed`` call for the
question and the candidates, cosine similarity, most similar first, ties kept in
the candidates' order — so the result depends only on the texts and the
embedder, never on chance. With the real embedder (MiniLM) "birding" is near
"ornithology"; with the offline hash embedder the ranking is lexical (shared
words and character n-grams) but just as deterministic.

:func:`rank_members` applies it to an arena roster: each member's profile is its
name, identity and expertise (:func:`member_profile`).

The embedder is any object with ``embed(texts) -> vectors`` (the runtime's,
``furnace.fusion.embedding.Embedder``); it is passed in, never built here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from furnace.domain.elixir import Elixir
from furnace.domain.vectors import cosine


class TextEmbedder(Protocol):
    """What ranking needs of an embedder: one vector per text, in order."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class LazyEmbedder:
    """An embedder built on its first ``embed`` call (the runtime's MiniLM loads torch: only a turn
    that ranks members pays for it, never ``arena list``)."""

    def __init__(self, build: Callable[[], TextEmbedder]) -> None:
        self._build = build

    @cached_property
    def inner(self) -> TextEmbedder:
        return self._build()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, by the embedder ``build`` returns."""
        return self.inner.embed(texts)


@dataclass(frozen=True)
class Ranked:
    """One candidate's place: its index among the candidates and its similarity to the question."""

    index: int
    score: float


def rank_by_meaning(question: str, candidates: Sequence[str], embedder: TextEmbedder) -> list[Ranked]:
    """``candidates`` by cosine similarity to ``question``, most similar first (ties: candidates' order).

    Scores are rounded to 6 places before sorting, so float noise between embedder runs cannot
    swap two equally close candidates."""
    if not candidates:
        return []
    vectors = embedder.embed([question, *candidates])
    if len(vectors) != len(candidates) + 1:
        raise ValueError(f"the embedder gave {len(vectors)} vectors for {len(candidates) + 1} texts")
    query, rest = vectors[0], vectors[1:]
    scored = [Ranked(index=i, score=round(cosine(query, v), 6)) for i, v in enumerate(rest)]
    return sorted(scored, key=lambda r: (-r.score, r.index))


def member_profile(elixir: Elixir) -> str:
    """What a member is about, as one text: name, identity and expertise."""
    return f"{elixir.name}. {elixir.identity} {'; '.join(elixir.expertise)}."


def rank_members(question: str, members: Sequence[Elixir], embedder: TextEmbedder) -> list[tuple[str, float]]:
    """``(member id, similarity)`` for each member, most relevant to ``question`` first."""
    ranked = rank_by_meaning(question, [member_profile(e) for e in members], embedder)
    return [(members[r.index].id, r.score) for r in ranked]
