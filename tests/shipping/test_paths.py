"""The package finds its files through itself, never through the checkout around it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from furnace.cli.demo_experiment import shown_path
from furnace.runtime import default_home

PACKAGE = Path(__file__).resolve().parents[2] / "furnace"
CLIMB = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?(?P<parents>\.parents\[(?P<n>\d+)\]|(?:\.parent)+)")


def levels_up(match: re.Match[str]) -> int:
    return int(match["n"]) + 1 if match["n"] is not None else match["parents"].count(".parent")


def test_no_module_climbs_out_of_the_package() -> None:
    offenders = []
    for module in PACKAGE.rglob("*.py"):
        inside = len(module.relative_to(PACKAGE).parts)  # folders between the file and furnace/, plus furnace/
        for match in CLIMB.finditer(module.read_text(encoding="utf-8")):
            if levels_up(match) > inside:
                offenders.append(f"{module.relative_to(PACKAGE.parent)}: {match.group(0)}")
    assert offenders == []


@pytest.mark.parametrize(
    ("source", "levels"),
    [("Path(__file__).parent", 1), ("Path(__file__).resolve().parents[2]", 3), ("Path(__file__).parent.parent", 2)],
)
def test_the_climb_check_counts_levels(source: str, levels: int) -> None:
    match = CLIMB.search(source)
    assert match is not None and levels_up(match) == levels


def test_default_home_is_the_nearest_data_folder_with_a_database(tmp_path: Path, monkeypatch) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    monkeypatch.chdir(checkout / "notebooks")
    assert default_home() == Path("data")  # nothing written yet: ./data, as FurnaceSettings has it
    (checkout / "data").mkdir()
    (checkout / "data" / "furnace.duckdb").write_bytes(b"")
    assert default_home() == (checkout / "data").resolve()
    assert default_home(tmp_path) == Path("data")  # above the checkout, nothing is found


def test_demo_file_is_shown_relative_to_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "pkg" / "demo.yaml"
    target.parent.mkdir()
    target.write_text("name: x\n")
    monkeypatch.chdir(tmp_path)
    assert shown_path(target) == str(Path("pkg") / "demo.yaml")
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    assert shown_path(target) == str(target.resolve())
