"""Benchmarks: each ``bench_*.py`` module has ``run() -> list[str]`` printing its own figures.

Every figure is a ratio against a baseline measured in the same run, so that
results compare across machines. Run all with ``make bench`` or one with
``python -m bench fusion``.
"""
