"""An agent or an elixir answers a conversation: the one path behind ``furnace agent answer`` and
``furnace agent serve``.

- **An agent** speaks with its system prompt as the synthesis cache holds it
  (:func:`~furnace.fusion.fuse.cached_prompt`, pre-warmed by the server); a **committee** (an
  ensemble agent, ``agent.members`` set) goes through the ensemble router
  (:func:`furnace.fusion.operators.ensemble.answer`): given an embedder (the server and the CLI give
  theirs) it picks the member who leads by meaning, with no model call (without one, a ROUTE call
  picks), who answers the last message in its own voice (the router takes no earlier turns).
- **An elixir** (``id`` or ``id@version``, a withdrawn one is not found) speaks with its rendered
  prompt.

Every call goes through the ``llm`` it is given (the runtime's :class:`~furnace.llm.cache.CachedLLM`:
response cache and call ledger); :class:`AgentAnswer` carries what those calls reported as ``usage``
(a cache hit reports the tokens of the stored answer; the ledger records what was spent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from furnace.arena.speaker import ContextBuilder, HistoryTurn, persona_from_elixir, speak
from furnace.domain.agent import AGENT_PREFIX, Agent
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import InputError, NotFound
from furnace.fusion.embedding import Embedder
from furnace.fusion.fuse import cached_prompt
from furnace.fusion.operators.ensemble import answer as committee_answer
from furnace.fusion.synthesis import SynthesisCache
from furnace.llm.seam import LLM, Completion, LLMRequest, Message, Usage
from furnace.storage.store import ElixirStore

Speaker = Agent | Elixir


@dataclass(frozen=True)
class AgentAnswer:
    """What a speaker said: the text, who led (committees), the calls it took and their usage. ``calls``
    are model calls (as everywhere in furnace's records); the calls the response cache served are
    ``cached_calls``; ``usage`` sums both."""

    speaker: str  # the agent's id or the elixir's ref (id@version)
    text: str
    model: str  # the model that answered (the last call's)
    usage: Usage
    calls: int
    leader: ElixirRef | None = None
    leader_name: str | None = None
    reason: str | None = None
    fallback: bool = False
    cached_calls: int = 0

    def transcript(self) -> dict[str, Any]:
        """The record of the turn: who led (None for a single persona), why, and what was said."""
        return {
            "leader": str(self.leader) if self.leader is not None else None,
            "leader_name": self.leader_name,
            "reason": self.reason,
            "fallback": self.fallback,
            "text": self.text,
        }


class _Tally:
    """Sums the usage of the calls made through it (one answer's calls run one after another): model
    calls and cache hits apart."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner  # wrappers are walked through ``inner`` (answer traits)
        self.model_name = inner.model_name
        self.model = inner.model_name
        self.calls = self.cached_calls = self.prompt_tokens = self.completion_tokens = 0

    def complete(self, request: LLMRequest) -> Completion:
        completion = self.inner.complete(request)
        if completion.cached:
            self.cached_calls += 1
        else:
            self.calls += 1
        self.prompt_tokens += completion.usage.prompt_tokens
        self.completion_tokens += completion.usage.completion_tokens
        self.model = completion.model
        return completion

    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)


def speaker_name(speaker: Speaker) -> str:
    """The id a speaker answers under: the agent's id, or the elixir's ``id@version``."""
    return speaker.id if isinstance(speaker, Agent) else str(speaker.ref)


def load_speaker(store: ElixirStore, speaker_id: str) -> Speaker:
    """The agent (``agt-…``) or elixir (``id``: latest version, or ``id@version``) named by ``speaker_id``.

    Raises NotFound for an unknown id or a withdrawn elixir, InputError for a malformed version."""
    text = speaker_id.strip()
    if text.startswith(AGENT_PREFIX):
        return store.get_agent(text)
    id_, sep, version = text.partition("@")
    if sep and (not version.isdigit() or int(version) < 1):
        raise InputError(f"expected ID or ID@VERSION, got {speaker_id!r}", field="model")
    if not id_:
        raise NotFound(f"no agent or elixir {speaker_id!r}")
    elixir = store.get_elixir(id_, int(version) if sep else None)
    if elixir.withdrawn:
        raise NotFound(f"elixir {elixir.ref} is withdrawn")
    return elixir


def _history(member_id: str, turns: Sequence[Message]) -> list[HistoryTurn]:
    """Earlier turns as the persona pipeline reads them (system messages are the persona's own: dropped)."""
    return [
        HistoryTurn(text=m.content, speaker_id=member_id if m.role == "assistant" else None)
        for m in turns
        if m.role != "system" and m.content.strip()
    ]


def answer_as(
    speaker: Speaker,
    message: str,
    llm: LLM,
    *,
    store: ElixirStore,
    cache: SynthesisCache | None = None,
    history: Sequence[Message] = (),
    context: ContextBuilder | None = None,
    seed: int = 0,
    embedder: Embedder | None = None,
) -> AgentAnswer:
    """``speaker`` answers ``message`` after ``history`` (earlier turns; a committee reads only ``message``).

    ``cache``: where an agent's system prompt is read from (the synthesis cache); without one, the
    prompt stored with the agent. ``context``: how the history is fitted to the model's context (the
    persona pipeline's token-aware default when None). ``embedder``: a committee routes by meaning with it
    (no ROUTE call); without one, the router asks the model. An empty message is an InputError."""
    if not message.strip():
        raise InputError("the message must not be empty", field="message")
    tally = _Tally(llm)
    if isinstance(speaker, Agent) and speaker.members:
        members = [store.get_elixir(ref.id, ref.version) for ref in speaker.members]
        out = committee_answer(speaker, message, tally, members, seed=seed, embedder=embedder)
        return AgentAnswer(
            speaker.id,
            out.text,
            tally.model,
            tally.usage(),
            tally.calls,
            leader=out.leader,
            leader_name=out.leader_name,
            reason=out.reason,
            fallback=out.fallback,
            cached_calls=tally.cached_calls,
        )
    if isinstance(speaker, Agent):
        prompt = cached_prompt(speaker, cache) if cache is not None else speaker.system_prompt
        persona = persona_from_elixir(speaker.elixir, member_id=speaker.id, system_prompt=prompt)
    else:
        persona = persona_from_elixir(speaker)
    turns = _history(persona.member_id, history)
    text = speak(persona, message, llm=tally, history=turns, context=context, seed=seed).text
    return AgentAnswer(
        speaker_name(speaker), text, tally.model, tally.usage(), tally.calls, cached_calls=tally.cached_calls
    )
