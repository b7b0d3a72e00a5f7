"""Data shipped with the package: the sample library, probe sets and example experiments.

Paths resolve inside the installed package, so an editable checkout and a plain
``pip install`` find the same files.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

ROOT = Path(str(files(__name__)))
LIBRARY_DIR = ROOT / "elixirs"
PROBES_DIR = ROOT / "probes"
EXPERIMENTS_DIR = ROOT / "experiments"
DEMO_EXPERIMENT = EXPERIMENTS_DIR / "demo.yaml"
