"""`furnace experiment run|list|show` and `furnace sweep` in-process (hash embedder, no MLflow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from furnace.cli import main

CONFIG = Path(__file__).parent / "data" / "small.yaml"


@pytest.fixture()
def library_home(home, monkeypatch):
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    from furnace.cli.elixir_cmd import LIBRARY_DIR
    from furnace.interop.importers import import_library
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    import_library(LIBRARY_DIR, Runtime(FurnaceSettings()).store, keep_existing=True)
    return home


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_over_budget_estimate_refuses_unless_yes(library_home, smaller, capsys):
    cfg = smaller  # the budget's refusal and its stop do not depend on the experiment's size
    cfg.write_text(cfg.read_text().replace("max_calls: 500", "max_calls: 40"))
    code, out, err = run(capsys, "experiment", "run", str(cfg), "--no-mlflow")
    assert code == 1 and "estimate exceeds the budget" in err and "--yes" in err
    code, out, err = run(capsys, "experiment", "run", str(cfg), "--no-mlflow", "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["status"].startswith("stopped") and report["leaderboard"]


def test_run_list_show(library_home, smaller, capsys):
    code, out, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow")
    assert code == 0, err
    assert (
        "leaderboard" in out and "champion's lineage" in out and "test [95% interval]" in out and "pareto front" in out
    )
    assert "estimate: ~" in err and "generation 2/2" in err
    code, out, _ = run(capsys, "experiment", "list", "--json")
    rows = json.loads(out)
    assert len(rows) == 1 and rows[0]["status"] == "finished"
    code, out, _ = run(capsys, "experiment", "show", rows[0]["experiment_id"], "--json")
    shown = json.loads(out)
    assert [g["generation"] for g in shown["generations"]] == [0, 1, 2]
    assert shown["leaderboard"][0]["fitness"] == pytest.approx(rows[0]["best_fitness"], abs=1e-6)
    best = shown["leaderboard"][0]["agent_id"]
    notes = shown["feedback"][best]  # the judge's per-probe feedback, read back from DuckDB
    assert notes and {n["scorer"] for n in notes} == {"fidelity"} and all(n["feedback"] for n in notes)
    assert {n["probe"] for n in notes} <= {"launch-note", "churn-numbers"}
    code, out, _ = run(capsys, "experiment", "show", rows[0]["experiment_id"])
    assert f"judge feedback on {best}" in out and notes[0]["feedback"] in out
    # the lab assistant's judge-feedback intent reads the same stored feedback; asked about a bred agent of the
    # top three (the best can be a library seed, and a seed's name asks about that persona's agents)
    bred = sorted(a for a in shown["feedback"] if a.startswith("agt-"))[0]
    code, out, err = run(capsys, "ask", f"what did the judge say about {bred}?", "--json")
    assert code == 0, err
    result = json.loads(out)[-1]["result"]
    assert result["columns"][5:7] == ["feedback", "reason"]
    assert result["intent"] == "judge_feedback"
    asked = {(r["probe"], r["feedback"]) for r in result["items"] if r["agent_id"] == bred and r["feedback"]}
    assert asked and asked == {(n["probe"], n["feedback"]) for n in shown["feedback"][bred] if n["feedback"]}
    code, _, err = run(capsys, "experiment", "show", "exp-nope")
    assert code == 1 and "no experiment" in err


def test_show_prints_test_fitness_with_its_interval_and_the_gap_as_the_report_does(library_home, tmp_path, capsys):
    """Four probes (one held out): `experiment show` gives every generation's best and every ranked agent
    their train fitness, held-out test fitness with its 95% interval, and the train-test gap — the
    report's figures, in text and in --json."""
    from furnace.evolution.report import interval_text

    cfg = tmp_path / "held.yaml"
    text = CONFIG.read_text().replace("limit: 2", "limit: 4").replace("max_calls: 500", "max_calls: 5000")
    cfg.write_text(text.replace("generations: 3", "generations: 1"))
    code, out, err = run(capsys, "experiment", "run", str(cfg), "--no-mlflow", "--json")
    assert code == 0, err
    report = json.loads(out)
    keys = ("train_fitness", "test_fitness", "test_low", "test_high", "train_test_gap")
    code, out, _ = run(capsys, "experiment", "list", "--json")
    [listed] = [r for r in json.loads(out) if r["experiment_id"] == report["experiment_id"]]
    champion = next(r for r in report["leaderboard"] if r["agent_id"] == listed["best_agent"])
    assert {k: listed[k] for k in keys} == {k: champion[k] for k in keys}
    code, out, _ = run(capsys, "experiment", "list")
    assert f"test {interval_text(champion)}  gap {champion['train_test_gap']:+.3f}" in out
    code, out, _ = run(capsys, "experiment", "show", report["experiment_id"], "--json")
    shown = json.loads(out)
    assert len(shown["generations"]) == len(report["generations"]) == 2
    for mine, theirs in zip(shown["generations"], report["generations"], strict=True):
        assert mine[f"best_{keys[1]}"] is not None
        assert {k: mine[f"best_{k}"] for k in keys} == {k: pytest.approx(theirs[f"best_{k}"], abs=1e-4) for k in keys}
    board = {r["agent_id"]: r for r in report["leaderboard"]}
    assert [r["agent_id"] for r in shown["leaderboard"]] == list(board)
    for row in shown["leaderboard"]:
        assert {k: row[k] for k in keys} == {k: pytest.approx(board[row["agent_id"]][k], abs=1e-4) for k in keys}
    code, out, _ = run(capsys, "experiment", "show", report["experiment_id"])
    champion = next(line for line in out.splitlines() if line.endswith("champion"))
    row = next(r for r in shown["leaderboard"] if r["agent_id"] in champion)
    assert f"test {interval_text(row)}  gap {row['train_test_gap']:+.3f}" in champion
    assert f"train {row['train_fitness']:.3f}" in champion
    first = shown["generations"][0]
    assert f"test {interval_text({k: first[f'best_{k}'] for k in keys})}" in out


def test_show_gives_the_runs_totals_as_its_report_does_with_the_held_out_part(library_home, smaller, capsys):
    """`experiment show` prints the run's totals (the call ledger's) as the report's totals line, and says how
    many of them the held-out evaluation made: the generations' calls add up to the rest."""
    code, report_text, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow")
    assert code == 0, err
    [report_line] = [line for line in report_text.splitlines() if line.startswith("calls: ")]
    exp_id = report_text.split()[1]
    code, out, err = run(capsys, "experiment", "show", exp_id, "--json")
    assert code == 0, err
    shown = json.loads(out)
    totals, held = shown["totals"], shown["held_out_totals"]
    assert {k: totals[k] for k in ("calls", "cached_calls", "tokens", "cost_usd")} == {
        k: shown["summary"][k] for k in ("calls", "cached_calls", "tokens", "cost_usd")
    }
    assert held["calls"] > 0 and held["calls"] + sum(g["calls"] for g in shown["generations"]) == totals["calls"]
    assert held["cached_calls"] + sum(g["cached_calls"] for g in shown["generations"]) == totals["cached_calls"]
    code, text, err = run(capsys, "experiment", "show", exp_id)
    assert code == 0, err
    lines = text.splitlines()
    assert report_line in lines  # the same line as the run's report
    after = lines[lines.index(report_line) + 1]
    assert after.startswith("  of them the held-out evaluation after the search")
    assert f": {held['calls']} model calls + {held['cached_calls']} cache hits; tokens {held['tokens']}" in after


def test_show_lists_unscored_individuals_apart_never_ranked(library_home, smaller, capsys):
    from furnace.evolution.records import IndividualRecord, ScoreRow
    from furnace.runtime import Runtime

    code, out, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow", "--json")
    exp_id = json.loads(out)["experiment_id"]
    failed = (ScoreRow("p", "fidelity", 0.0, "judge failed", failed=True), ScoreRow("p", "tone", 1.0, "ok"))
    reason = "fidelity: launch-note: judge call failed: LLMRateLimit"
    Runtime.from_env(home=str(library_home)).results.save_individual(
        IndividualRecord(
            exp_id, 3, "agt-failed-judge", 9, "mutation", (), None, {}, "", 1.0, {"tone": 1.0}, failed, 1, (reason,)
        )
    )
    code, out, _ = run(capsys, "experiment", "show", exp_id, "--json")
    shown = json.loads(out)
    assert "agt-failed-judge" not in [r["agent_id"] for r in shown["leaderboard"]]  # fitness 1.0, yet not ranked
    assert shown["unscored"] == [
        {
            "agent_id": "agt-failed-judge",
            "generation": 3,
            "operator": "mutation",
            "unscored": "fidelity",
            "reason": reason,
        }
    ]
    code, out, _ = run(capsys, "experiment", "show", exp_id)
    assert "unscored (1): a failure, not a score" in out
    [line] = [x for x in out.splitlines() if "agt-failed-judge" in x]
    assert line.split() == ["agt-failed-judge", "gen", "3", "fidelity:", *reason.split()]


def test_invalid_file_names_the_field(library_home, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\npopulation: 1\n")
    code, _, err = run(capsys, "experiment", "run", str(bad))
    assert code == 1 and "population" in err


def test_sweep_scores_a_grid_and_stores_it_like_an_experiment(library_home, capsys):
    args = ("sweep", "viral-copywriter", "--rates", "0.1,0.3", "--seeds", "1,2", "--limit", "1", "--no-mlflow")
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert sorted((r["rate"], r["seed"]) for r in rows) == [(0.0, 0), (0.1, 1), (0.1, 2), (0.3, 1), (0.3, 2)]
    assert len({r["agent_id"] for r in rows}) == 5 and all(0 <= r["fitness"] <= 1 for r in rows)
    assert [r["fitness"] for r in rows] == sorted((r["fitness"] for r in rows), reverse=True)
    [sweep_id] = {r["sweep_id"] for r in rows}
    code, out, _ = run(capsys, "experiment", "show", sweep_id, "--json")
    shown = json.loads(out)  # its scores are in DuckDB: the base is generation 0, the variants generation 1
    assert shown["config"]["kind"] == "mutation-sweep" and shown["config"]["base"] == "viral-copywriter"
    assert {(r["agent_id"], r["fitness"]) for r in shown["leaderboard"]} == {
        (r["agent_id"], r["fitness"]) for r in rows
    }
    assert [g["generation"] for g in shown["generations"]] == [0, 1]
    from furnace.runtime import Runtime

    def ledger() -> tuple[int, int]:
        rt = Runtime.from_env(home=str(library_home))
        cells = [rt.llm.for_run(f"{sweep_id}/{i}").run_totals() for i in range(5)]
        return sum(c.model_calls for c in cells), sum(c.cached_calls for c in cells)

    model_calls, _ = ledger()
    assert model_calls > 0 and shown["summary"]["model_calls"] == model_calls  # the ledger's figure
    assert sum(g["calls"] for g in shown["generations"]) == model_calls
    code, out, _ = run(capsys, *args, "--json")  # a rerun: every answer from the response cache
    assert json.loads(out) == rows and ledger()[0] == model_calls
    code, _, err = run(capsys, "sweep", "viral-copywriter", "--rates", "0,0.3", "--no-mlflow")
    assert code == 1 and "--rates" in err


def test_a_sweep_cell_a_failure_left_unscored_has_no_fitness_and_ranks_last(library_home, capsys, monkeypatch):
    """Its partial figures are no score: fitness and held-out figures null in --json, listed after every
    scored cell (which stay fittest first), `unscored: <reason>` in the table, never the sweep's best."""
    import furnace.llm.offline as offline
    from experiments.helpers import JudgeOutage
    from furnace.runtime import Runtime

    real = offline.OfflineEngine
    monkeypatch.setattr(offline, "OfflineEngine", lambda: JudgeOutage(real))  # what the runtime builds offline
    monkeypatch.setattr(JudgeOutage, "share", 0.05)  # a cell asks ~10 judgements: some keep every one, some lose one
    args = ("sweep", "viral-copywriter", "--rates", "0.1,0.3,0.5", "--seeds", "1,2,3", "--limit", "2", "--no-mlflow")
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    rows = json.loads(out)
    failed = [r for r in rows if r["failures"]]
    scored = [r for r in rows if not r["failures"]]
    assert failed and scored, "the outage should leave some cells unscored and some scored"
    assert rows == scored + failed  # every scored cell first
    assert [r["fitness"] for r in scored] == sorted((r["fitness"] for r in scored), reverse=True)
    assert all(r["fitness"] is None and r["test_fitness"] is None and r["train_fitness"] is None for r in failed)
    sweep_id = rows[0]["sweep_id"]
    summary = Runtime.from_env(home=str(library_home)).results.get_experiment(sweep_id).summary
    assert summary["best_agent"] == scored[0]["agent_id"]  # the table's first row (ties by agent id, as the best)
    code, out, _ = run(capsys, *args)  # the table, answered from the cache: the same cells
    assert out.count("unscored: ") == len(failed)


def test_a_sweep_ranks_without_its_test_probes_and_shows_test_beside_it(library_home, capsys):
    """Four probes, one held out: each cell's fitness is over the other three (the ranking never reads the
    test probe), its test fitness with its 95% interval and the gap stand beside it, in the rows, the
    stored summary and `experiment show`."""
    from furnace.evolution.evaluate import combine
    from furnace.evolution.report import interval_text
    from furnace.evolution.sweep import DEFAULT_SCORERS
    from furnace.runtime import Runtime
    from furnace.scoring.probes import load_probe_set

    args = ("sweep", "viral-copywriter", "--rates", "0.3", "--seeds", "1,2", "--limit", "4", "--no-mlflow")
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    rows = json.loads(out)
    [test_id] = [p.id for p in load_probe_set("writing-en").head(4).splits()["test"]]
    [sweep_id] = {r["sweep_id"] for r in rows}
    rt = Runtime.from_env(home=str(library_home))
    stored = {r.agent_id: r for r in rt.results.individuals(sweep_id)}
    for row in rows:
        scores = stored[row["agent_id"]].scores
        assert {s.probe for s in scores} >= {test_id}  # scored on the test probe too, for the report
        searched = combine([s for s in scores if s.probe != test_id], DEFAULT_SCORERS)
        tested = combine([s for s in scores if s.probe in (test_id, "*")], DEFAULT_SCORERS)
        assert row["fitness"] == pytest.approx(searched.fitness, abs=1e-6)
        assert row["train_fitness"] == pytest.approx(searched.fitness, abs=1e-6)  # stored to 6 places
        assert row["test_fitness"] == pytest.approx(tested.fitness, abs=1e-6)
        assert row["test_low"] == row["test_fitness"] == row["test_high"]  # one test probe: a point
        assert row["train_test_gap"] == pytest.approx(row["fitness"] - row["test_fitness"], abs=1e-6)
    summary = rt.results.get_experiment(sweep_id).summary
    assert summary["held_out"]["splits"]["test"] == [test_id]
    assert summary["test_fitness"] == rows[0]["test_fitness"] and summary["best_agent"] == rows[0]["agent_id"]
    code, out, _ = run(capsys, *args)
    assert f"{rows[0]['fitness']:.3f}    {interval_text(rows[0])}" in out
    code, out, _ = run(capsys, "experiment", "show", sweep_id, "--json")
    shown = json.loads(out)
    assert {r["agent_id"]: r["test_fitness"] for r in shown["leaderboard"]} == {
        r["agent_id"]: pytest.approx(r["test_fitness"], abs=1e-4) for r in rows
    }
    assert all(g["best_test_fitness"] is not None for g in shown["generations"])


def test_a_rerun_after_a_seed_was_edited_says_it_forks_and_pins_rerun_the_old_one(
    library_home, smaller, tmp_path, capsys
):
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    code, out, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow", "--json")
    assert code == 0, err
    first = json.loads(out)
    assert first["seeds"] == ["viral-copywriter@1", "data-science-mentor@1", "empathetic-coach@1"]
    assert "seeds changed" not in err
    # a persona saved in between (the app's editor does this): seeds listed by id resolve to the new version
    store = Runtime(FurnaceSettings()).store
    coach = store.get_elixir("empathetic-coach")
    store.save_elixir(coach.model_copy(update={"identity": coach.identity + " Edited in the app."}))

    code, out, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow", "--same")
    assert code == 1 and "empathetic-coach@1 -> empathetic-coach@2" in err and "--same" in err
    assert len(json.loads(run(capsys, "experiment", "list", "--json")[1])) == 1  # nothing started

    code, out, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow")
    assert code == 0, err
    assert f"seeds changed since {first['experiment_id']} (empathetic-coach@1 -> empathetic-coach@2)" in err
    assert "seeds: viral-copywriter@1, data-science-mentor@1, empathetic-coach@2" in out

    # pinning the old version is the first experiment again: same id, its records reused (0 new calls)
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(smaller.read_text().replace("empathetic-coach]", "empathetic-coach@1]"))
    code, out, err = run(capsys, "experiment", "run", str(pinned), "--no-mlflow", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["experiment_id"] == first["experiment_id"] and "seeds changed" not in err
    assert again["seeds"] == first["seeds"] and again["leaderboard"] == first["leaderboard"]
    shown = json.loads(run(capsys, "experiment", "show", again["experiment_id"], "--json")[1])
    assert shown["seeds"] == again["seeds"]


def test_a_malformed_pin_is_an_input_error(library_home, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.read_text().replace("empathetic-coach,", "empathetic-coach@latest,"))
    code, _, err = run(capsys, "experiment", "run", str(bad), "--no-mlflow")
    assert code == 1 and "id@version" in err


def test_an_empty_library_names_the_command_that_fills_it(home, monkeypatch, tmp_path, smaller, capsys):
    """With no elixirs, `experiment run` says how to import some, whether the config names its seeds or asks
    for a language; the command it names does it (the run then gets as far as its budget check, which refuses
    a budget of 1 call before any call)."""
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    named = smaller.read_text().replace("max_calls: 500", "max_calls: 1")
    smaller.write_text(named)
    by_language = tmp_path / "by-language.yaml"
    by_language.write_text(re.sub(r"seeds: \{ids: .*\}", "seeds: {language: en}", named))
    for config, says in ((smaller, "seeds.ids: no elixir 'viral-copywriter'"), (by_language, "needs at least 2")):
        code, out, err = run(capsys, "experiment", "run", str(config), "--no-mlflow")
        assert code == 1 and says in err and "furnace import --library" in err, err
    code, _, err = run(capsys, "import", "--library")
    assert code == 0, err
    for config in (smaller, by_language):
        code, out, err = run(capsys, "experiment", "run", str(config), "--no-mlflow")
        assert code == 1 and "cannot cover the run's first unit: scoring seed" in err, err


def test_a_budget_below_the_first_unit_is_refused_before_anything_even_with_yes(library_home, smaller, capsys):
    """A run whose budget cannot score even its first seed would stop with nothing to report: it is refused
    before the experiment is recorded, naming the budget that does cover it; that budget starts it."""
    smaller.write_text(smaller.read_text().replace("max_calls: 500", "max_calls: 2"))
    code, out, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow", "--yes")
    assert code == 1 and "cannot cover the run's first unit" in err, err
    assert json.loads(run(capsys, "experiment", "list", "--json")[1]) == []
    needed = int(re.search(r"at least (\d+)", err).group(1))
    assert needed > 2
    smaller.write_text(smaller.read_text().replace("max_calls: 2", f"max_calls: {needed}"))
    code, out, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow", "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["status"].startswith("stopped") and len(report["leaderboard"]) == 1
    assert report["totals"]["calls"] <= needed


@pytest.mark.parametrize(
    ("seeds", "says"),
    [
        ("{language: fr}", "seeds: 0 of the library's {total} elixirs match seeds.language 'fr'"),
        ("{query: zzz-nothing, language: en}", "match seeds.query 'zzz-nothing' and seeds.language 'en'"),
        ("{ids: [go-reviewer]}", "seeds.ids: names 1 elixir, an experiment needs at least 2"),
    ],
)
def test_too_few_seeds_says_what_the_library_has_not_how_to_import_one(library_home, smaller, capsys, seeds, says):
    from collections import Counter

    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    library = Runtime(FurnaceSettings()).store.list_elixirs(origin="library")
    languages = ", ".join(f"{n} {lang}" for lang, n in sorted(Counter(e.language for e in library).items()))
    smaller.write_text(re.sub(r"seeds: \{ids: .*\}", f"seeds: {seeds}", smaller.read_text()))
    code, _, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow")
    assert code == 1 and says.format(total=len(library)) in err and "furnace import" not in err, err
    if "ids" not in seeds:
        assert f"(the library has {languages})" in err and len(library) >= 2


def test_an_unknown_probe_set_lists_the_shipped_sets(library_home, smaller, capsys):
    from furnace.scoring.probes import PROBES_DIR

    smaller.write_text(smaller.read_text().replace("set: writing-en", "set: writing-fr"))
    code, _, err = run(capsys, "experiment", "run", str(smaller), "--no-mlflow")
    shipped = sorted(p.stem for p in PROBES_DIR.glob("*.yaml"))
    assert code == 1 and "probe set 'writing-fr' not found: no writing-fr.yaml in" in err
    assert f"shipped sets: {', '.join(shipped)}" in err and "writing-en" in shipped
