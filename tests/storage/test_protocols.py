"""Every store protocol is declared in ``furnace.storage.protocols``, and every backend (in memory and
in the relational store) implements every method it declares, with the declared parameters and
defaults: callers call them, they never probe for one (issue #31.6)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from furnace.arena.store import InMemoryArenaStore
from furnace.evolution.records import MemoryResults
from furnace.fusion.embedding import MemoryVectors
from furnace.fusion.synthesis import MemoryKV
from furnace.llm.cache import MemoryCallLedger, MemoryResponseCache
from furnace.scoring.picks import MemoryPicks
from furnace.storage import protocols
from furnace.storage.memory import MemoryStore
from furnace.storage.sql.arena import SQLArenaStore
from furnace.storage.sql.content import SQLContentStore
from furnace.storage.sql.experiments import SQLExperimentResults
from furnace.storage.sql.kv import SQLKV, SQLVectors
from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache
from furnace.storage.sql.picks import SQLPicks
from furnace.storage.sql.store import SQLStore
from furnace.writing.content_memory import MemoryContentStore

BACKENDS: dict[Any, tuple[type, ...]] = {
    protocols.ElixirStore: (MemoryStore, SQLStore),
    protocols.ContentStore: (MemoryContentStore, SQLContentStore),
    protocols.ExperimentResults: (MemoryResults, SQLExperimentResults),
    protocols.ArenaStore: (InMemoryArenaStore, SQLArenaStore),
    protocols.PickStore: (MemoryPicks, SQLPicks),
    protocols.KV: (MemoryKV, SQLKV),
    protocols.VectorStore: (MemoryVectors, SQLVectors),
    protocols.ResponseCache: (MemoryResponseCache, SQLResponseCache),
    protocols.CallLedger: (MemoryCallLedger, SQLCallLedger),
}


def declared(protocol: type) -> list[str]:
    """The methods ``protocol`` declares, its bases' included (not ``typing.Protocol``'s plumbing)."""
    names = []
    for cls in protocol.__mro__:
        if cls.__module__ in ("typing", "builtins") or cls is object:
            continue
        names += [n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")]
    return sorted(set(names))


def test_every_protocol_of_the_module_is_checked_here():
    listed = set(protocols.__all__) - {"Transactional"}
    assert listed == {p.__name__ for p in BACKENDS}


def test_the_elixir_store_declares_its_batch_and_transaction_methods():
    methods = declared(protocols.ElixirStore)
    for name in ("save_agents", "load_many_for_fusion", "child_ids", "stored_child", "atomically", "unit"):
        assert name in methods
    assert "put_many_if_absent" in declared(protocols.KV)
    assert "save_individuals" in declared(protocols.ExperimentResults)


@pytest.mark.parametrize(
    ("protocol", "backend"),
    [(p, b) for p, backends in BACKENDS.items() for b in backends],
    ids=lambda x: getattr(x, "__name__", str(x)),
)
def test_every_backend_implements_every_declared_method(protocol, backend):
    methods = declared(protocol)
    assert methods, protocol
    for name in methods:
        assert callable(getattr(backend, name, None)), f"{backend.__name__} lacks {protocol.__name__}.{name}"
        want = list(inspect.signature(getattr(protocol, name)).parameters.values())
        got = list(inspect.signature(getattr(backend, name)).parameters.values())
        head, extra = got[: len(want)], got[len(want) :]
        assert [p.name for p in head] == [p.name for p in want], (backend.__name__, name)
        assert [p.kind for p in head] == [p.kind for p in want], (backend.__name__, name)
        assert [p.default for p in head] == [p.default for p in want], (backend.__name__, name)
        # a backend's own extras are optional keywords (``generations(..., verify=True)``): callers of the
        # protocol never pass them
        assert all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in extra), (backend.__name__, name)


def test_the_old_homes_re_export_the_declarations():
    from furnace.arena.store import ArenaStore
    from furnace.evolution.records import ExperimentResults
    from furnace.fusion.embedding import VectorStore
    from furnace.fusion.synthesis import KV
    from furnace.scoring.picks import PickStore
    from furnace.storage.store import ElixirStore
    from furnace.writing.content import ContentStore

    assert ElixirStore is protocols.ElixirStore and ContentStore is protocols.ContentStore
    assert ExperimentResults is protocols.ExperimentResults and ArenaStore is protocols.ArenaStore
    assert PickStore is protocols.PickStore and KV is protocols.KV and VectorStore is protocols.VectorStore
