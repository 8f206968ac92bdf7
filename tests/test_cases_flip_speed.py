"""The first-flip tests of a corpus page: batched and bounded, with the answers of one test per
timeline."""

import random

import numpy as np
from scipy.stats import hypergeom

from records import stats


def one_by_one(runs):
    """The first flip as tested before the batching: every split handed to SciPy."""
    k = np.array([n for n, _ in runs], dtype=np.int64)
    d = np.array([d for _, d in runs], dtype=np.int64)
    splits, total_k, total_d = len(runs) - 1, int(k.sum()), int(d.sum())
    if splits < 1 or total_k in (0, total_d):
        return None
    before_k, before_d = np.cumsum(k)[:-1], np.cumsum(d)[:-1]
    ok = (before_d > 0) & (before_d < total_d)
    if not ok.any():
        return None
    low = hypergeom.cdf(before_k, total_d, total_k, before_d)
    high = hypergeom.sf(before_k - 1, total_d, total_k, before_d)
    p = np.where(ok, np.minimum(1.0, 2 * np.minimum(low, high)), 1.0)
    best = int(np.argmin(p))
    if p[best] >= stats.ALPHA / splits:
        return None
    return (best + 1, float(p[best]))


def test_the_batched_first_flips_name_the_same_runs_and_p_as_one_test_per_timeline():
    rng = random.Random(7)
    timelines = []
    for _ in range(400):
        runs, repeat = rng.randint(1, 30), rng.choice([0, 1, 2, 3, 7])
        rate, change = rng.random(), rng.randint(0, 30)
        timelines.append(
            [
                (sum(rng.random() < (rate if t < change else 1 - rate) for _ in range(d)), d)
                for t in range(runs)
                for d in [repeat if rng.random() > 0.1 else 0]
            ]
        )
    got = [(f.index, f.p_value) if f else None for f in stats.first_flips(timelines)]
    assert got == [one_by_one(t) for t in timelines]
    assert sum(1 for g in got if g) > 20  # the comparison covers flips, not only their absence


def test_it_hands_scipy_no_split_of_a_steady_case(monkeypatch):
    called = []
    real = hypergeom.cdf
    monkeypatch.setattr(hypergeom, "cdf", lambda *a: called.append(a) or real(*a))
    steady = [(6, 7), (5, 7), (7, 7), (6, 7)] * 12
    assert stats.first_flips([steady, steady]) == [None, None]
    assert called == []
    assert stats.first_flip([(7, 7)] * 10 + [(0, 7)] * 10).index == 10
    assert called
