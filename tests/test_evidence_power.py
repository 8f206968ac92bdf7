""" "A change smaller than about N points can go unseen": N is the difference its row's test
finds 80% of the time at the level Holm tests that row at. Held by simulation: pairs of runs
drawn from fixed per-case rates, steady ones giving N, then runs whose every case truly fell
by N, of which about 80% must be called. Pure: no database."""

from __future__ import annotations

import random
import statistics

import pytest

from records import evidence, stats

ROWS = 12  # a comparison's family: Holm's first step tests at 5% / 12
ALPHA = evidence.ALPHA / ROWS


def _draw(rng: random.Random, rates: list[float], repeat: int) -> list[tuple[int, int]]:
    return [(sum(rng.random() < p for _ in range(repeat)), repeat) for p in rates]


def _found(cases: int, repeat: int, low: float, high: float, seed: int) -> tuple[float, float]:
    """The detectable difference stated on steady pairs (their median), and the share of
    pairs whose every case fell by it that the test calls at ALPHA."""
    rng = random.Random(seed)
    rates = [rng.uniform(low, high) for _ in range(cases)]
    stated = []
    for _ in range(100):
        test = stats.compare(_draw(rng, rates, repeat), _draw(rng, rates, repeat))
        stated.append(test.detectable_at(ALPHA))
    n = statistics.median(stated)
    fallen = [p - n for p in rates]
    called = 0
    trials = 300
    for _ in range(trials):
        test = stats.compare(_draw(rng, rates, repeat), _draw(rng, fallen, repeat))
        called += test.p_value < ALPHA and test.difference < 0
    return n, called / trials


@pytest.mark.parametrize(
    ("cases", "repeat", "low", "high"),
    [
        (16, 10, 0.45, 0.9),
        (40, 5, 0.45, 0.9),
        (200, 1, 0.4, 0.95),
        (16, 10, 0.97, 1.0),
        (200, 1, 0.97, 1.0),
    ],
    ids=[
        "16 cases x 10 (paired t)",
        "40 cases x 5 (paired t)",
        "200 cases, once (McNemar)",
        "16 cases x 10, nearly always passing",
        "200 cases once, nearly always passing",
    ],
)
def test_a_fall_of_the_stated_size_is_found_at_least_four_times_in_five(cases, repeat, low, high):
    n, power = _found(cases, repeat, low, high, seed=cases + repeat)
    assert 0.02 < n < 0.35, n  # a figure, not "anything under 100 points"
    assert 0.75 <= power <= 0.98, (n, power)


def test_the_figure_is_read_at_the_rows_holm_level():
    rng = random.Random(5)
    rates = [rng.uniform(0.45, 0.9) for _ in range(16)]
    test = stats.compare(_draw(rng, rates, 10), _draw(rng, rates, 10))
    decisions = evidence.decide([test] * ROWS)  # a family of 12 steady rows
    assert {d.alpha for d in decisions} == {ALPHA}
    assert decisions[0].detectable == test.detectable_at(ALPHA) > test.detectable_at()


def test_a_row_that_never_changed_still_needs_a_real_fall():
    # Every attempt passed on both sides: no noise seen, but a fall makes its own.
    still = stats.compare([(10, 10)] * 16, [(10, 10)] * 16)
    assert 0.05 < still.detectable_at(ALPHA) < 0.3
    # McNemar's, no case changed: at 5% / 12 the exact test needs 9 of 200 to fall.
    once = stats.compare([(1, 1)] * 200, [(1, 1)] * 200)
    assert 9 / 200 <= once.detectable_at(ALPHA) < 0.1
    assert stats.compare([(1, 2)], [(0, 2)]).detectable_at() is None  # one case: no test
