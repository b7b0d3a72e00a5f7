"""Benchmarks: each ``bench_*.py`` module has ``run() -> bool`` printing its own figures
(True when every target it judges is met).

Every figure is a ratio against a baseline measured in the same run, so that
results compare across machines. Run all with ``make bench`` or one with
``python -m bench fusion``.
"""
