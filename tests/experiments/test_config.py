"""Experiment files: validation naming the field, estimate, budget refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace import resources
from furnace.domain.errors import InputError
from furnace.evolution.config import KNOWN_OPERATORS, load_config, parse_config
from furnace.evolution.estimate import estimate

REPO = Path(__file__).resolve().parents[2]


def test_demo_config_ships_and_is_valid():
    cfg = load_config(resources.DEMO_EXPERIMENT)
    assert cfg.name == "demo" and cfg.population > cfg.selection.elitism
    est = estimate(cfg, 3)
    assert est.calls > 0 and not est.over_budget(cfg)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"population": 1}, "population"),
        ({"operators": {"splice": 1.0}}, "operators"),
        ({"scorers": {"vibes": 1.0}}, "scorers"),
        ({"selection": {"tournament_size": 0}}, "selection.tournament_size"),
        ({"budget": {"max_calls": -3}}, "budget.max_calls"),
        ({"concurency": 3}, "concurency"),
    ],
)
def test_validation_errors_name_the_field(change, field):
    with pytest.raises(InputError) as err:
        parse_config({"name": "x", **change})
    assert field in str(err.value)
    assert err.value.field == field


def test_elitism_must_leave_room_for_children():
    with pytest.raises(InputError, match="elitism"):
        parse_config({"name": "x", "population": 3, "selection": {"elitism": 3}})


def test_estimate_counts_judges_and_exceeds_small_budgets():
    cfg = parse_config(
        {
            "name": "x",
            "population": 4,
            "generations": 2,
            "scorers": {"fidelity": 1, "tone": 1, "brief_fit": 1},
            "budget": {"max_calls": 10},
        }
    )
    est = estimate(cfg, 2)
    # 2 probes: 1 train, 1 validation, no test. Each individual answers validation only: generation 0:
    # 4 x 1 probe x 3 samples x (1 reply + 2 judges); then 2 children (the default elitism keeps the best
    # half of 4) x (1 fusion + 9) per generation; after the search the top 3 answer validation again
    # (fresh samples: 3 x 1 x 9) and every member made (4 + 2 x 2 <= 10 + 3) answers train for the report
    assert cfg.children_per_generation == 2 and cfg.samples_per_probe == 3
    assert est.calls == 4 * 1 * 9 + 2 * 2 * (1 + 9) + 3 * 1 * 9 + 8 * 1 * 9
    assert est.over_budget(cfg) and "max_calls" in est.over_budget(cfg)[0]
    # 12 probes (6 train, 3 validation, 3 test): the report's members answer train and test
    assert estimate(cfg, 12).calls == 4 * 3 * 9 + 2 * 2 * (1 + 27) + 3 * 3 * 9 + 8 * (6 + 3) * 9
    # a reflected child: its minibatch of train probes, and its parent's (at most), on top
    reflective = parse_config({**cfg.model_dump(mode="json"), "operators": {"reflect": 1.0}})
    assert estimate(reflective, 12).calls - estimate(cfg, 12).calls == 2 * 2 * (2 * 3 * 9)


@pytest.mark.parametrize("operator", KNOWN_OPERATORS)
def test_every_known_operator_has_an_estimate(operator):
    cfg = parse_config({"name": "x", "population": 4, "generations": 1, "operators": {operator: 1.0}})
    assert estimate(cfg, 2).calls > estimate(parse_config({"name": "x", "population": 4, "generations": 0}), 2).calls


def test_experiment_id_depends_on_config_model_and_inputs():
    a = parse_config({"name": "x"})
    assert a.experiment_id("m") == parse_config({"name": "x"}).experiment_id("m")
    assert a.experiment_id("m") != a.experiment_id("other")
    assert a.experiment_id("m") != parse_config({"name": "x", "seed": 1}).experiment_id("m")
    assert a.experiment_id("m", {"seeds": ["h1"]}) != a.experiment_id("m", {"seeds": ["h2"]})
