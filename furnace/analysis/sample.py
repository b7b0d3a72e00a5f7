"""Data for the notebooks: the user's FURNACE_HOME when it has some, else a small offline sample.

This is edge code (like the CLI): it builds adapters from settings through
:mod:`furnace.adapters.factory` and the experiment command's ``prepare``. The
sample runs offline in ~5-20 s: the sample library, two small evolution
experiments with different configs (logged to MLflow in the sample home) and
three revision chats whose suggestions teach (and reinforce) preferences.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from furnace import resources
from furnace.settings import FurnaceSettings

LIBRARY_DIR = resources.LIBRARY_DIR
Need = Literal["experiments", "revisions", "mlflow"]

SEED_IDS = ["viral-copywriter", "empathetic-coach", "data-science-mentor", "academic-editor"]
SAMPLE_CONFIGS: dict[str, dict[str, Any]] = {
    # every operator appears, reflect included: it is the one that reads the judge's feedback, so
    # the sample's operator board and lineage show what it earns
    "sample-crossover": {"operators": {"crossover": 0.6, "mutation": 0.2, "reflect": 0.2}, "mutation_rate": 0.25},
    "sample-mutation": {"operators": {"crossover": 0.2, "mutation": 0.5, "reflect": 0.3}, "mutation_rate": 0.4},
}
REVISION_SESSIONS: list[tuple[str, str, list[str]]] = [
    (
        "viral-copywriter",
        "summer travel",
        ["too formal, make it livelier", "shorten the last paragraph", "add an emoji"],
    ),
    ("viral-copywriter", "working from home", ["make it livelier", "add an emoji"]),
    ("lifestyle-blogger-zh", "夏日防晒", ["太正式了，活泼一点", "加一个 emoji"]),
]


def sample_config(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """One small experiment config (5 seeds, 3 generations, 2 probes) with ``overrides`` applied."""
    base: dict[str, Any] = {
        "name": name,
        # on this small landscape about half the seeds end with a first-generation child on top
        # (ancestry 1); seed 13's best is a generation-2 crossover with four ancestors (notebook tests)
        "seed": 13,
        "population": 4,
        "generations": 3,
        "seeds": {"ids": SEED_IDS},
        "probes": {"set": "writing-en", "limit": 1},
        "concurrency": 2,
        "scorers": {"constraints": 0.2, "fidelity": 0.2, "tone": 0.15, "brief_fit": 0.4, "diversity": 0.05},
        "budget": {"max_calls": 1000},
    }
    return base | overrides


def _count(db_path: Path, table: str) -> int:
    from furnace.storage.duckdb.db import Database

    if not db_path.exists():
        return 0
    try:
        return int(Database(db_path, migrate=False).query(f"SELECT count(*) FROM {table}")[0][0])
    except Exception:  # no such table yet, or locked by a writer: treat as no data
        return 0


def has_data(settings: FurnaceSettings, need: Need) -> bool:
    """Whether ``settings.home`` holds what a notebook needs (experiments, revisions, or MLflow runs)."""
    db = settings.db_path
    if need == "revisions":
        return _count(db, "revisions") > 0
    has_experiments = _count(db, "experiment_individuals") > 0
    if need == "mlflow":
        return has_experiments and (settings.mlflow_uri is not None or (settings.home / "mlflow.db").exists())
    return has_experiments


def build_sample(home: Path, need: Need | None = None) -> dict[str, Any]:
    """Fill ``home`` with the offline sample (all of it, or just what ``need`` asks for: revisions
    need no experiment, experiments no MLflow); returns the experiment ids and content ids made."""
    import yaml

    from furnace.adapters.factory import build_content_store
    from furnace.cli.context import CliContext
    from furnace.cli.experiment_cmd import prepare
    from furnace.evolution.config import parse_config
    from furnace.interop.importers import import_library

    home.mkdir(parents=True, exist_ok=True)
    ctx = CliContext(settings=FurnaceSettings(home=home, model=None, embedder="hash", mlflow_uri=None))
    import_library(LIBRARY_DIR, ctx.store, keep_existing=True)
    experiment_ids = []
    for name, overrides in SAMPLE_CONFIGS.items() if need != "revisions" else ():
        data = sample_config(name, overrides)
        (home / f"{name}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
        report = prepare(ctx, parse_config(data, source=name), track=need in (None, "mlflow")).evolution.run()
        experiment_ids.append(report.experiment_id)
    contents = []
    if need in (None, "revisions"):
        contents = build_revision_sample(ctx.store, build_content_store(ctx.settings, db=ctx.db), ctx.llm)
    from furnace.storage.duckdb import snapshot

    snapshot.refresh(ctx.db)  # analysis reads the snapshot: it holds the whole sample
    ctx.close()
    return {"home": str(home), "experiments": experiment_ids, "contents": contents}


def build_revision_sample(store: Any, content_store: Any, llm: Any) -> list[str]:
    """Write one piece per :data:`REVISION_SESSIONS` entry and revise it with each suggestion."""
    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise

    made = []
    for persona, topic, suggestions in REVISION_SESSIONS:
        content, _ = generate_content(store, content_store, llm, persona_id=persona, topic=topic)
        for suggestion in suggestions:
            revise(store, content_store, llm, content.id, suggestion)
        made.append(content.id)
    return made


def default_home(start: Path | None = None) -> Path:
    """``data/`` of the working directory or of the nearest folder above it that has a furnace database
    (a notebook runs in ``notebooks/`` of a checkout where ``make demo`` wrote ``data/``), else ``data``."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "data" / "furnace.duckdb").is_file():
            return folder / "data"
    return Path("data")


def analysis_settings(need: Need = "experiments", *, env: dict[str, str] | None = None) -> FurnaceSettings:
    """Settings for a notebook: ``$FURNACE_HOME`` (or :func:`default_home`) when it holds what is
    needed, else a fresh temporary home filled with :func:`build_sample`."""
    env = dict(os.environ if env is None else env)
    home = Path(env["FURNACE_HOME"]) if env.get("FURNACE_HOME") else default_home()
    settings = FurnaceSettings(home=home)
    if has_data(settings, need):
        return settings
    sample_home = Path(tempfile.mkdtemp(prefix="furnace-sample-")) / "home"
    build_sample(sample_home, need)
    return FurnaceSettings(home=sample_home, model=None, embedder="hash", mlflow_uri=None)
