"""The search benchmark's small CI variant: equal budgets, honest figures, files written, reproducible.

No timing or quality targets here (those belong to ``python -m bench search``); this checks
that the comparison is fair and its numbers are earned.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_search as bs


@pytest.fixture(scope="module")
def ci(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    return bs.run_ci(out), out


def test_every_method_spends_the_same_budget_and_no_more(ci):
    result, _ = ci
    runs = result["runs"]
    assert {r["method"] for r in runs} == {"random", "hill", "evolution", "evo+reflect"}
    assert {r["task"] for r in runs} == {"launch-coach-en", "family-life-zh"}
    budget = result["budget_calls"]
    for r in runs:
        if r["method"] in bs.OPERATORS:  # the loop runs past the budget; credited: the generations within it
            assert 0 < r["calls"] <= budget < r["spent"] and "credited generations" in r["status"]
        else:
            assert r["calls"] == budget  # metered non-cached calls: exactly the budget
        assert r["curve"] and all(c <= r["calls"] for c, _ in r["curve"])
        assert r["best"] == max(b for _, b in r["curve"])
        assert r["effective_concurrency"] is None  # untimed runs claim no concurrency


def test_summary_statistics_follow_from_the_runs(ci):
    result, _ = ci
    for task, data in result["summary"].items():
        for method, row in data["methods"].items():
            bests = sorted(r["best"] for r in result["runs"] if r["task"] == task and r["method"] == method)
            assert sorted(row["best"]) == bests
            assert row["median"] == pytest.approx(sum(bests) / 2, abs=1e-4)
            assert row["iqr"] == pytest.approx((bests[1] - bests[0]) / 2, abs=1e-4)
        wins = data["win_rate"]
        for a in data["methods"]:
            for b in data["methods"]:
                if a != b:
                    assert wins[f"{a} vs {b}"] + wins[f"{b} vs {a}"] == pytest.approx(1.0)
    reflect_ops = result["summary"]["family-life-zh"]["methods"]["evo+reflect"]["operators"]
    assert reflect_ops["reflect"]["children"] > 0


def test_table_json_and_figure_are_written(ci):
    result, out = ci
    saved = json.loads((out / "search-ci.json").read_text(encoding="utf-8"))
    assert saved["summary"] == json.loads(json.dumps(result["summary"]))
    png = out / "search-ci.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = bs.table(result["summary"])
    assert "evo+reflect" in text and "family-life-zh" in text


@pytest.mark.parametrize("method", ["evo+reflect", "evolution"])
def test_same_seed_same_best_and_calls(method):
    """The credited result never depends on thread timing (it did when the loop stopped at the budget)."""
    runs = [bs.run_one("family-life-zh", method, 3, 90, 0.0) for _ in range(3)]
    assert len({(r.best, r.calls, tuple(r.curve), json.dumps(r.operators, sort_keys=True)) for r in runs}) == 1


def test_targets_and_quartiles_are_computed_not_asserted():
    assert bs.quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)
    assert bs.win_rate([1, 2, 3], [1, 1, 4]) == pytest.approx(0.5)
    summary = {
        "t": {
            "methods": {
                "random": {"median": 0.5, "iqr": 0.05, "effective_concurrency": None},
                "evolution": {"median": 0.65, "iqr": 0.1, "effective_concurrency": None},
                "evo+reflect": {"median": 0.7, "iqr": 0.1, "effective_concurrency": 6.0},
                "gepa": {"median": 0.6, "iqr": 0.1, "effective_concurrency": 1.5},
            },
            "win_rate": {},
        }
    }
    assert [ok for _, ok in bs.targets(summary)] == [True, True, False]  # 6.0 < 5 x 1.5
    summary["t"]["methods"]["evolution"]["median"] = 0.58  # above random, but by less than the IQR (0.1)
    assert [ok for _, ok in bs.targets(summary)] == [True, False, False]
