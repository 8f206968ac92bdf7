"""The flaky, flip and discrimination tests: their rules on planted histories, and their
calibration on steady cases by a seeded simulation."""

from __future__ import annotations

import numpy as np
import pytest

from records import stats


def test_a_case_whose_repeats_disagree_in_every_run_is_flaky():
    assert stats.flakiness([(1, 2)] * 8).flaky


def test_one_disagreeing_run_is_never_enough_to_call_a_case_flaky():
    result = stats.flakiness([(1, 3)] + [(3, 3)] * 20)
    assert result.disagreeing == 1 and not result.flaky


def test_an_uncertain_rate_whose_runs_each_agree_is_not_flaky():
    # Half the runs pass every repeat, half fail every one: the rate is uncertain, the case
    # is not flaky (its repeats never disagree).
    result = stats.flakiness([(2, 2), (0, 2)] * 6)
    assert result.disagreeing == 0 and not result.flaky


def test_the_flaky_p_is_the_poisson_binomial_tail_of_slipping_runs():
    # 3 of 8 runs of two repeats disagree; each would with q = 1 - .95^2 - .05^2 = 0.095.
    from scipy.stats import binom

    q = 1 - 0.95**2 - 0.05**2
    got = stats.flakiness([(1, 2)] * 3 + [(2, 2)] * 5)
    assert got.p_value == pytest.approx(binom.sf(2, 8, q))


def test_the_first_flip_of_a_case_passing_runs_1_to_4_and_failing_5_to_8_is_run_5():
    flip = stats.first_flip([(2, 2)] * 4 + [(0, 2)] * 4)
    assert flip is not None and flip.index == 4
    assert flip.before == (8, 8) and flip.after == (0, 8)


def test_a_steady_or_merely_flaky_history_has_no_flip():
    assert stats.first_flip([(2, 2)] * 8) is None
    assert stats.first_flip([(1, 2)] * 8) is None
    assert stats.first_flip([(1, 1)]) is None


def test_the_flip_p_is_fishers_exact_test_of_the_split():
    from scipy.stats import fisher_exact

    flip = stats.first_flip([(2, 2)] * 4 + [(0, 2)] * 4)
    # A symmetric table: doubling the smaller tail is the two-sided exact p.
    assert flip.p_value == pytest.approx(fisher_exact([[8, 0], [0, 8]]).pvalue)


def test_a_case_one_model_always_passes_and_another_never_has_discrimination_1():
    assert stats.discrimination([(8, 8), (0, 8)]).v == 1.0
    assert stats.discrimination([(8, 8), (8, 8)]).v == 0.0
    assert stats.discrimination([(0, 8), (0, 8), (0, 8)]).p_value == 1.0
    weak = stats.discrimination([(4, 8), (5, 8)])
    assert 0 < weak.v < 0.3 and weak.p_value > 0.05


def test_discrimination_is_cramers_v_of_the_chi_square_table():
    from scipy.stats import chi2_contingency
    from scipy.stats.contingency import association

    table = np.array([[7, 3], [2, 8], [5, 5]])
    got = stats.discrimination([(7, 10), (2, 10), (5, 10)])
    assert got.v == pytest.approx(association(table, method="cramer"))
    assert got.p_value == pytest.approx(chi2_contingency(table, correction=False).pvalue)


def _history(rng, runs: int, repeats: int, rate: float) -> list[tuple[int, int]]:
    return [(int(rng.binomial(repeats, rate)), repeats) for _ in range(runs)]


def test_steady_cases_are_falsely_called_flaky_at_most_about_5_percent_of_the_time():
    # Steady cases: they pass (or fail) each attempt except for slips at rates up to SLIP.
    rng = np.random.default_rng(20261201)
    flagged = 0
    trials = 2000
    for _ in range(trials):
        slip = rng.uniform(0, stats.SLIP)
        rate = slip if rng.random() < 0.5 else 1 - slip
        runs, repeats = int(rng.integers(2, 30)), int(rng.integers(2, 6))
        flagged += stats.flakiness(_history(rng, runs, repeats, rate)).flaky
    assert flagged / trials <= 0.05


def test_cases_whose_rate_never_changes_are_falsely_called_flipped_at_most_5_percent():
    rng = np.random.default_rng(20261202)
    flagged = 0
    trials = 2000
    for _ in range(trials):
        rate = rng.uniform(0.05, 0.95)
        runs, repeats = int(rng.integers(2, 30)), int(rng.integers(1, 5))
        flagged += stats.first_flip(_history(rng, runs, repeats, rate)) is not None
    assert flagged / trials <= 0.05


def test_a_truly_flaky_case_and_a_real_flip_are_found_most_of_the_time():
    rng = np.random.default_rng(20261203)
    flaky = sum(stats.flakiness(_history(rng, 10, 3, 0.5)).flaky for _ in range(300))
    assert flaky / 300 >= 0.9
    found = 0
    for _ in range(300):
        history = _history(rng, 6, 3, 0.9) + _history(rng, 6, 3, 0.2)
        flip = stats.first_flip(history)
        found += flip is not None and abs(flip.index - 6) <= 1
    assert found / 300 >= 0.8
