"""A small offline data set for notebooks run on a fresh clone.

:func:`build_sample` fills the home of the :class:`~furnace.runtime.Runtime` it
is given (see :func:`furnace.runtime.analysis_runtime`, which decides whether a
notebook reads the user's data or this sample). It runs offline in ~5-20 s: the
sample library, two small evolution experiments with different configs (logged
to MLflow in the sample home) and three revision chats whose suggestions teach
(and reinforce) preferences.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from furnace import resources
from furnace.settings import FurnaceSettings

if TYPE_CHECKING:  # the runtime is built at the edge and handed in
    from furnace.llm.seam import LLM
    from furnace.runtime import Runtime
    from furnace.storage.store import ElixirStore
    from furnace.writing.content import ContentStore

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
    """One small experiment config (4 members, 3 generations, 3 probes: one of each split) with ``overrides``
    applied."""
    base: dict[str, Any] = {
        "name": name,
        # which bred agent ends on top (and how deep its ancestry goes) depends on this seed; the
        # lineage notebook shows the best *bred* agent, which has an ancestry whatever the seed
        "seed": 13,
        "population": 4,
        "generations": 3,
        "seeds": {"ids": SEED_IDS},
        "probes": {"set": "writing-en", "limit": 3},  # 1 train, 1 validation, 1 test (docs/methods.md)
        "concurrency": 2,
        "scorers": {"constraints": 0.2, "fidelity": 0.2, "tone": 0.15, "brief_fit": 0.4, "diversity": 0.05},
        "budget": {"max_calls": 1000},
    }
    return base | overrides


def sample_settings(home: Path) -> FurnaceSettings:
    """Settings for a sample home: offline engine, hash embedder, MLflow beside the data."""
    return FurnaceSettings(home=home, model=None, embedder="hash", mlflow_uri=None)


def build_sample(runtime: Runtime, need: Need | None = None) -> dict[str, Any]:
    """Fill the runtime's home with the offline sample (all of it, or just what ``need`` asks for:
    revisions need no experiment, experiments no MLflow); returns the experiment ids and content ids made."""
    import yaml

    from furnace.evolution.config import parse_config
    from furnace.interop.importers import import_library

    home = runtime.settings.home
    home.mkdir(parents=True, exist_ok=True)
    import_library(LIBRARY_DIR, runtime.store, keep_existing=True)
    experiment_ids = []
    for name, overrides in SAMPLE_CONFIGS.items() if need != "revisions" else ():
        data = sample_config(name, overrides)
        (home / f"{name}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
        prepared = runtime.prepare_experiment(parse_config(data, source=name), track=need in (None, "mlflow"))
        experiment_ids.append(prepared.evolution.run().experiment_id)
    contents = []
    if need in (None, "revisions"):
        contents = build_revision_sample(runtime.store, runtime.content_store, runtime.llm)
    return {"home": str(home), "experiments": experiment_ids, "contents": contents}


def build_revision_sample(store: ElixirStore, content_store: ContentStore, llm: LLM) -> list[str]:
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
