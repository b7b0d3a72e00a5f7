"""The report a run returns is built from the records it holds (read at the start, then what it
wrote), never read back: it must equal a report built from the store's own read-back."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from experiments.helpers import Boom, PureBreeder, dying_after, library, scripted_llm
from experiments.test_evolution import make
from furnace.evolution.report import build_report
from furnace.llm.fakes import FlakyLLM


def _read_back(evo, report):
    """The report built as before: from every individual and generation the store holds now."""
    results = evo.results
    return build_report(
        results.individuals(evo.experiment_id),
        results.generations(evo.experiment_id),
        experiment_id=evo.experiment_id,
        name=evo.config.name,
        model=evo.llm.model_name,
        status=evo.status,
        board=evo.board,
        totals=report.totals,
        judge_model=evo.judge_model,
        held_out=report.held_out,
    )


def _same(evo, report):
    again = _read_back(evo, report)
    assert again == report
    assert json.dumps(asdict(again)) == json.dumps(asdict(report))  # key order too (what --json prints)
    stored = evo.results.get_experiment(evo.experiment_id)
    assert stored.status == report.status and stored.summary == json.loads(json.dumps(report.summary()))


@pytest.fixture
def stored_results(settings):
    from experiments.helpers import live_db
    from furnace.storage.sql.experiments import SQLExperimentResults

    return SQLExperimentResults(live_db(settings.home))


def test_a_run_reports_what_a_read_back_reports(stored_results):
    evo = make(stored_results)
    report = evo.run()
    assert report.status == "finished" and report.leaderboard
    _same(evo, report)


def test_a_resumed_run_reports_what_a_read_back_reports(stored_results):
    seeds = library()
    inner = PureBreeder(seeds)
    dying = dying_after(inner, 8)  # in generation 2 (5 children per generation)

    with pytest.raises(Boom):
        make(stored_results, breeder=dying).run()
    assert stored_results.individuals(make().experiment_id)  # the killed run left records to read at the start
    resumed = make(stored_results, breeder=inner)
    report = resumed.run()
    _same(resumed, report)
    assert report.result_signature() == make(breeder=PureBreeder(seeds)).run().result_signature()


def test_a_rerun_that_replaces_unscored_records_reports_what_a_read_back_reports(stored_results):
    seeds = library()
    breeder = PureBreeder(seeds)
    flaky = make(stored_results, llm=FlakyLLM(scripted_llm(), rate=0.15, seed=2), breeder=breeder)
    first = flaky.run()
    assert first.unscored  # records the rerun replaces
    _same(flaky, first)
    rerun = make(stored_results, breeder=breeder)
    report = rerun.run()
    assert not report.unscored
    _same(rerun, report)
