"""Starting ``furnace`` loads the command line, not the core: furnace.evolution, furnace.writing and
furnace.scoring load when a command that needs them runs (each CLI start would otherwise pay for them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORE = ("furnace.evolution", "furnace.writing", "furnace.scoring", "furnace.fusion")

PROBE = f"""
import sys
from furnace.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
core = {CORE!r}
names = [m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in core)]
print("loaded core: " + ",".join(sorted(names)))
"""


def _loaded(stdout: str) -> list[str]:
    [line] = [line for line in stdout.splitlines() if line.startswith("loaded core: ")]
    return [name for name in line.removeprefix("loaded core: ").split(",") if name]


def test_furnace_help_loads_no_core_package() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Usage: " in out.stdout  # the commands were registered and the help printed
    assert _loaded(out.stdout) == []


def test_the_probe_sees_a_core_package_once_a_command_needs_it() -> None:
    probe = PROBE.replace('main(["--help"])', "import furnace.evolution.config; main(['--help'])")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "furnace.evolution" in _loaded(out.stdout)
