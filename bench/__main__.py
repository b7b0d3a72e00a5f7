"""Run the benchmarks: ``python -m bench [NAME ...]``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

from furnace import offline_env

offline_env.apply()


def main(argv: list[str]) -> int:
    import bench

    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    wanted = [f"bench_{a.removeprefix('bench_')}" for a in argv] or names
    unknown = set(wanted) - set(names)
    if unknown:
        print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have {', '.join(names)}", file=sys.stderr)
        return 2
    failed = 0
    for name in wanted:
        print(f"== {name.removeprefix('bench_')} ==", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        ok = module.run()
        print(f"   ({time.perf_counter() - started:.1f}s)\n", flush=True)
        if ok is not True:  # a bench that returns nothing has no target it could meet
            failed += 1
    print(f"{len(wanted) - failed} benchmark groups met their targets, {failed} missed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
