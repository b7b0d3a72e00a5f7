"""Less to reason about (issue #31.6): thread/lock references per module, and getattr probes on stores.

Run: ``python -m bench complexity [--json]``. Nothing is timed: the figures are counts over the
source of ``furnace/`` (parsed with :mod:`ast`, so comments, docstrings and strings never count).

**A thread/lock reference** is one of, per module:

- an import of ``threading`` or ``concurrent.futures`` (``import threading``,
  ``from concurrent.futures import ThreadPoolExecutor``: one per statement);
- a construction of a thread primitive: a call whose name (``Lock(...)`` or ``threading.Lock(...)``)
  is one of :data:`PRIMITIVES` (locks, conditions, events, semaphores, barriers, threads, timers,
  thread pools, thread-locals);
- a ``with`` over a lock: a ``with`` item whose expression's last name (``self._lock``,
  ``store._write_lock``, ``lock_for(key)``) contains ``lock`` or ``mutex``;
- an ``.acquire(...)`` or ``.release(...)`` call.

Excluded: the scheduler's modules (:data:`EXCLUDED`: the one place experiment units are run on
threads); the app is ``app/``, outside ``furnace/``.

**A getattr probe** is ``getattr(obj, "name", default)``: a literal attribute name and a default, so
the caller asks whether an optional method is there (outside ``__getattr__``/``__getattribute__``,
where forwarding is the point). A probe is **on a store** when the probed object's source text
(``store``, ``self.results``, ``type(store)``, ``kv``, ``cache`` …) matches :data:`STORE_OBJECT`:
a store's optional methods are declared in its protocol (``furnace/storage/protocols.py``) instead.

Targets: ≤ 30 references in ≤ 8 modules, 0 probes on stores.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.stack import main_for, record

ROOT = Path(__file__).resolve().parents[1] / "furnace"
EXCLUDED = ("evolution/scheduler.py",)  # relative to the package root
PRIMITIVES = frozenset(
    {
        "Lock",
        "RLock",
        "Condition",
        "Event",
        "Semaphore",
        "BoundedSemaphore",
        "Barrier",
        "Thread",
        "Timer",
        "ThreadPoolExecutor",
        "local",  # only as threading.local (a bare ``local(...)`` is not counted)
    }
)
THREAD_MODULES = ("threading", "concurrent.futures", "concurrent")
LOCKISH = re.compile(r"lock|mutex", re.IGNORECASE)
STORE_OBJECT = re.compile(r"store|results|\bkv\b|ledger|cache", re.IGNORECASE)
MAX_REFERENCES, MAX_MODULES, MAX_STORE_PROBES = 30, 8, 0


@dataclass
class Counts:
    """What :func:`count_source` found in one module."""

    references: list[str] = field(default_factory=list)  # "kind (line N)"
    probes: list[str] = field(default_factory=list)  # "getattr(obj, 'name') (line N)"
    store_probes: list[str] = field(default_factory=list)  # the probes on a store (a subset of probes)


def _last_name(node: ast.expr) -> str:
    """``self._lock`` -> ``_lock``; ``lock_for(key)`` -> ``lock_for``; anything else -> ``""``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_primitive(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in PRIMITIVES:
        return func.attr
    if isinstance(func, ast.Name) and func.id in PRIMITIVES and func.id != "local":
        return func.id
    return ""


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.counts = Counts()
        self._forwarding = 0  # inside __getattr__ / __getattribute__

    def visit_Import(self, node: ast.Import) -> None:
        if any(a.name.split(".")[0] == "threading" or a.name.startswith("concurrent") for a in node.names):
            self.counts.references.append(f"import (line {node.lineno})")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and (node.module == "threading" or node.module.startswith("concurrent")):
            self.counts.references.append(f"import (line {node.lineno})")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        forwarding = node.name in ("__getattr__", "__getattribute__")
        self._forwarding += forwarding
        self.generic_visit(node)
        self._forwarding -= forwarding

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor API

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            name = _last_name(item.context_expr)
            if LOCKISH.search(name):
                self.counts.references.append(f"with {name} (line {node.lineno})")
        self.generic_visit(node)

    visit_AsyncWith = visit_With  # noqa: N815 - ast.NodeVisitor API

    def visit_Call(self, node: ast.Call) -> None:
        primitive = _is_primitive(node)
        if primitive:
            self.counts.references.append(f"{primitive}() (line {node.lineno})")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in ("acquire", "release"):
            self.counts.references.append(f".{node.func.attr}() (line {node.lineno})")
        elif (
            isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and not self._forwarding
        ):
            target = ast.unparse(node.args[0])
            probe = f"getattr({target}, {node.args[1].value!r}) (line {node.lineno})"
            self.counts.probes.append(probe)
            if STORE_OBJECT.search(target):
                self.counts.store_probes.append(probe)
        self.generic_visit(node)


def count_source(source: str) -> Counts:
    """The thread/lock references and getattr probes in one module's source (see the module's docstring)."""
    visitor = _Visitor()
    visitor.visit(ast.parse(source))
    return visitor.counts


def count_package(root: Path = ROOT, excluded: tuple[str, ...] = EXCLUDED) -> dict[str, Counts]:
    """Every module under ``root`` (path relative to it, ``/``-separated) with what it holds; the
    ``excluded`` modules' thread/lock references are left out (their probes still count)."""
    found: dict[str, Counts] = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        counts = count_source(path.read_text(encoding="utf-8"))
        if name in excluded:
            counts.references = []
        if counts.references or counts.probes:
            found[name] = counts
    return found


def run() -> bool:
    found = count_package()
    per_module = Counter({name: len(c.references) for name, c in found.items() if c.references})
    references, modules = sum(per_module.values()), len(per_module)
    probes = [p for c in found.values() for p in c.probes]
    store_probes = {name: c.store_probes for name, c in found.items() if c.store_probes}
    n_store = sum(len(v) for v in store_probes.values())
    ok = references <= MAX_REFERENCES and modules <= MAX_MODULES and n_store <= MAX_STORE_PROBES
    print(f"   thread/lock references outside {', '.join(EXCLUDED)} (furnace/):")
    for name, n in per_module.most_common():
        print(f"     {n:4d}  {name}")
    print(
        f"   {references} references in {modules} modules (target <= {MAX_REFERENCES} in <= {MAX_MODULES})"
        f" {'ok' if references <= MAX_REFERENCES and modules <= MAX_MODULES else 'MISSED'}"
    )
    for name, where in store_probes.items():
        for probe in where:
            print(f"     probe on a store: {name}: {probe}")
    print(
        f"   getattr probes: {len(probes)}, on stores {n_store} (target {MAX_STORE_PROBES})"
        f" {'ok' if n_store <= MAX_STORE_PROBES else 'MISSED'}"
    )
    record(
        references=references,
        modules=modules,
        references_target=MAX_REFERENCES,
        modules_target=MAX_MODULES,
        per_module=dict(per_module.most_common()),
        probes=len(probes),
        store_probes=n_store,
        store_probes_target=MAX_STORE_PROBES,
    )
    return ok


main = main_for("complexity", run, built_on="furnace/ source (counts; no stack is built)")
