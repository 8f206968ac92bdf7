"""A comparison's difference lies inside its own interval: the two read one estimator over one
set of cases, for any pair of runs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from records import stats
from records.queries.compare import compare_runs
from records.scorer.score import RATIO_COLUMNS

# A case's (n, d) on one side: d may be 0 (no denominator there), repeats differ per case.
case_side = st.integers(0, 5).flatmap(lambda d: st.tuples(st.integers(0, d), st.just(d)))
paired_cases = st.lists(st.tuples(case_side, case_side), min_size=1, max_size=40)


@settings(max_examples=400, deadline=None)
@given(cases=paired_cases)
def test_the_difference_of_any_paired_cases_lies_inside_its_interval(cases):
    result = stats.compare([a for a, _ in cases], [b for _, b in cases])
    kept = [(a, b) for a, b in cases if a[1] and b[1]]
    if not kept:
        assert result is None
        return
    # The difference is the rates a row shows, over the cases both sides could count.
    base = sum(a[0] for a, _ in kept) / sum(a[1] for a, _ in kept)
    cand = sum(b[0] for _, b in kept) / sum(b[1] for _, b in kept)
    assert result.difference == pytest.approx(cand - base)
    assert result.delta.low <= result.difference <= result.delta.high
    assert result.cases == len(kept)


def test_every_rows_difference_on_every_pair_of_runs_lies_inside_its_interval(demo):
    checked = 0
    for baseline, candidate in itertools.permutations(demo.values(), 2):
        rows, problem = compare_runs(baseline, candidate, page=None)
        assert problem == ""
        for row in rows:
            if not row.tests:
                continue
            by_title = {title: d for title, _, _, d in row.columns()}
            for column, (title, *_rest) in zip(RATIO_COLUMNS, row.columns(), strict=True):
                test = row.tests.get(column)
                if test is None:
                    continue
                d = by_title[title]
                assert 100 * test.delta.low - 1e-9 <= d <= 100 * test.delta.high + 1e-9, (
                    row.identity,
                    title,
                    d,
                    test,
                )
                checked += 1
    assert checked > 100


def test_a_cases_only_one_side_counts_are_left_out_of_the_difference_and_its_interval():
    # Confirmation 2/4 -> 1/3 over the rows, but the case only the baseline counted (1/1,
    # then 0/0) is not paired: over the two paired cases it is 1/3 -> 1/3, a difference of 0.
    result = stats.compare([(1, 1), (1, 2), (0, 1)], [(0, 0), (1, 2), (0, 1)])
    assert result.cases == 2
    assert result.difference == 0
    assert result.delta.low <= 0 <= result.delta.high
