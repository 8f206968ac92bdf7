"""The corpus page's tests taken over every line at once give each line the answers of the test
taken line by line: flakiness over a matrix's rows, the case interval over arrays, the
discrimination of many cases with one call of SciPy's."""

import math
import random

import numpy as np
from scipy.stats import chi2

from records import stats


def _matrix(rng: random.Random, rows: int, runs: int) -> tuple[np.ndarray, np.ndarray]:
    clean = np.zeros((rows, runs), dtype=np.int64)
    counted = np.zeros((rows, runs), dtype=np.int64)
    for r in range(rows):
        rate, repeat = rng.random(), rng.choice([0, 1, 2, 3, 7])
        for t in range(runs):
            d = repeat if rng.random() > 0.2 else 0
            counted[r, t] = d
            clean[r, t] = sum(rng.random() < rate for _ in range(d))
    return clean, counted


def test_the_flakiness_of_each_row_is_the_flakiness_of_its_runs():
    clean, counted = _matrix(random.Random(3), 300, 12)
    rows = stats.flakiness_of_rows(clean, counted)
    assert rows == [
        stats.flakiness(list(zip(k, d, strict=True)))
        for k, d in zip(clean.tolist(), counted.tolist(), strict=True)
    ]
    assert any(f.flaky for f in rows) and not all(f.flaky for f in rows)


def test_the_case_interval_over_arrays_is_the_one_over_pairs():
    clean, counted = _matrix(random.Random(4), 200, 9)
    for k, d in zip(clean, counted, strict=True):
        assert stats.case_interval_of(k, d) == stats.case_interval(
            list(zip(k.tolist(), d.tolist(), strict=True))
        )
    assert stats.case_interval_of(np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)) is None


def test_the_first_flips_laid_end_to_end_are_those_of_each_timeline():
    clean, counted = _matrix(random.Random(5), 200, 20)
    # Half the lines change their rate half way, so that flips are found.
    clean[::2, 10:] = counted[::2, 10:] - clean[::2, 10:]
    timelines = [
        [(k, d) for k, d in zip(ks, ds, strict=True) if d]
        for ks, ds in zip(clean.tolist(), counted.tolist(), strict=True)
    ]
    mask = counted > 0
    laid = stats.first_flips_of(clean[mask], counted[mask], mask.sum(axis=1))
    assert laid == [stats.first_flip(t) for t in timelines]
    assert sum(1 for f in laid if f) > 20


def test_the_discrimination_of_many_cases_is_each_cases_own():
    rng = random.Random(6)
    cases = [
        [
            (k, d)
            for d in [rng.randint(0, 9) for _ in range(rng.randint(0, 5))]
            for k in [rng.randint(0, d)]
        ]
        for _ in range(300)
    ]
    got = stats.discriminations(cases)
    assert len(got) == len(cases)
    for per_model, d in zip(cases, got, strict=True):
        rows = [(k, n - k) for k, n in per_model if n > 0]
        assert d.models == len(rows)
        table = np.array(rows, dtype=np.float64).reshape(-1, 2)
        if len(rows) < 2 or (table.sum(axis=0) == 0).any():
            assert (d.v, d.p_value) == (0.0, 1.0)
            continue
        expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
        x = float(((table - expected) ** 2 / expected).sum())
        assert d.p_value == float(chi2.sf(x, len(rows) - 1))
        assert d.v == min(1.0, math.sqrt(x / table.sum()))
