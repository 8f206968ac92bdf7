"""The gate's false-fail rate where rows have few cases, each repeated, measured by simulation
on generated runs (a module of its own, so that it runs beside `test_evidence`'s)."""

from __future__ import annotations

import pytest

from records.devtools.simulate import simulate


@pytest.fixture(scope="module")
def few_cases_repeated():
    """The gate where rows have few cases, each repeated: 8 cases a row, 10 repeats."""
    return simulate(pairs=100, attempts=8 * 12 * 10, first_seed=701, cases=8, repeat=10)


def test_with_few_cases_repeated_the_gate_still_fails_at_most_one_steady_run_in_twenty(
    few_cases_repeated,
):
    # The case is the unit: 8 cases read as 80 attempts would fail steady runs far more often
    # (a paired bootstrap over the cases failed 27 of these 100 pairs).
    s = few_cases_repeated
    assert s.pairs == 100 and s.rows == 12
    assert s.rate(s.false_fails) <= 0.05
    assert s.false_fails_unadjusted > 2 * s.false_fails
