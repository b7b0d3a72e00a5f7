"""Units in other processes (Dask workers): the worker never opens the store, the driver writes.

A unit (one individual: fuse, answer the probes, judge) runs in a worker with what it needs
as plain data (:class:`World` once per run, :class:`Job` per unit: the parents the driver
loaded and verified, its population's ids and prompts) and memory-only collaborators, built
once per worker and run (:class:`_Kit`: the model clients and their slots, served in the
driver's order, an in-memory response cache, a synthesis cache, the embedder and the vectors
it computed; the probes' threads are the process's) plus, per unit, a call ledger and a store
that holds just the parents. It returns an :class:`Outcome`: its record, its call-ledger
rows, the response-cache and synthesis-cache entries it made, the agent it bred and its trace
(recorded spans). The driver applies an outcome in its main thread (:class:`Sink`): ledger rows first, then the
caches, the agent, the trace and the run's meter, and then the loop writes the record as for
any runner. So the store keeps one writer, totals come from the ledger as everywhere else,
and a rerun makes no model call (the completions are in the driver's response cache).

Identical to the in-process runner for the same seed: the same plans are made in the same
order by the driver (``scheduler.Schedule``), and each unit computes the same thing from the same
inputs. The caveat: a request repeated by two units running at once in different workers is a
model call in each (in one process the second is served by the cache); a run's units rarely
repeat a request (0 repeats in the shipped experiments). The driver reserves ``max_calls`` for each
unit before sending it (``scheduler.Schedule``) and a unit never makes more calls than it reserved; a
unit run here is credited with the calls it made itself (the driver sees no request keys).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, TypeVar

from furnace.domain.agent import AGENT_PREFIX, Agent
from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import FurnaceError, NotFound
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import Flights, PerKey, PrioritySlots, pool
from furnace.evolution.breeding import FusionBreeder
from furnace.evolution.config import ExperimentConfig
from furnace.evolution.engine import Embedder, Evolution
from furnace.evolution.records import IndividualRecord, MemoryResults
from furnace.evolution.tracker import NullTracker
from furnace.evolution.units import Unit, UnitFuture
from furnace.fusion.embedding import MemoryVectors, StoredEmbedder
from furnace.fusion.synthesis import KV, MemoryKV, SynthesisCache, synth_key
from furnace.llm.cache import (
    CachedLLM,
    CallLedger,
    CallRecord,
    CallTotals,
    MemoryCallLedger,
    MemoryResponseCache,
)
from furnace.llm.seam import LLM, Completion, LLMRequest, TaskKind
from furnace.scoring.probes import ProbeSet
from furnace.settings import FurnaceSettings

T = TypeVar("T")

# --- what travels -------------------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    """Everything a worker needs for one run's units (sent once per worker). ``model``, ``judge``
    and ``embedder`` are picklable factories called in the worker; no secret travels (a worker
    reads its own environment for keys). ``responses``/``synth``/``agents``: what a resumed run
    already has for the units it retries, so a worker serves them as the driver's caches would."""

    token: str
    experiment_id: str
    config: ExperimentConfig
    probes: ProbeSet
    seeds: tuple[Elixir, ...]
    model: Callable[[], LLM]
    judge: Callable[[], LLM] | None = None
    judges: tuple[Callable[[], LLM], ...] = ()  # a panel of judges (the config's ``judges``), instead of ``judge``
    embedder: Callable[[], Embedder] | None = None
    settings: FurnaceSettings | None = None
    keep_failures: bool = False
    slots: int = 2  # model calls in flight per worker process
    trace: bool = False
    responses: tuple[tuple[str, Completion], ...] = ()
    synth: tuple[tuple[str, dict[str, Any]], ...] = ()
    agents: tuple[Agent, ...] = ()
    store: Callable[[], tuple[CallLedger, Any] | None] | None = None
    """Opens the live store in the worker (as its own environment reaches it): its call ledger and response
    cache, where the worker writes each paid call's ledger row with its answer itself, so the driver's
    death loses none. None, or a store the worker cannot reach: the driver writes them."""


class PeerPrompt(NamedTuple):
    """A population member as a unit reads it (``engine.Peer``): what a job ships of its population."""

    agent_id: str
    system_prompt: str


@dataclass(frozen=True)
class Job:
    """One unit's inputs: ``args`` of :meth:`Evolution.evaluate_unit` (its population as
    :class:`PeerPrompt`) and its parents as stored."""

    key: str
    args: tuple[Any, ...]
    parents: tuple[Elixir, ...] = ()
    agents: tuple[Agent, ...] = ()  # the parents that are agents (their whole record)
    shared: tuple[tuple[str, dict[str, Any], float | None], ...] = ()  # fusion sub-results made so far this run
    answers: tuple[tuple[str, Completion], ...] = ()  # fusion answers (not replies or judgements) so far this run
    retry: bool = False  # its slot holds a record that must be made again (never served from a task cache)
    serve: str = "priority"  # the order the driver's model slots served in when it was sent (PrioritySlots.serve)

    @property
    def affinity(self) -> str:
        """Units that can ask the same questions: parents of the same content bred with the same
        params (the operators' sub-results are keyed by the parents' content and their params, e.g.
        a crossover's identity sentence; the same moves on the same parent can make the same child).
        Only their plans' seeds differ, and a sub-result keyed by the seed (a mutation's rewrite, a
        reflection) is the unit's own. Run in one worker, its caches and single-flight serve the second."""
        plan = self.args[1]
        if not plan.parents:
            return f"seed-{plan.slot}"
        parents = ",".join(sorted(str(p.elixir.get("content_hash")) for p in plan.parents))
        return f"{parents}|{content_key(plan.params)}"


@dataclass
class SpanRecord:
    """One span as it happened in the worker: how it was opened (``args``/``kwargs`` of ``trace`` or
    ``child``) and, in order, its children and the calls made on it (``end``, ``assess``, …), to
    replay on the driver's tracker."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)

    def child(self, *args: Any, **kwargs: Any) -> SpanRecord:
        span = SpanRecord(args, kwargs)
        self.events.append(("child", span, (), {}))
        return span

    def __getattr__(self, name: str) -> Callable[..., None]:  # end, assess and whatever a Span offers
        if name.startswith("_"):
            raise AttributeError(name)

        def record(*args: Any, **kwargs: Any) -> None:
            self.events.append(("call", name, args, kwargs))

        return record


class SpanRecorder(NullTracker):
    """A tracker that records the unit's trace (``trace``) instead of sending it anywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[SpanRecord] = []

    def trace(self, *args: Any, **kwargs: Any) -> SpanRecord:
        span = SpanRecord(args, kwargs)
        self.spans.append(span)
        return span


def replay(tracker: Any, spans: Sequence[SpanRecord]) -> None:
    """Send recorded traces to ``tracker`` (nothing when it does not trace)."""
    trace = getattr(tracker, "trace", None)
    if not callable(trace):
        return
    for span in spans:
        root = trace(*span.args, **span.kwargs)
        if root is not None:
            _replay_into(root, span)


def _replay_into(live: Any, span: SpanRecord) -> None:
    for kind, what, args, kwargs in span.events:
        if kind == "child":
            _replay_into(live.child(*what.args, **what.kwargs), what)
        else:
            getattr(live, what)(*args, **kwargs)


@dataclass(frozen=True)
class Outcome:
    """What a unit returns to the driver (see the module docstring)."""

    key: str
    record: IndividualRecord | None
    meter: CallTotals
    calls: tuple[CallRecord, ...] = ()
    responses: tuple[tuple[str, str, Completion], ...] = ()  # (key, task, completion)
    entries: tuple[tuple[str, dict[str, Any], float | None], ...] = ()  # synthesis cache (key, value, ttl)
    agents: tuple[Agent, ...] = ()
    spans: tuple[SpanRecord, ...] = ()
    error: BaseException | None = None
    worker: str = ""
    seconds: float = 0.0  # the unit's time in the worker


# --- in the worker ------------------------------------------------------------------------------


class _Slotted:
    """The worker's model as one unit sees it: each call waits for one of the worker's slots, queued at
    the unit's priority (its order in the run), as the driver's metered model queues a local unit's."""

    def __init__(self, inner: LLM, slots: PrioritySlots, priority: float) -> None:
        self.inner, self.slots, self.priority, self.model_name = inner, slots, priority, inner.model_name

    def complete(self, request: LLMRequest) -> Completion:
        with self.slots.held(self.priority):
            return self.inner.complete(request)


class _Kit(Guarded):
    """One worker's collaborators for one run, built once (the model clients, the embedder with the
    vectors it computed, the caches shared by the units this worker runs, and the worker's model slots:
    ``slots`` calls in flight, handed out in the driver's order: see :meth:`serve`)."""

    def __init__(self, world: World) -> None:
        self.slots = PrioritySlots(max(1, world.slots))
        self._phase = -1  # none yet: the first job sets it
        self.model = world.model()
        self.judge = world.judge() if world.judge is not None else None
        self.judges = [make() for make in world.judges]
        # a text is embedded once per worker (the peers' prompts recur in every unit's diversity)
        self.embedder = StoredEmbedder(world.embedder(), MemoryVectors()) if world.embedder is not None else None
        self.responses = MemoryResponseCache()
        for key, completion in world.responses:
            self.responses.put(key, completion)
        self.flights: Flights[Completion] = Flights()
        self.store = world.store() if world.store is not None else None
        self.kv = MemoryKV()
        ttl = world.settings.synth_ttl_s if world.settings is not None else None
        for key, value in world.synth:
            self.kv.put_if_absent(key, value, ttl)

    @serialized
    def serve(self, order: str) -> None:
        """Serve the slots in ``order`` when the driver has moved on to it. The driver's phases only move
        forward (generation 0 first come first served, then the oldest units first, then the youngest
        once the last child is planned: ``furnace.evolution.metering``), and a job can start after a
        younger one: a job sent in an earlier phase never sets it back."""
        phase = _PHASES.index(order)
        if phase > self._phase:
            self._phase = phase
            self.slots.serve(order)


_PHASES = ("arrival", "priority", "reverse")  # the driver's serving orders, in the order a run goes through them


_KITS: PerKey[str, _Kit] = PerKey(keep=4)  # by run token; a long-lived worker serves many runs: the newest few
# the probes' threads of every unit this process runs (started as needed, then reused: a unit's own
# pool would start, and join, its threads in every unit)
_PROBES = pool(64, name="furnace-worker-probe")


def _kit(world: World) -> _Kit:
    return _KITS.get(world.token, partial(_Kit, world))


class _RecordingCache:
    """The worker's response cache; remembers the entries this unit added (and, with ``stored``, puts
    each in the live store too, where it commits with its paid call's ledger row)."""

    def __init__(self, inner: MemoryResponseCache, stored: Any = None) -> None:
        self.inner, self.stored = inner, stored
        self.added: list[tuple[str, str, Completion]] = []

    def get(self, key: str) -> Completion | None:
        return self.inner.get(key)

    def put(self, key: str, completion: Completion, *, task: str = "") -> bool:
        if self.stored is not None:
            self.stored.put(key, completion, task=task)
        added = self.inner.put(key, completion, task=task)
        if added:
            self.added.append((key, task, completion))
        return added


class _StoringLedger(MemoryCallLedger):
    """The unit's calls (for its outcome), each also recorded in the live store's ledger."""

    def __init__(self, stored: Any) -> None:
        super().__init__()
        self.stored = stored

    def record(self, call: CallRecord) -> None:
        self.stored.record(call)  # first: a paid call is in the store's ledger before its answer is used
        super().record(call)


class _RecordingKV:
    """The worker's synthesis cache KV; remembers the entries this unit added."""

    def __init__(self, inner: MemoryKV) -> None:
        self.inner = inner
        self.added: list[tuple[str, dict[str, Any], float | None]] = []

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)

    def put_if_absent(self, key: str, value: dict[str, Any], ttl_s: float | None = None) -> dict[str, Any]:
        stored = self.inner.put_if_absent(key, value, ttl_s)
        if stored is value:
            self.added.append((key, value, ttl_s))
        return stored

    def put_many_if_absent(self, items: Sequence[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
        return [self.put_if_absent(key, value, ttl_s) for key, value, ttl_s in items]


class ParentStore(Guarded):
    """The only store a worker has: the parents the driver loaded (read) and what the unit
    breeds (kept, returned to the driver). Everything else is not there. Only ``fuse``'s store
    calls are served (its agents under the view's one lock)."""

    def __init__(self, parents: Sequence[Elixir], agents: Sequence[Agent]) -> None:
        self._elixirs = {(e.id, e.version): e for e in parents}
        self._agents = {a.id: a for a in agents}
        self.saved: list[Agent] = []

    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        found = [e for (i, v), e in self._elixirs.items() if i == id and (version is None or v == version)]
        if not found:
            raise NotFound(f"no elixir {id!r} among this unit's parents", field="id")
        return max(found, key=lambda e: e.version or 0)

    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        if isinstance(ref_or_id, str):
            return self.get_elixir(ref_or_id)
        elixir = self.get_elixir(ref_or_id.id, ref_or_id.version)
        if elixir.content_hash != ref_or_id.content_hash:
            raise FurnaceError(f"parent {ref_or_id} was shipped with another content hash")
        return elixir

    @serialized
    def get_agent(self, id: str) -> Agent:
        agent = self._agents.get(id)
        if agent is None:
            raise NotFound(f"no agent {id!r}", field="id")
        return agent

    def stored_child(self, id: str, parents: Sequence[ElixirRef]) -> Agent:
        return self.get_agent(id)

    @serialized
    def save_agent(self, agent: Agent) -> bool:
        if agent.id in self._agents:
            return False
        self._agents[agent.id] = agent
        self.saved.append(agent)
        return True

    def atomically(self, work: Callable[[], T]) -> T:
        """``work()``: what the unit keeps is returned to the driver, which writes it with the records."""
        return work()


def run_job(world: World, job: Job) -> Outcome:
    """Run one unit in this (worker) process; never raises: an error travels in the outcome,
    with the calls the unit made before it."""
    started = time.perf_counter()
    kit = _kit(world)
    kit.serve(job.serve)
    generation, plan, _, _, order = job.args
    if kit.store is not None:
        stored, stored_responses = kit.store
        ledger: MemoryCallLedger = _StoringLedger(stored)
        responses = _RecordingCache(kit.responses, stored_responses)
    else:
        ledger = MemoryCallLedger()
        responses = _RecordingCache(kit.responses)
    kv = _RecordingKV(kit.kv)
    store = ParentStore(job.parents, (*job.agents, *world.agents))
    for key, value, entry_ttl in job.shared:
        kit.kv.put_if_absent(key, value, entry_ttl)
    for key, completion in job.answers:
        kit.responses.put(key, completion)
    # one single-flight table per worker: identical requests of units running here call the model once
    run_id = world.experiment_id
    llm = CachedLLM(_Slotted(kit.model, kit.slots, order), responses, ledger, run_id=run_id, _flights=kit.flights)
    judge = (
        CachedLLM(_Slotted(kit.judge, kit.slots, order), responses, ledger, run_id=run_id, _flights=kit.flights)
        if kit.judge is not None
        else None
    )
    judges = [
        CachedLLM(_Slotted(j, kit.slots, order), responses, ledger, run_id=run_id, _flights=kit.flights)
        for j in kit.judges
    ]
    ttl = world.settings.synth_ttl_s if world.settings is not None else None
    breeder = FusionBreeder(store, embedder=kit.embedder, cache=SynthesisCache(kv, ttl_s=ttl), settings=world.settings)
    tracker = SpanRecorder() if world.trace else NullTracker()
    record: IndividualRecord | None = None
    error: BaseException | None = None
    meter = CallTotals()
    try:
        evo = Evolution(
            world.config,
            world.probes,
            world.seeds,
            llm,
            breeder,
            MemoryResults(),
            embedder=kit.embedder,
            tracker=tracker,
            judge=judge,
            judges=judges,
            keep_failures=world.keep_failures,
            probe_pool=_PROBES,
        )
        if evo.experiment_id != world.experiment_id:
            raise FurnaceError(
                f"this worker computes experiment {evo.experiment_id}, the driver {world.experiment_id}: "
                "run the same furnace version on the driver and the workers"
            )
        try:
            record = evo.evaluate_unit(*job.args)
        finally:
            meter = evo.unit_meter(generation, plan.slot)
    except BaseException as err:  # returned with the calls made so far (the driver raises it)
        error = _portable(err)
    return Outcome(
        key=job.key,
        record=record,
        meter=meter,
        calls=tuple(ledger.calls()),
        responses=tuple(responses.added),
        entries=tuple(kv.added),
        agents=tuple(store.saved),
        spans=tuple(getattr(tracker, "spans", ())),
        error=error,
        worker=f"{os.uname().nodename}:{os.getpid()}",
        seconds=time.perf_counter() - started,
    )


def _portable(err: BaseException) -> BaseException:
    """``err`` if it survives pickling, else a FurnaceError naming it."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        return FurnaceError(f"{err.__class__.__name__}: {str(err)[:300]}")


# replies and judgements are asked of one persona (the bulk of a run's calls): not shipped to every unit
_PER_PERSONA = frozenset({TaskKind.REPLY.value, TaskKind.JUDGE.value})

# --- on the driver ------------------------------------------------------------------------------


@dataclass
class Sink:
    """Applies outcomes on the driver: ledger rows, caches, agents, traces, the run's meter."""

    evolution: Evolution
    store: Any  # ElixirStore
    responses: Any  # ResponseCache
    ledger: CallLedger
    kv: KV
    synth_ttl_s: float | None = None

    def __post_init__(self) -> None:
        # rows already in the ledger (a cached task result served again) are neither written nor counted twice
        self._known = {c.id for c in self.ledger.calls(self.evolution.experiment_id)}
        self.bred: dict[str, Agent] = {}  # agents received this run (parents of later units, maybe not yet written)
        self.shared: dict[str, tuple[dict[str, Any], float | None]] = {}  # fusion sub-results received this run
        self._loaded: dict[tuple[str, str], tuple[Elixir, Agent | None]] = {}  # parents read (and verified) this run
        self.answers: dict[str, Completion] = {}  # fusion answers received this run (shared by units' parents)

    def apply(self, outcome: Outcome, generation: int, slot: int) -> IndividualRecord:
        """Account the outcome now (its ledger rows, the run's meter), queue its writes before its
        record (same unit of work: a saved record always has its agent and cache entries), return it."""
        fresh = [c for c in outcome.calls if c.id not in self._known]
        for call in fresh:  # the calls first: a paid call is accounted before its result is used
            self.ledger.record(call)
            self._known.add(call.id)
        replayed = bool(outcome.calls) and not fresh  # a cached task result: counted and traced before
        if not replayed:
            self.evolution.account_unit(generation, slot, outcome.meter)  # the run's meter: budget, generation calls
        for agent in outcome.agents:
            self.bred[agent.id] = agent
        for key, value, ttl in outcome.entries:
            if not key.startswith("synth:"):
                self.shared.setdefault(key, (value, ttl))
        for key, task, completion in outcome.responses:
            if task not in _PER_PERSONA:
                self.answers.setdefault(key, completion)
        for agent in outcome.agents:  # idempotent: an agent bred before is kept as stored
            self.evolution.save_with_records(self.store, agent)
        self.evolution.write_with_records(partial(self._write, outcome, trace=not replayed))
        if outcome.error is not None:
            raise outcome.error
        assert outcome.record is not None
        return outcome.record

    def _write(self, outcome: Outcome, *, trace: bool) -> None:
        for key, task, completion in outcome.responses:
            self.responses.put(key, completion, task=task)
        for key, value, ttl in outcome.entries:
            self.kv.put_if_absent(key, value, ttl)
        if trace:
            replay(self.evolution.tracker, outcome.spans)

    def parents(self, plan: Any) -> tuple[tuple[Elixir, ...], tuple[Agent, ...]]:
        """``plan``'s parents as stored (verified on load), or as received this run."""
        elixirs: list[Elixir] = []
        agents: list[Agent] = []
        for p in plan.parents:
            received = self.bred.get(p.agent_id)
            if received is not None:
                elixirs.append(received.elixir)
                agents.append(received)
                continue
            ref = Elixir.model_validate(p.elixir).ref
            loaded = self._loaded.get((p.agent_id, ref.content_hash))
            if loaded is None:
                agent = self.store.get_agent(p.agent_id) if p.agent_id.startswith(AGENT_PREFIX) else None
                loaded = self._loaded[(p.agent_id, ref.content_hash)] = (self.store.load_for_fusion(ref), agent)
            elixirs.append(loaded[0])
            if loaded[1] is not None:
                agents.append(loaded[1])
        return tuple(elixirs), tuple(agents)


class _Applied(Guarded):
    """A worker's future as the loop sees it: ``result()`` applies the outcome (once, in the
    calling thread: the loop's main thread) and returns the record."""

    def __init__(self, future: Any, sink: Sink, unit: Unit) -> None:
        self.future, self.sink, self.unit = future, sink, unit
        self._done = False
        self._record: IndividualRecord | None = None
        self._error: BaseException | None = None

    @serialized
    def _apply(self) -> None:
        if not self._done:
            try:
                generation, plan = self.unit.args[0], self.unit.args[1]
                self._record = self.sink.apply(self.future.result(), generation, plan.slot)
            except BaseException as err:
                self._error = err
            self._done = True

    def result(self) -> IndividualRecord:
        self._apply()
        if self._error is not None:
            raise self._error
        assert self._record is not None
        return self._record

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        self.future.add_done_callback(lambda _fut: fn(self))


class IsolatedUnitRunner:
    """A unit runner that ships each unit to ``submit`` (a Dask client, a Prefect task on Dask,
    any executor taking ``(job)`` and returning a future of :func:`run_job`'s outcome) and applies
    outcomes through ``sink``. Parents are loaded (and verified) from the driver's ``store``."""

    def __init__(
        self, submit: Callable[[Job, int], UnitFuture], sink: Sink, close: Callable[[], None] | None = None
    ) -> None:
        self._submit, self.sink, self._close = submit, sink, close

    def submit(self, unit: Unit) -> UnitFuture:
        parents, agents = self.sink.parents(unit.args[1])
        shared = tuple((key, value, ttl) for key, (value, ttl) in self.sink.shared.items())
        answers = tuple(self.sink.answers.items())
        generation, plan, population, known, order = unit.args
        peers = tuple(PeerPrompt(p.agent_id, p.system_prompt) for p in population)  # not their scores
        args = (generation, plan, peers, known, order)
        job = Job(unit.key, args, parents, agents, shared, answers, unit.retry, self.sink.evolution.metered.serving)
        return _Applied(self._submit(job, unit.order), self.sink, unit)

    def close(self) -> None:
        if self._close is not None:
            self._close()


def build_world(
    evolution: Evolution,
    *,
    model: Callable[[], LLM],
    judge: Callable[[], LLM] | None = None,
    judges: Sequence[Callable[[], LLM]] = (),
    embedder: Callable[[], Embedder] | None = None,
    settings: FurnaceSettings | None = None,
    slots: int = 2,
    responses: Any = None,
    ledger: CallLedger | None = None,
    kv: KV | None = None,
    store: Any = None,
    store_access: Callable[[], tuple[CallLedger, Any] | None] | None = None,
) -> World:
    """The :class:`World` of ``evolution``'s run. With the driver's ``responses``/``ledger``/``kv``/
    ``store``, a resumed run ships what its retried units will need: the completions this
    experiment already paid for, and the synthesis entries and agents of its unscored children."""
    experiment_id = evolution.experiment_id
    paid: dict[str, Completion] = {}
    synth: dict[str, dict[str, Any]] = {}
    bred: list[Agent] = []
    if responses is not None and ledger is not None:
        for call in ledger.calls(experiment_id):
            if call.status == "ok" and not call.cached and call.cache_key not in paid:
                found = responses.get(call.cache_key)
                if found is not None:
                    paid[call.cache_key] = found
    if kv is not None and store is not None:
        for rec in evolution.results.individuals(experiment_id):
            if rec.lineage_hash and not rec.scored:
                value = kv.get(synth_key(rec.lineage_hash))
                if value is not None:
                    synth[synth_key(rec.lineage_hash)] = value
                with contextlib.suppress(NotFound):
                    bred.append(store.get_agent(rec.agent_id))
    # no secret travels: a worker reads its own environment for keys, the store's URL and its seal key
    safe = (
        settings.model_copy(update={"api_key": None, "database_url": None, "seal_key": None})
        if settings is not None
        else None
    )
    return World(
        token=uuid.uuid4().hex,
        experiment_id=experiment_id,
        config=evolution.config,
        probes=evolution.probes,
        seeds=tuple(evolution.seeds),
        model=model,
        judge=judge,
        judges=tuple(judges),
        embedder=embedder,
        settings=safe,
        keep_failures=evolution.keep_failures,
        slots=slots,
        trace=callable(getattr(evolution.tracker, "trace", None)),
        responses=tuple(paid.items()),
        synth=tuple(synth.items()),
        agents=tuple(bred),
        store=store_access,
    )
