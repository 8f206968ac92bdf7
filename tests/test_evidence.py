"""The one decision rule: Holm over a family, intervals that agree with their tests, and the
gate's false-fail rate and power measured by simulation on generated runs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from records import evidence, stats
from records.devtools.simulate import simulate

# A case's (clean, counted) on one side: one attempt per case, or up to four repeats.
one_each = st.lists(st.tuples(st.integers(0, 1), st.just(1)), min_size=1, max_size=60)


@st.composite
def paired_tables(draw, repeats: bool):
    n = draw(st.integers(1, 60))
    if not repeats:
        side = st.tuples(st.integers(0, 1), st.just(1))
    else:
        side = st.integers(1, 4).flatmap(lambda d: st.tuples(st.integers(0, d), st.just(d)))
    a = draw(st.lists(side, min_size=n, max_size=n))
    b = draw(st.lists(side, min_size=n, max_size=n))
    return a, b


def _excludes_zero(i: stats.Interval) -> bool:
    return i.low > 0 or i.high < 0


def _holds_at_its_level(table, alpha) -> None:
    t = stats.compare(*table)
    if t is None:
        return
    i = t.interval_at(alpha)
    assert _excludes_zero(i) == (t.p_value < alpha)
    assert i.low <= t.difference <= i.high


@settings(max_examples=300, deadline=None)
@given(paired_tables(repeats=False), st.sampled_from([0.05, 0.01, 0.05 / 12, 0.0004]))
def test_mcnemars_interval_excludes_zero_exactly_when_its_p_is_below_the_level(table, alpha):
    _holds_at_its_level(table, alpha)


@settings(max_examples=150, deadline=None)
@given(paired_tables(repeats=True), st.sampled_from([0.05, 0.01, 0.05 / 12]))
def test_the_paired_ts_interval_excludes_zero_exactly_when_its_p_is_below_the_level(table, alpha):
    _holds_at_its_level(table, alpha)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(paired_tables(repeats=False) | paired_tables(repeats=True), min_size=1, max_size=12)
)
def test_a_decisions_interval_excludes_zero_exactly_when_it_is_called(tables):
    decided = evidence.decide([stats.compare(a, b) for a, b in tables])
    for d in decided:
        if d is None:
            continue
        called = d.label != evidence.NOISE
        assert _excludes_zero(d.interval) == called
        assert called == (d.p_adjusted < evidence.ALPHA)
        assert d.p_adjusted >= d.p_value


def test_holm_adjusts_as_published():
    # Holm (1979): p = 0.01, 0.04, 0.03, 0.005 over four tests.
    assert evidence.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_one_small_p_among_twelve_is_noise_and_says_so():
    clear = stats.compare([(1, 1)] * 10 + [(0, 1)] * 30, [(0, 1)] * 10 + [(0, 1)] * 30)
    borderline = stats.compare([(1, 1)] * 8 + [(0, 1)] * 32, [(0, 1)] * 8 + [(0, 1)] * 32)
    assert borderline.p_value < 0.05 and clear.p_value < 0.05 / 12
    family = [clear, borderline] + [stats.compare([(1, 1)] * 20, [(1, 1)] * 20)] * 10
    decided = evidence.decide(family)
    assert decided[0].label == "regressed" and decided[1].label == "within noise"
    assert evidence.rule_words(12) == "Holm-adjusted over 12 rows, 5% family-wise"


@pytest.fixture(scope="module")
def simulation():
    return simulate(pairs=200, attempts=1000)


def test_the_gate_fails_at_most_one_steady_run_in_twenty(simulation):
    assert simulation.pairs == 200 and simulation.rows == 12
    assert simulation.rate(simulation.false_fails) <= 0.05
    # Each of 12 rows tested alone at 5% fails steady runs far more often: what the rule fixes.
    assert simulation.false_fails_unadjusted > 2 * simulation.false_fails


def test_the_gate_finds_bigger_planted_drops_more_often(simulation):
    assert simulation.caught[20.0] > simulation.caught[10.0]
    assert simulation.rate(simulation.caught[20.0]) >= 0.3
