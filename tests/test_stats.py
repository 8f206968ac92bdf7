"""Intervals and paired tests against published values, and a seeded simulation that shows the
labels are calibrated: noise is rarely called a regression, a real drop nearly always is."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from records.stats import (
    case_interval,
    compare,
    mcnemar_exact,
    wilson,
)


def test_the_wilson_interval_of_12_of_15_is_the_published_one():
    # Wilson score interval, 95%: 12/15 = 0.800, interval 0.548 to 0.930.
    ci = wilson(12, 15)
    assert (round(ci.low, 3), round(ci.high, 3)) == (0.548, 0.930)
    assert ci.points() == "55–93%"


def test_the_wilson_interval_is_scipys_for_every_rate_up_to_200():
    from scipy.stats import binomtest

    for d in (*range(1, 41), 77, 150, 200):
        for n in range(d + 1):
            want = binomtest(n, d).proportion_ci(confidence_level=0.95, method="wilson")
            got = wilson(n, d)
            assert got.low == pytest.approx(want.low, abs=1e-12), (n, d)
            assert got.high == pytest.approx(want.high, abs=1e-12), (n, d)


def test_an_empty_denominator_has_no_interval():
    assert wilson(0, 0) is None


def test_with_one_attempt_per_case_the_case_interval_is_wilsons():
    per_case = [(1, 1)] * 12 + [(0, 1)] * 3
    assert case_interval(per_case) == wilson(12, 15)


def test_where_every_repeat_agrees_the_cases_are_the_trials():
    # 10 cases, 3 attempts each, every one passed: as sure as 10 of 10, not 30 of 30.
    assert case_interval([(3, 3)] * 10) == wilson(10, 10)
    assert case_interval([(0, 3)] * 10) == wilson(0, 10)


def test_intervals_over_repeated_cases_hold_their_95_percent():
    """Cases with their own difficulty, each tried 3 times: attempts of one case agree more
    than chance, so Wilson over attempts covers the true rate too rarely; the case interval
    covers it about 95% of the time (seeded)."""
    rng = np.random.default_rng(7)
    trials, covered, covered_wilson = 500, 0, 0
    for _ in range(trials):
        passed = rng.binomial(3, rng.beta(0.5, 0.5, size=60))
        ci, w = case_interval([(int(x), 3) for x in passed]), wilson(int(passed.sum()), 180)
        covered += ci.low <= 0.5 <= ci.high
        covered_wilson += w.low <= 0.5 <= w.high
    assert 0.92 <= covered / trials <= 0.98
    assert covered_wilson / trials < 0.9


def test_mcnemars_exact_p_for_1_against_9_discordant_cases_is_the_published_one():
    # Two-sided exact binomial: 2 * P(X <= 1 | n=10, p=.5) = 2 * 11/1024 = 0.021484375.
    assert mcnemar_exact(1, 9) == pytest.approx(0.021484375)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(0, 0) == 1.0


def test_the_mcnemar_p_is_scipys_exact_binomial_test():
    from scipy.stats import binomtest

    for n in range(1, 60):
        for k in range(n + 1):
            assert mcnemar_exact(k, n - k) == pytest.approx(binomtest(k, n, 0.5).pvalue, rel=1e-9)


def test_the_mcnemar_p_is_exact_and_needs_no_scipy():
    """A run with one attempt per case is tested by McNemar when it is scored: importing
    `scipy.stats` for it cost a scoring process half a second and 70 MB."""
    import subprocess
    import sys
    from fractions import Fraction
    from math import comb

    for n in (1, 10, 61, 300):
        for k in range(0, n // 2 + 1, max(1, n // 20)):
            want = min(Fraction(1), Fraction(2 * sum(comb(n, i) for i in range(k + 1)), 2**n))
            assert mcnemar_exact(k, n - k) == float(want)  # rounded once, from whole numbers
    code = (
        "import sys; from records.stats import mcnemar_exact; mcnemar_exact(3, 40); "
        "assert 'scipy' not in sys.modules, 'SciPy was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_attempt_per_case_is_compared_by_mcnemar_on_the_changed_cases():
    baseline = [(1, 1)] * 10 + [(0, 1)] * 1 + [(1, 1)] * 9 + [(0, 1)] * 5
    candidate = [(1, 1)] * 10 + [(1, 1)] * 1 + [(0, 1)] * 9 + [(0, 1)] * 5
    result = compare(baseline, candidate)
    assert result.test == "McNemar exact" and result.discordant == (9, 1)
    assert result.p_value == pytest.approx(0.021484375)
    assert result.label == "regressed" and result.delta.high < 0


def test_the_comparison_is_the_same_on_every_load():
    rng = np.random.default_rng(1)
    base = [(int(x), 3) for x in rng.integers(0, 4, 40)]
    cand = [(int(x), 3) for x in rng.integers(0, 4, 40)]
    assert compare(base, cand) == compare(base, cand)
    assert compare(base, cand).test == "paired t"


def test_with_repeats_a_paired_t_test_over_cases_is_the_textbooks():
    """With as many repeats on each side of every case, the ratio estimators' difference is the
    mean of the cases' differences of rates, and its test is the paired t-test of those (SciPy's
    `ttest_rel`), its interval the one `ttest_rel` gives."""
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(5)
    chance = rng.beta(2, 2, 30)
    base = [(int(x), 4) for x in rng.binomial(4, chance)]
    cand = [(int(x), 4) for x in rng.binomial(4, np.clip(chance - 0.2, 0, 1))]
    result = compare(base, cand)
    rates = np.array([[a / 4, b / 4] for (a, _), (b, _) in zip(base, cand, strict=True)])
    want = ttest_rel(rates[:, 1], rates[:, 0])
    assert result.test == "paired t" and result.cases == 30
    assert result.difference == pytest.approx(float(np.mean(rates[:, 1] - rates[:, 0])))
    assert result.p_value == pytest.approx(float(want.pvalue), rel=1e-9)
    low, high = want.confidence_interval(0.95)
    assert (result.delta.low, result.delta.high) == pytest.approx((low, high), rel=1e-9)


def test_the_t_distributions_p_is_scipys_and_needs_no_scipy():
    from scipy.special import stdtr

    from records.stats import t_two_sided

    for freedom in (1, 2, 3, 7, 23, 99, 1000, 20_000):
        for t in (0.01, 0.5, 1.0, 2.0, 2.5, 4.0, 8.0, 30.0):
            assert t_two_sided(t, freedom) == pytest.approx(2 * stdtr(freedom, -t), rel=1e-9)
            assert t_two_sided(-t, freedom) == t_two_sided(t, freedom)
    code = (
        "import sys; import numpy as np; from records.stats import compare; "
        "compare([(1, 2), (2, 2), (0, 2)], [(0, 2), (1, 2), (0, 2)]); "
        "assert 'scipy' not in sys.modules, 'SciPy was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cases_that_all_moved_alike_are_not_beyond_every_doubt():
    # Eight cases, each 2 of 2 Clean before and 0 of 2 after: the spread over cases is 0, so
    # the attempts' own noise stands in (each case's pooled rate 1/2).
    result = compare([(2, 2)] * 8, [(0, 2)] * 8)
    assert result.standard_error == pytest.approx(math.sqrt(8 * (0.25 * 4 / 3) * (4 / 256)))
    assert 0 < result.p_value < 0.01 and result.delta.high < 0
    # Rates alike over cases of different sizes: the parts cancel but for rounding (a spread of
    # 1e-35), which must not read as certainty.
    alike = compare([(4, 16), (4, 16)], [(63, 90), (35, 50)])
    assert alike.standard_error > 0.05 and alike.p_value > 0.05
    # No attempt disagrees with another of its case: nothing to test, however the rates differ
    # (different repeats weigh the cases apart).
    same = compare([(2, 2), (0, 1)], [(1, 1), (0, 2)])
    assert same.difference != 0 and same.p_value == 1.0
    assert same.delta.low <= min(0, same.difference) and same.delta.high >= 0
    # One case: no spread to read.
    one = compare([(1, 2)], [(0, 2)])
    assert one.p_value == 1.0 and (one.delta.low, one.delta.high) == (-1.0, 1.0)


def test_a_test_read_the_other_way_round_mirrors_its_interval():
    rng = np.random.default_rng(9)
    base = [(int(x), 3) for x in rng.integers(0, 4, 25)]
    cand = [(int(x), 3) for x in rng.integers(0, 4, 25)]
    one, other = compare(base, cand), compare(cand, base)
    back = one.reversed()
    assert (back.baseline_rate, back.candidate_rate) == (other.baseline_rate, other.candidate_rate)
    assert back.p_value == pytest.approx(other.p_value, rel=1e-12)
    assert one.reversed().interval_at(0.01).low == pytest.approx(-one.interval_at(0.01).high)


def _trial(rng, n: int, drop: float) -> str:
    """Two runs over n cases; each case has its own difficulty (as a corpus's cases do), the
    candidate's chance on it `drop` below the baseline's."""
    chance = rng.beta(2.8, 1.2, n)  # mean 0.7
    base = [(int(x), 1) for x in rng.random(n) < chance]
    cand = [(int(x), 1) for x in rng.random(n) < np.clip(chance - drop, 0, 1)]
    return compare(base, cand).label


def test_runs_from_one_distribution_are_rarely_called_regressed():
    rng = np.random.default_rng(7)
    labels = [_trial(rng, 200, 0.0) for _ in range(400)]
    assert labels.count("regressed") / len(labels) <= 0.05


def test_a_drop_of_15_points_over_200_cases_is_nearly_always_found():
    rng = np.random.default_rng(8)
    labels = [_trial(rng, 200, 0.15) for _ in range(300)]
    assert labels.count("regressed") / len(labels) >= 0.85


@pytest.mark.django_db
def test_score_tables_and_exports_carry_each_rates_interval(client, viewer):
    from records.models import Run
    from tests.builders import FIXTURE_SHARD, SAMPLE_KEY, ingest_bytes

    shard = FIXTURE_SHARD.read_bytes().replace(b'"fixture-corpus"', b'"b519a10571ab2192"')
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()), ("modeleval-f.jsonl", shard))
    run = Run.objects.get()
    html = client.get(f"/runs/{run.pk}/scores/").content.decode()
    assert '<span class="ci" title="95% interval (Wilson)">' in html
    rows = client.get(f"/runs/{run.pk}/scores.json").json()["rows"]
    clean = [
        (r["clean_numerator"], r["clean_denominator"], r["clean_low"], r["clean_high"])
        for r in rows
    ]
    for n, d, low, high in clean:
        want = wilson(n, d)
        assert (low, high) == ((round(want.low, 4), round(want.high, 4)) if want else (None, None))
    # The Markdown export draws only rows upstream publishes, so it is read of such a run.
    from tests.builders import line, published_shard

    ingest_bytes(("modeleval-p.jsonl", published_shard(line("attempt"))))
    published = Run.objects.order_by("-pk").first()
    plain = client.get(f"/runs/{published.pk}/scores.md").content.decode()
    with_ci = client.get(f"/runs/{published.pk}/scores.md?intervals=1").content.decode()
    assert "95% intervals" not in plain and "95% intervals (Clean" in with_ci


def test_a_run_that_repeats_cases_takes_the_case_as_the_unit(client, viewer):
    from records.devtools.synth import MODELS
    from records.models import Run, ScoreCase
    from records.stats import case_interval
    from tests.builders import demo_key, ingest_bytes, synth_run

    ingest_bytes(
        ("key.json", demo_key()), ("modeleval-r.jsonl", synth_run(repeat=3, models=MODELS[:2]))
    )
    run = Run.objects.get()
    html = client.get(f"/runs/{run.pk}/scores/").content.decode()
    assert 'title="95% interval (Wilson, cases as the unit)"' in html
    assert "pass^3" in html and "pass@3" in html
    rows = client.get(f"/runs/{run.pk}/scores.json").json()["rows"]
    assert rows
    for r in rows:
        n, d = r["completion_numerator"], r["completion_denominator"]
        per_case = ScoreCase.objects.filter(row_key=r["row_key"]).values_list(
            "completed", "counted"
        )
        want = case_interval(list(per_case))
        assert (r["completion_low"], r["completion_high"]) == (
            round(want.low, 4),
            round(want.high, 4),
        )
        # Never narrower than Wilson over attempts treated as independent.
        w = wilson(n, d)
        assert want.high - want.low >= w.high - w.low - 1e-12


def test_a_p_too_small_for_three_places_is_written_as_below_them():
    from records.templatetags.evaldash import p_is, pvalue

    assert pvalue(0.0123) == "0.012" and p_is(0.0123) == "= 0.012"
    assert pvalue(1.4e-6) == "< 0.001" and p_is(1.4e-6) == "< 0.001"
    assert pvalue(None) == "-"
