"""Rank by meaning: which texts (members' profiles) are closest to a question.

:func:`rank_by_meaning` is the general helper: one ``embed`` call for the
question and the candidates, cosine similarity, most similar first, ties kept in
the candidates' order — so the result depends only on the texts and the
embedder, never on chance. With the real embedder (MiniLM) "birding" is near
"ornithology"; with the offline hash embedder the ranking is lexical (shared
words and character n-grams) but just as deterministic.

:func:`rank_members` applies it to an arena roster: each member's profile is its
name, identity and expertise (:func:`member_profile`). The bundled MiniLM is an
English model (Chinese text all looks alike to it), so where the question or a
profile has Chinese characters that pair is compared by shared terms instead
(words and character bigrams, :func:`lexical_overlap`): the share of the
question's terms the profile has.

The embedder is any object with ``embed(texts) -> vectors`` (the runtime's,
``furnace.fusion.embedding.Embedder``); it is passed in, never built here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from furnace.domain.elixir import Elixir
from furnace.domain.text import has_cjk, terms
from furnace.domain.vectors import cosine


class TextEmbedder(Protocol):
    """What ranking needs of an embedder: one vector per text, in order."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class LazyEmbedder:
    """An embedder built on its first ``embed`` call (the runtime's MiniLM loads its model: only a turn
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


def lexical_overlap(question: str, text: str) -> float:
    """The share of ``question``'s terms (words of 3+ letters, CJK character bigrams) that ``text`` has."""
    wanted = terms(question, min_len=3)
    return round(len(wanted & terms(text, min_len=3)) / len(wanted), 6) if wanted else 0.0


def rank_members(question: str, members: Sequence[Elixir], embedder: TextEmbedder) -> list[tuple[str, float]]:
    """``(member id, relevance)`` for each member, most relevant to ``question`` first (ties: member order).

    Relevance is the embedder's cosine similarity, or :func:`lexical_overlap` for a pair with Chinese text."""
    profiles = [member_profile(e) for e in members]
    semantic = [i for i, p in enumerate(profiles) if not has_cjk(question) and not has_cjk(p)]
    scores = {i: lexical_overlap(question, p) for i, p in enumerate(profiles) if i not in semantic}
    for ranked in rank_by_meaning(question, [profiles[i] for i in semantic], embedder):
        scores[semantic[ranked.index]] = ranked.score
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return [(members[i].id, scores[i]) for i in order]
