"""Run the benchmarks: ``python -m bench [NAME ...]``.

Each group runs in a process of its own (a fresh interpreter, as a user's command is), so one
group's heap, threads or ``sys.modules["__main__"]`` (which Streamlit's AppTest replaces) cannot
move another's figures or break it; a group that crashes counts as missed and the others still run.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import time

from furnace import offline_env

offline_env.apply()


def _names() -> list[str]:
    import bench

    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))


def _run_here(name: str) -> bool:
    """One group in this process: True when it met its targets."""
    from bench.stack import reference_ms

    print(f"== {name.removeprefix('bench_')} ==", flush=True)
    before = reference_ms()
    started = time.perf_counter()
    module = importlib.import_module(f"bench.{name}")
    ok = module.run()
    elapsed = time.perf_counter() - started
    print(
        f"   ({elapsed:.1f}s; the machine's reference workload {before:.1f} ms before, {reference_ms():.1f} ms after:"
        " compare figures only beside it)\n",
        flush=True,
    )
    return ok is True  # a bench that returns nothing has no target it could meet


def _run_apart(name: str) -> bool:
    """One group in a process of its own (its output goes straight through)."""
    code = subprocess.call([sys.executable, "-m", "bench", name.removeprefix("bench_")])
    if code not in (0, 1):
        print(f"   {name.removeprefix('bench_')}: crashed (exit {code}), counted as missed\n", flush=True)
    return code == 0


def main(argv: list[str]) -> int:
    names = _names()
    flags = [a for a in argv if a.startswith("-")]
    if flags:  # ``python -m bench search --budget 200``: one group, its own flags (its ``main``)
        groups = [a for a in argv if not a.startswith("-") and f"bench_{a.removeprefix('bench_')}" in names]
        if len(groups) != 1 or not hasattr(importlib.import_module(f"bench.bench_{groups[0]}"), "main"):
            print(
                "flags go to one benchmark group that takes them, e.g. python -m bench search --json", file=sys.stderr
            )
            return 2
        rest = [a for a in argv if a != groups[0]]
        return int(importlib.import_module(f"bench.bench_{groups[0].removeprefix('bench_')}").main(rest))
    wanted = [f"bench_{a.removeprefix('bench_')}" for a in argv] or names
    unknown = set(wanted) - set(names)
    if unknown:
        print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have {', '.join(names)}", file=sys.stderr)
        return 2
    if len(wanted) == 1:
        return 0 if _run_here(wanted[0]) else 1
    missed = [name.removeprefix("bench_") for name in wanted if not _run_apart(name)]
    print(
        f"{len(wanted) - len(missed)} benchmark groups met their targets, {len(missed)} missed"
        + (f": {', '.join(missed)}" if missed else "")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
