"""The agreement statistics against hand-computed values, and Bradley–Terry on a planted ranking."""

from __future__ import annotations

import random

import pytest

from furnace.scoring import agreement as ag


def test_spearman_hand_computed() -> None:
    a = {"w": 1.0, "x": 2.0, "y": 3.0, "z": 4.0}
    b = {"w": 0.1, "x": 0.3, "y": 0.2, "z": 0.9, "only-b": 0.5}  # an agent one judge lacks is left out
    # rank differences 0, 1, 1, 0: rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert ag.spearman(a, b) == pytest.approx(0.8)
    assert ag.spearman(a, {k: -v for k, v in a.items()}) == pytest.approx(-1.0)


def test_spearman_ties_use_average_ranks() -> None:
    # ranks of a: 1, 2.5, 2.5, 4; of b: 1, 2, 3, 4 -> Pearson of the ranks = 4.5 / sqrt(4.5 * 5)
    a = {"w": 1.0, "x": 2.0, "y": 2.0, "z": 3.0}
    b = {"w": 1.0, "x": 2.0, "y": 3.0, "z": 4.0}
    assert ag.spearman(a, b) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)


def test_spearman_needs_agents_and_spread() -> None:
    assert ag.spearman({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}) is None
    assert ag.spearman({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 1.0, "b": 2.0, "c": 3.0}) is None


def test_alpha_hand_computed_small() -> None:
    # units [1, 1] and [2, 3]: D_o = (0 + 2) / 4 = 0.5; values 1, 1, 2, 3 (mean 1.75, squares 2.75):
    # D_e = 2 * 4 * 2.75 / (4 * 3) = 11/6; alpha = 1 - 0.5 / (11/6) = 8/11
    units = {("a", "p1"): {"j1": 1.0, "j2": 1.0}, ("a", "p2"): {"j1": 2.0, "j2": 3.0}}
    assert ag.krippendorff_alpha(units) == pytest.approx(8 / 11)


def test_alpha_krippendorff_published_example_with_missing_values() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", four observers, twelve units,
    # missing values: alpha (interval) = 0.849.
    rows = {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    }
    units = {u: {judge: (None if v[u] is None else float(v[u])) for judge, v in rows.items()} for u in range(12)}
    assert ag.krippendorff_alpha(units) == pytest.approx(0.849, abs=5e-4)


def test_alpha_none_without_pairable_values_or_spread() -> None:
    assert ag.krippendorff_alpha({"u": {"j1": 0.5}}) is None
    assert ag.krippendorff_alpha({"u": {"j1": 0.5, "j2": 0.5}, "v": {"j1": 0.5, "j2": 0.5}}) is None


def test_wilson_hand_computed() -> None:
    low, high = ag.wilson_interval(8, 10) or (0.0, 0.0)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert ag.wilson_interval(0, 0) is None


def test_share_of_agreement_counts() -> None:
    picks = [("A", 0.9, 0.1), ("B", 0.9, 0.1), ("A", 0.5, 0.5), ("tie", 0.2, 0.8), ("B", None, 0.4), ("B", 0.1, 0.7)]
    got = ag.share_of_agreement("judge-x", picks)  # type: ignore[arg-type]
    # decided and judged: 4 (agree, disagree, judge tie = half, agree) -> 2.5 / 4
    assert (got.picks, got.ties, got.unjudged) == (4, 1, 1)
    assert got.share == pytest.approx(2.5 / 4)
    assert got.interval == ag.wilson_interval(2.5, 4)
    assert not got.meaningful and "not yet meaningful" in got.reading()


def test_share_meaningful_from_min_picks() -> None:
    picks = [("A", 1.0, 0.0)] * ag.MIN_PICKS
    got = ag.share_of_agreement("j", picks)  # type: ignore[arg-type]
    assert got.meaningful and "better than a coin toss" in got.reading()


def test_readings_name_the_thresholds() -> None:
    assert "should not be trusted" in ag.read_spearman(0.3)
    assert "moderately" in ag.read_spearman(0.6)
    assert "alike" in ag.read_spearman(0.9) and "poorly" not in ag.read_spearman(0.9)
    assert "poorly" in ag.read_alpha(0.5) and "tentative" in ag.read_alpha(0.7)
    assert "not computed" in ag.read_spearman(None) and "not computed" in ag.read_alpha(None)


def test_bradley_terry_two_agents_hand_computed() -> None:
    outcomes = [("a", "b", 1.0)] * 3 + [("a", "b", 0.0)]
    got = ag.bradley_terry(outcomes, prior=1e-6)
    ratio = (got["a"] / (1 - got["a"])) / (got["b"] / (1 - got["b"]))
    assert ratio == pytest.approx(3.0, rel=1e-3)  # the MLE: P(a beats b) = 3/4


def test_bradley_terry_ties_are_half_wins_and_unbeaten_stays_finite() -> None:
    got = ag.bradley_terry([("a", "b", 0.5), ("a", "b", 0.5)])
    assert got["a"] == pytest.approx(got["b"])
    unbeaten = ag.bradley_terry([("a", "b", 1.0)] * 5)
    assert 0.5 < unbeaten["a"] < 1.0 and 0.0 < unbeaten["b"] < 0.5
    with pytest.raises(ValueError):
        ag.bradley_terry([("a", "b", 2.0)])


def test_bradley_terry_recovers_a_planted_ranking() -> None:
    rng = random.Random(7)
    planted = {f"agt-{i}": 2.0 ** (i / 2) for i in range(8)}  # agt-7 strongest
    agents = sorted(planted)
    outcomes = []
    for _ in range(600):
        a, b = rng.sample(agents, 2)
        p = planted[a] / (planted[a] + planted[b])
        if abs(p - 0.5) < 0.1 and rng.random() < 0.3:
            outcomes.append((a, b, 0.5))  # close pairs are sometimes called a tie
        else:
            outcomes.append((a, b, 1.0 if rng.random() < p else 0.0))
    fitted = ag.bradley_terry(outcomes)
    assert set(fitted) == set(agents)  # "agt-unpicked" was never picked: absent, not 0
    assert "agt-unpicked" not in fitted
    assert max(fitted, key=fitted.__getitem__) == "agt-7"
    assert min(fitted, key=fitted.__getitem__) == "agt-0"
    assert ag.spearman(fitted, planted) is not None and (ag.spearman(fitted, planted) or 0) > 0.9
