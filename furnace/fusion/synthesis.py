"""The synthesis cache: rendered agents content-addressed by lineage hash.

``synth:{lineage_hash}`` → ``{prompt, tools, lineage_hash, built_at, op_version,
agent}`` (``agent`` is the full agent record, so a hit never needs the model).
Invalidation is by construction: a new parent version, other params or a bumped
``op_version`` give another lineage hash, hence another key; old keys expire by
TTL.

Concurrency:

- **in process**, :meth:`SynthesisCache.get_or_build` is single-flight: 64 threads
  asking for one missing key run the build once; the others wait for it;
- **across processes**, the value is written with ``kv.put_if_absent``, so when
  two processes both build, the first write wins and both return that value.

Sub-results (identity sentences, principle rewrites) go through the same KV
under their own content keys (:class:`SubResultCache`).

The KV protocol is tiny: ``get(key) -> dict | None`` and
``put_if_absent(key, value, ttl_s) -> dict`` (returns the winning value).
:class:`MemoryKV` lives here; ``furnace.storage.sql.kv.SQLKV`` persists.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from furnace.domain.canonical import content_key
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import Flights
from furnace.storage.protocols import KV as KV  # declared with every store protocol

DEFAULT_TTL_S = 30 * 24 * 3600


class MemoryKV(Guarded):
    """An in-process KV with TTL (``clock`` is injectable for tests); one coarse lock."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._data: dict[str, tuple[dict[str, Any], float | None]] = {}

    @serialized
    def get(self, key: str) -> dict[str, Any] | None:
        """The live value under ``key``."""
        item = self._data.get(key)
        if item is None:
            return None
        value, expires = item
        if expires is not None and expires <= self._clock():
            del self._data[key]
            return None
        return value

    @serialized
    def put_if_absent(self, key: str, value: dict[str, Any], ttl_s: float | None = None) -> dict[str, Any]:
        """Insert unless a live value exists; return the stored value."""
        item = self._data.get(key)
        now = self._clock()
        if item is not None and (item[1] is None or item[1] > now):
            return item[0]
        self._data[key] = (value, None if ttl_s is None else now + ttl_s)
        return value

    @serialized
    def put_many_if_absent(self, items: Sequence[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
        """``put_if_absent`` for each, in order: the stored values."""
        return [self.put_if_absent(key, value, ttl_s) for key, value, ttl_s in items]

    def __len__(self) -> int:
        return len(self._data)


def synth_key(lineage_hash: str) -> str:
    """The cache key of one agent's rendered prompt."""
    return f"synth:{lineage_hash}"


class Found(Exception):
    """Raised by a build that found the cache entry itself (``get_or_build(..., read=False)``)."""

    def __init__(self, value: dict[str, Any]) -> None:
        super().__init__("found in the cache")
        self.value = value


class SynthesisCache(Guarded):
    """Rendered agents by lineage hash, single-flight in process (a :class:`Flights` table),
    insert-if-absent across. Its memo and counters are under its one lock (the serialized helpers);
    builds and the KV run outside."""

    def __init__(self, kv: KV | None = None, ttl_s: float | None = DEFAULT_TTL_S) -> None:
        self.kv: KV = kv if kv is not None else MemoryKV()
        self.ttl_s = ttl_s
        self.builds = 0  # how many times a build function actually ran (tests, benchmarks)
        self._persisted: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self._flights: Flights[dict[str, Any]] = Flights()
        # Values are immutable per key, so a small in-process memo in front of the KV is
        # safe; entries leave it when their TTL (from built_at) runs out.
        self._memo: OrderedDict[str, tuple[dict[str, Any], float]] = OrderedDict()
        self.memo_size = 1024

    def _remember(self, key: str, value: dict[str, Any]) -> dict[str, Any]:
        expires = float("inf")
        if self.ttl_s is not None:
            try:
                expires = datetime.fromisoformat(value["built_at"]).timestamp() + self.ttl_s
            except (KeyError, TypeError, ValueError):
                expires = time.time() + self.ttl_s
        self._memo_put(key, value, expires)
        return value

    @serialized
    def _memo_put(self, key: str, value: dict[str, Any], expires: float) -> None:
        self._memo[key] = (value, expires)
        self._memo.move_to_end(key)
        while len(self._memo) > self.memo_size:
            self._memo.popitem(last=False)

    @serialized
    def _memo_hit(self, key: str) -> dict[str, Any] | None:
        item = self._memo.get(key)
        if item is not None and item[1] > time.time():
            return item[0]
        self._memo.pop(key, None)
        return None

    @serialized
    def _count_build(self, n: int) -> None:
        self.builds += n

    def _lookup(self, key: str) -> dict[str, Any] | None:
        found = self._memo_hit(key)
        if found is not None:
            return found
        hit = self.kv.get(key)
        return self._remember(key, hit) if hit is not None else None

    def known_persisted(self, store: Any, lineage_hash: str) -> bool:
        """True when this process already made sure ``store`` holds the agent."""
        try:
            return lineage_hash in self._persisted.get(store, ())
        except TypeError:  # a store that cannot be weakly referenced: always check
            return False

    def mark_persisted(self, store: Any, lineage_hash: str) -> None:
        """Remember that ``store`` holds the agent for ``lineage_hash``."""
        with contextlib.suppress(TypeError):  # a store that cannot be weakly referenced: never remembered
            self._persist(store, lineage_hash)

    @serialized
    def _persist(self, store: Any, lineage_hash: str) -> None:
        self._persisted.setdefault(store, set()).add(lineage_hash)

    def get(self, lineage_hash: str) -> dict[str, Any] | None:
        """The cached value for ``lineage_hash``, if live."""
        return self._lookup(synth_key(lineage_hash))

    def get_or_build(
        self,
        lineage_hash: str,
        build: Callable[[], dict[str, Any]],
        *,
        put: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
        read: bool = True,
    ) -> tuple[dict[str, Any], bool]:
        """``(value, from_cache)``. ``build`` runs at most once per key at a time in this
        process; callers that joined a build in flight get its value with ``from_cache=True``.

        ``put(key, value)`` stores a built value and returns the stored (winning) one; by default
        ``kv.put_if_absent``. A caller passes its own to store the value together with what belongs
        with it (``fuse``: the agent and the sub-results, in one transaction); the callers waiting
        on this build are released only after it returned.

        Without ``read``, only the in-process memo is looked at before the build: the build reads
        the KV itself (``fuse``: before the operator runs) and raises
        :class:`Found` with the entry it found, which is then served as a hit."""
        key = synth_key(lineage_hash)
        hit = self._lookup(key) if read else self._memo_hit(key)
        if hit is not None:
            return hit, True
        flight, leader = self._flights.join(key)
        if not leader:
            return flight.wait(), True
        with self._flights.lead(key, flight):
            # another thread's flight may have finished just before ours began (no query: it remembered
            # its value; another process's is met by the insert)
            done = self._memo_hit(key)
            if done is not None:
                flight.value = done
                return done, True
            self._count_build(1)
            try:
                value = build()
            except Found as found:  # not a build after all: the entry was there
                self._count_build(-1)
                flight.value = self._remember(key, found.value)
                return flight.value, True
            value.setdefault("built_at", datetime.now(UTC).isoformat())
            value.setdefault("lineage_hash", lineage_hash)
            stored = put(key, value) if put is not None else self.kv.put_if_absent(key, value, self.ttl_s)
            flight.value = self._remember(key, stored)
            return flight.value, flight.value != value  # another process's build won the insert


class SubResultCache:
    """Intermediate results (identity sentences, rewrites) under their own content keys.

    With ``defer``, a computed result is kept in :attr:`pending` instead of being stored at once;
    the caller stores :meth:`entries` with its own writes (``fuse``: in the transaction that stores
    the agent, so a refused or failed fusion stores none of them). A key computed once is served
    from ``pending`` for the rest of the run."""

    def __init__(self, kv: KV, ttl_s: float | None = DEFAULT_TTL_S, *, defer: bool = False) -> None:
        self.kv = kv
        self.ttl_s = ttl_s
        self.defer = defer
        self.pending: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, kind: str, key_parts: Any, compute: Callable[[], Any]) -> Any:
        """The cached result for ``(kind, key_parts)``, computing and storing it on a miss."""
        key = f"{kind}:{content_key(key_parts)}"
        hit = self.pending.get(key) or self.kv.get(key)
        if hit is not None:
            self.hits += 1
            return hit["result"]
        self.misses += 1
        value = {"result": compute()}
        if self.defer:
            self.pending[key] = value
            return value["result"]
        return self.kv.put_if_absent(key, value, self.ttl_s)["result"]

    def entries(self) -> list[tuple[str, dict[str, Any], float | None]]:
        """The deferred results as ``(key, value, ttl_s)`` for ``KV.put_many_if_absent``."""
        return [(key, value, self.ttl_s) for key, value in self.pending.items()]
