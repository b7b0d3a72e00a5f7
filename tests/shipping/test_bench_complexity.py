"""The complexity bench's counter (``bench/bench_complexity.py``) counts what its docstring says, on a
tiny synthetic package: the counter's correctness, not the repository's figure."""

from __future__ import annotations

import textwrap

from bench.bench_complexity import count_package, count_source

THREADED = textwrap.dedent(
    '''
    """threading.Lock() in a docstring is not a reference."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from threading import RLock

    # with self._lock: in a comment is not one either


    class Box:
        def __init__(self):
            self._lock = threading.Lock()  # construction: 1
            self._guard = RLock()  # construction: 1
            self._done = threading.Event()  # construction: 1
            self.local = threading.local()  # construction: 1
            self.note = "self._lock.acquire()"  # a string: 0

        def put(self, x):
            with self._lock:  # with over a lock: 1
                self.x = x
            with open("f") as f, self._lock_for(x):  # one of two items is a lock: 1
                pass

        def raw(self):
            self._guard.acquire()  # 1
            try:
                pass
            finally:
                self._guard.release()  # 1

        def pool(self):
            with ThreadPoolExecutor(2) as pool:  # construction: 1 (the name "pool" is no lock)
                return pool
    '''
)

PROBES = textwrap.dedent(
    """
    def use(store, results, llm, obj):
        many = getattr(store, "save_many", None)  # probe on a store
        also = getattr(self.results, "save_individuals", None)  # probe on a store
        name = getattr(llm, "model_name", "?")  # a probe, not on a store
        value = getattr(obj, "x")  # no default: not a probe
        field = getattr(obj, field_name, None)  # no literal name: not a probe
        return many, also, name, value, field


    class Forward:
        def __getattr__(self, name):
            return getattr(self.store, "inner", None)  # forwarding: not a probe
    """
)


def test_thread_and_lock_references_are_counted_one_by_one():
    counts = count_source(THREADED)
    kinds = sorted(item.split(" (line")[0] for item in counts.references)
    assert kinds == sorted(
        [
            "import",
            "import",
            "import",
            "Lock()",
            "RLock()",
            "Event()",
            "local()",
            "with _lock",
            "with _lock_for",
            ".acquire()",
            ".release()",
            "ThreadPoolExecutor()",
        ]
    )
    assert counts.probes == [] and counts.store_probes == []


def test_a_bare_local_call_is_not_a_thread_local():
    assert count_source("x = local()\ny = threading.local()\n").references == ["local() (line 2)"]


def test_getattr_probes_need_a_literal_name_and_a_default_outside_forwarding():
    counts = count_source(PROBES)
    assert [p.split(" (line")[0] for p in counts.probes] == [
        "getattr(store, 'save_many')",
        "getattr(self.results, 'save_individuals')",
        "getattr(llm, 'model_name')",
    ]
    assert [p.split(" (line")[0] for p in counts.store_probes] == [
        "getattr(store, 'save_many')",
        "getattr(self.results, 'save_individuals')",
    ]
    assert count_source(PROBES).references == []


def test_a_package_is_counted_per_module_with_the_scheduler_left_out(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "evolution").mkdir(parents=True)
    (pkg / "quiet.py").write_text("x = 1\n", encoding="utf-8")
    (pkg / "threads.py").write_text(THREADED, encoding="utf-8")
    (pkg / "evolution" / "scheduler.py").write_text(THREADED + PROBES, encoding="utf-8")
    found = count_package(pkg, excluded=("evolution/scheduler.py",))
    assert set(found) == {"threads.py", "evolution/scheduler.py"}  # quiet.py holds nothing
    assert len(found["threads.py"].references) == 12
    assert found["evolution/scheduler.py"].references == []  # excluded from the references ...
    assert len(found["evolution/scheduler.py"].store_probes) == 2  # ... not from the probes
    assert set(count_package(pkg, excluded=())) == {"threads.py", "evolution/scheduler.py"}
    assert len(count_package(pkg, excluded=())["evolution/scheduler.py"].references) == 12
