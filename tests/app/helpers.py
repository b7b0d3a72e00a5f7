"""Helpers for the app tests."""

from __future__ import annotations

import json
from pathlib import Path

from furnace import resources
from tests.conftest import seed_home  # noqa: F401 - the app tests seed their homes with it

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app" / "streamlit_app.py"  # what `streamlit run app/streamlit_app.py` runs from a checkout
LIBRARY_DIR = resources.LIBRARY_DIR


def store_for(home: Path):
    """The live store of ``home`` (what the app writes to)."""
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    return Runtime(FurnaceSettings(home=home)).store


def seed_family(home: Path, children: int) -> tuple[str, list[str]]:
    """``children`` mutations of viral-copywriter v1, then the library moves it to v3: a lineage of
    ``children + 1`` nodes. The root's id and the children's agent ids."""
    from furnace.domain.agent import Agent, agent_id_for
    from furnace.domain.elixir import edit
    from furnace.domain.lineage import Lineage

    store = store_for(home)
    parent = store.get_elixir("viral-copywriter")
    assert parent.version == 1
    ids = []
    for i in range(children):
        lineage = Lineage(parents=(parent.ref,), operator="mutation", params={"seed": i}, op_version="1")
        child = edit(parent, identity=f"A copywriter, variant {i}.")
        agent = Agent(id=agent_id_for(lineage.lineage_hash), elixir=child, lineage=lineage, system_prompt=f"v{i}")
        store.save_agent(agent)
        ids.append(agent.id)
    for n in (2, 3):
        store.save_elixir(edit(store.get_elixir("viral-copywriter"), identity=f"A copywriter, edition {n}."))
    return "viral-copywriter", ids


def no_errors(at) -> None:
    """The page rendered without an exception or an error box."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


# an experiment weighting people's picks (the human objective): 3 pairs asked after generation 0
PEOPLE_EXPERIMENT = """\
name: people
seed: 5
population: 4
generations: 1
seeds: {ids: [viral-copywriter, data-science-mentor, empathetic-coach, socratic-math-tutor]}
selection: {tournament_size: 2, elitism: 1}
probes: {set: writing-en, limit: 4}
scorers: {constraints: 0.3, fidelity: 0.3, brief_fit: 0.4, human: 0.5}
samples_per_probe: 1
reevaluate_top: 0
human_pairs: 3
concurrency: 2
"""


def run_experiment(home: Path, name: str, text: str) -> str:
    """Run the experiment file ``text`` (written to ``home/name``) offline with the hash embedder; its id."""
    from click.testing import CliRunner

    from furnace.cli import cli

    path = home / name
    path.write_text(text)
    result = CliRunner().invoke(
        cli,
        ["--home", str(home), "experiment", "run", str(path), "--no-mlflow", "--yes", "--json"],
        env={"FURNACE_EMBEDDER": "hash"},
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{") :])["experiment_id"]


SMALL_EXPERIMENTS = (("small-a", 7), ("small-b", 11))  # (name, seed): two runs to overlay


def small_demo(name: str, seed: int, generations: int = 2) -> str:
    """The demo experiment's file shrunk to 4 members and ``generations`` generations, named and seeded."""
    import re

    from furnace.resources import DEMO_EXPERIMENT

    small = re.sub(r"(?m)^population: \d+", "population: 4", DEMO_EXPERIMENT.read_text())
    small = re.sub(r"(?m)^generations: \d+", f"generations: {generations}", small)
    return re.sub(r"(?m)^seed: \d+", f"seed: {seed}", re.sub(r"(?m)^name: \w+", f"name: {name}", small))


def run_small_experiments(home: Path) -> list[str]:
    """Run the demo experiment shrunk (4 members, 2 generations) once per SMALL_EXPERIMENTS entry; their ids.
    The hash embedder (the app's, see ``app_server``): loading MiniLM was most of their CPU time."""
    return [run_experiment(home, f"{name}.yaml", small_demo(name, seed)) for name, seed in SMALL_EXPERIMENTS]
