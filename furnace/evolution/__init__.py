"""Evolution experiments: config, selection, evaluation, the loop, reports.

Entry point for code: :class:`furnace.evolution.engine.Evolution` (collaborators
passed in); for the command line: ``furnace experiment run FILE``.
"""

from __future__ import annotations

from furnace.evolution.config import ExperimentConfig, load_config, parse_config
from furnace.evolution.engine import Bred, Evolution, Progress
from furnace.evolution.estimate import Estimate, estimate
from furnace.evolution.plans import Plan
from furnace.evolution.records import MemoryResults
from furnace.evolution.report import ExperimentReport, render_report
from furnace.evolution.tracker import NullTracker, Tracker

__all__ = [
    "Bred",
    "Estimate",
    "Evolution",
    "ExperimentConfig",
    "ExperimentReport",
    "MemoryResults",
    "NullTracker",
    "Plan",
    "Progress",
    "Tracker",
    "estimate",
    "load_config",
    "parse_config",
    "render_report",
]
