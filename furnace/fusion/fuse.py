"""fuse() and promote(): the furnace's entry points.

``fuse`` loads the parents (a withdrawn parent → :class:`LineageError`), refuses
hard conflicts (:class:`ConflictError`, nothing stored), picks the operator
(explicit; else mutation for one parent; else ensemble when the parents'
expertise Jaccard distance exceeds ``ensemble_threshold``; else crossover),
fixes the lineage params (everything that shapes the result), and only then
looks in the synthesis cache under ``synth:{lineage_hash}``. A hit costs no
model call; a miss runs the operator once (single-flight), renders the prompt,
and stores the agent with its persona and edges (its rows made before the
write lock), the sub-results the operator computed and the value
(insert-if-absent) in one transaction of the store (``atomically``): all of it
or nothing.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from furnace.domain.agent import Agent, agent_id_for
from furnace.domain.elixir import Elixir, ElixirRef, parse_elixir, slugify
from furnace.domain.errors import InputError, LineageError, NotFound
from furnace.domain.lineage import Lineage
from furnace.domain.render import render_prompt
from furnace.domain.threads import Thread, background
from furnace.fusion.embedding import Embedder
from furnace.fusion.operators import OPERATORS, OperatorContext, expertise_distance
from furnace.fusion.operators.conflicts import check_hard_conflicts
from furnace.fusion.operators.prompts import answer_versions
from furnace.fusion.synthesis import Found, SubResultCache, SynthesisCache, synth_key
from furnace.llm.seam import LLM
from furnace.settings import FurnaceSettings
from furnace.storage.store import ElixirStore

log = logging.getLogger("furnace.fusion.fuse")

PROMOTE_OPERATOR = "promote"
PROMOTE_VERSION = "1"


@dataclass(frozen=True)
class FusionResult:
    """The agent, whether it came from the synthesis cache, and the model calls it cost."""

    agent: Agent
    from_cache: bool
    model_calls: int = 0


def _load_one(store: ElixirStore, parent: str | ElixirRef) -> Elixir:
    if isinstance(parent, str) and "@" in parent:
        id_, _, version = parent.rpartition("@")
        if not version.isdigit():
            raise InputError(f"bad parent reference {parent!r} (expected id or id@version)", field="parents")
        parent = store.get_elixir(id_, int(version)).ref
    return store.load_for_fusion(parent)


def load_parents(store: ElixirStore, parents: Sequence[str | ElixirRef]) -> list[Elixir]:
    """Load each parent for fusion (``id``, ``id@version`` or a ref), in the given order; withdrawn →
    LineageError. The first parent that fails raises."""
    loaded = [_load_one(store, p) for p in parents]
    ids = [e.ref for e in loaded]
    if len(set(ids)) != len(ids):
        raise InputError("the same elixir version is listed twice as a parent", field="parents")
    return loaded


def choose_operator(parents: Sequence[Elixir], settings: FurnaceSettings) -> str:
    """mutation for one parent; ensemble when expertise is far apart; else crossover."""
    if len(parents) == 1:
        return "mutation"
    return "ensemble" if expertise_distance(parents) > settings.ensemble_threshold else "crossover"


_FIXED_PARAMS = frozenset({"model", "engine", "prompts", "embedder", "seed"})  # set by furnace, not by a user


def lineage_params(
    operator: str, *, llm: LLM, embedder: Embedder, seed: int, params: dict[str, Any] | None, settings: FurnaceSettings
) -> dict[str, Any]:
    """Every param that shapes the result (defaults filled in; unknown keys refused)."""
    op = OPERATORS[operator]
    base: dict[str, Any] = {"seed": int(seed), "model": llm.model_name, **answer_versions(llm)}
    if op.min_parents > 1:
        base.update(
            embedder=embedder.name,
            similarity_threshold=settings.similarity_threshold,
            ensemble_threshold=settings.ensemble_threshold,
        )
    base.update(op.param_defaults())
    for key, value in (params or {}).items():
        if key not in base or key in _FIXED_PARAMS:
            allowed = sorted(set(base) - _FIXED_PARAMS)
            raise InputError(
                f"unknown param {key!r} for {operator} (allowed: {', '.join(allowed) or 'none'})", field="params"
            )
        base[key] = value
    return base


def _value(agent: Agent) -> dict[str, Any]:
    return {
        "prompt": agent.system_prompt,
        "tools": list(agent.tools),
        "lineage_hash": agent.lineage_hash,
        "op_version": agent.lineage.op_version,
        "built_at": (agent.created_at or datetime.now(UTC)).isoformat(),
        "agent": agent.model_dump(mode="json"),
    }


def _agent_from_value(value: dict[str, Any], lineage_hash: str) -> Agent | None:
    """The cached agent; None for an entry that is not one (corrupted: a miss); LineageError if altered."""
    try:
        agent = Agent.model_validate(value["agent"])
    except (KeyError, TypeError, ValueError):  # pydantic's ValidationError is a ValueError
        log.warning("synth:%s: cached entry is not a valid agent; rebuilding", lineage_hash[:12])
        return None
    if agent.lineage_hash != lineage_hash or agent.system_prompt != value.get("prompt"):
        raise LineageError(f"synth:{lineage_hash[:12]}…: cached agent does not match its key (altered cache row)")
    return agent


def plan_fusion(
    store: ElixirStore,
    parents: Sequence[str | ElixirRef],
    *,
    llm: LLM,
    embedder: Embedder,
    operator: str | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    settings: FurnaceSettings | None = None,
) -> tuple[list[Elixir], Lineage]:
    """What :func:`fuse` would make, before any model call: the parents (each resolved to the version
    read now) and the child's lineage (parents' refs with their content hashes, operator and its version,
    every param that shapes the result, the model among them). Its ``lineage_hash`` names the child;
    bad input raises here."""
    settings = settings or FurnaceSettings.model_construct()  # defaults only: core code reads no environment
    if not parents:
        raise InputError("fuse needs at least one parent", field="parents")
    loaded = load_parents(store, parents)
    check_hard_conflicts(loaded)
    name = operator or choose_operator(loaded, settings)
    if name not in OPERATORS:
        raise InputError(f"unknown operator {name!r} (have {', '.join(sorted(OPERATORS))})", field="operator")
    op = OPERATORS[name]
    if len(loaded) < op.min_parents or (op.max_parents is not None and len(loaded) > op.max_parents):
        most = op.max_parents if op.max_parents is not None else "any"
        raise InputError(f"{name} takes {op.min_parents}..{most} parents, got {len(loaded)}", field="parents")
    fixed = lineage_params(name, llm=llm, embedder=embedder, seed=seed, params=params, settings=settings)
    return loaded, Lineage(parents=tuple(p.ref for p in loaded), operator=name, params=fixed, op_version=op.op_version)


class _Raced(Exception):
    """Another build's synthesis entry won while this transaction stored its own agent: rolled back."""

    def __init__(self, winner: dict[str, Any]) -> None:
        super().__init__("another build's entry won")
        self.winner = winner


def _persisted_with(
    store: ElixirStore,
    cache: SynthesisCache,
    entries: list[tuple[str, dict[str, Any], float | None]],
    value: dict[str, Any],
    mine: Agent,
    lineage_hash: str,
    persist: Callable[[Agent], tuple[Agent, bool]],
) -> tuple[dict[str, Any], list[Agent]]:
    """Store a new build in one transaction: the agent first (on the live store its rows are planned before
    the write lock, which its insert takes), then the sub-results and the entry ``value`` (insert-if-absent).
    The stored entry and the stored agent agree: when another build's entry won the insert after this
    transaction stored its own agent, it is rolled back and run again with the winner's agent (the build
    that wrote the entry stored its agent with it, or this run stores the winner's). Returns the stored
    entry and ``[the stored agent]``."""
    expected: dict[str, Any] | None = None  # the entry taken as the one that wins (None: this build's)

    def work() -> tuple[dict[str, Any], list[Agent]]:
        theirs = None if expected is None else _agent_from_value(expected, lineage_hash)
        agent, stored_here = persist(theirs or mine)
        winner = cache.kv.put_many_if_absent(entries)[-1]
        if stored_here and winner != (value if expected is None else expected):
            raise _Raced(winner)
        return winner, [agent]

    for _ in range(3):  # each run again needs yet another entry to have won meanwhile (an expired one replaced)
        try:
            return store.atomically(work)
        except _Raced as raced:
            expected = raced.winner
    raise RuntimeError(f"synth:{lineage_hash[:12]}: the cache entry changed under three stores in a row")


def fuse(
    store: ElixirStore,
    parents: Sequence[str | ElixirRef],
    *,
    llm: LLM,
    embedder: Embedder,
    cache: SynthesisCache,
    operator: str | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    settings: FurnaceSettings | None = None,
) -> FusionResult:
    """Fuse ``parents`` into an agent (through the synthesis cache) and persist it."""
    loaded, plan = plan_fusion(
        store, parents, llm=llm, embedder=embedder, operator=operator, seed=seed, params=params, settings=settings
    )
    op, fixed = OPERATORS[plan.operator], plan.params
    lineage_hash = plan.lineage_hash
    agent_id = agent_id_for(lineage_hash)
    calls = [0]
    subcache = SubResultCache(cache.kv, cache.ttl_s, defer=True)  # stored with the agent (``put``)
    stored_before: list[Agent] = []  # the agent, when the store held it already
    saved: list[Agent] = []  # the agent as this build's transaction left it in the store

    made: list[Agent] = []  # the agent this build made

    def stored_or_none() -> Agent | None:
        try:
            return store.stored_child(agent_id, plan.parents)  # persisted earlier; the cache had expired
        except NotFound:
            return None

    rebuilding = [False]  # a corrupted cache entry is rebuilt: the entry read again is not a hit

    def cached_or_none() -> dict[str, Any] | None:
        return None if rebuilding[0] else cache.kv.get(synth_key(lineage_hash))

    def build() -> dict[str, Any]:
        # the cache entry and "is it stored already?" are read before the operator runs: an entry (served as
        # a hit), a stored agent (served without writing it again) or a tampered one stops it before any call
        hit, found = cached_or_none(), stored_or_none()
        if found is not None:
            stored_before[:] = [found]
        if hit is not None:
            raise Found(hit)  # served as a cache hit
        if found is not None:
            return _value(found)
        ctx = OperatorContext(
            llm=llm,
            embedder=embedder,
            rng=random.Random(seed),
            params=dict(fixed),
            child_id=agent_id,
            subcache=subcache,
        )
        result = op.apply(loaded, ctx)
        calls[0] = ctx.model_calls
        lineage = plan.model_copy(update={"resolution_notes": tuple(result.notes)})
        agent = Agent(
            id=agent_id,
            elixir=result.child,
            lineage=lineage,
            system_prompt=render_prompt(result.child),
            tools=tuple(result.child.tools),
            members=result.members,
            created_at=datetime.now(UTC),
        )
        made[:] = [agent]
        return _value(agent)

    def persist(agent: Agent) -> tuple[Agent, bool]:
        """(In the transaction.) The agent as the store holds it once saved, and whether this call saved it.
        On the live store its rows are built and sealed before the write lock is taken: ``atomically``
        begins the transaction at its first write, and this save is the first (see :func:`_persisted_with`)."""
        if stored_before:
            return stored_before[0], False
        if store.save_agent(agent):
            return agent, True
        return store.get_agent(agent_id), False  # it was there already: the stored (verified) one

    def put(key: str, value: dict[str, Any]) -> dict[str, Any]:
        """A new build's writes, one transaction: agent (with persona and edges), sub-results, cache entry."""
        mine = made[0] if made else _agent_from_value(value, lineage_hash)
        assert mine is not None  # this build's own value is an agent
        entries = [*subcache.entries(), (key, value, cache.ttl_s)]
        winner, saved[:] = _persisted_with(store, cache, entries, value, mine, lineage_hash, persist)
        cache.mark_persisted(store, lineage_hash)  # before the threads waiting on this build look
        return winner

    value, from_cache = cache.get_or_build(lineage_hash, build, put=put, read=False)
    if saved:  # built and stored here
        return FusionResult(agent=saved[0], from_cache=from_cache, model_calls=calls[0])
    agent = _agent_from_value(value, lineage_hash)
    if agent is None:  # a corrupted cache entry counts as a miss (it is not replaced: rows are insert-if-absent)
        rebuilding[0] = True
        built = _agent_from_value(build(), lineage_hash)
        assert built is not None
        agent, from_cache = built, False
    if not cache.known_persisted(store, lineage_hash):  # make sure this store holds the agent
        kept, entries = agent, subcache.entries()  # (sub-results: only when rebuilt here, after a corrupted entry)

        def work() -> Agent:
            stored = persist(kept)[0]  # first: its rows are planned before the write lock (see persist)
            cache.kv.put_many_if_absent(entries)
            return stored

        agent = stored_before[0] if stored_before and not entries else store.atomically(work)
        cache.mark_persisted(store, lineage_hash)
    return FusionResult(agent=agent, from_cache=from_cache, model_calls=calls[0])


def promote(store: ElixirStore, agent_id: str, name: str | None = None) -> ElixirRef:
    """Copy an agent's child elixir into the library (keeping a lineage edge)."""
    agent = store.get_agent(agent_id)
    name = (name or agent.elixir.name).strip()
    new_id = slugify(name)
    data = agent.elixir.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})
    data.update(id=new_id, name=name)
    elixir = parse_elixir(data)
    try:
        existing = store.get_elixir(new_id)
    except NotFound:
        existing = None
    if existing is not None and existing.content_hash != elixir.content_hash:
        lineage_ids = {n.id for n in store.ancestors(new_id)}
        if agent_id not in lineage_ids:
            raise InputError(f"an elixir named {new_id!r} already exists; choose another name (--name)", field="name")
    ref = store.save_elixir(elixir, origin="library")
    store.add_edge(agent_id, new_id, operator=PROMOTE_OPERATOR, op_version=PROMOTE_VERSION, parent_version=None)
    return ref


def prewarm(store: ElixirStore, agent_ids: Iterable[str], cache: SynthesisCache) -> Thread:
    """Fill the synthesis cache for stored agents in a background thread.

    Never blocks the caller and never raises: each failure is logged and skipped.
    """
    ids = list(agent_ids)

    def work() -> None:
        for agent_id in ids:
            try:
                agent = store.get_agent(agent_id)
                cache.get_or_build(agent.lineage_hash, partial(_value, agent))
            except Exception as err:
                log.warning("pre-warm of %s failed: %s: %s", agent_id, err.__class__.__name__, err)

    return background(work, name="furnace-prewarm")


def cached_prompt(agent: Agent, cache: SynthesisCache) -> str:
    """``agent``'s system prompt as the synthesis cache holds it (``synth:{lineage_hash}``).

    Served from the cache's in-process memo once pre-warmed (:func:`prewarm`); on a miss the entry is
    filled from the stored agent, as a pre-warm does (no model call). A cached entry that does not match
    its key raises :class:`LineageError`; an entry that is not an agent is ignored (the stored prompt)."""
    value, _ = cache.get_or_build(agent.lineage_hash, partial(_value, agent))
    cached = _agent_from_value(value, agent.lineage_hash)
    return cached.system_prompt if cached is not None else agent.system_prompt
