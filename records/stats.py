"""Is a difference real? Intervals and paired tests for the rates evaldash shows. Pure Python on
SciPy and NumPy, no Django.

Every rate is `n / d` over attempts (or steps). Its 95% interval is Wilson's score interval,
written out and held equal by a test to SciPy's `binomtest(...).proportion_ci(method="wilson")`.
Two runs are compared over the cases both ran, pairing each case with itself: with one attempt
per case, by the exact McNemar test on the cases that changed; with repeats, by a paired t-test
over cases. Both are exact functions of the figures, so a page and its export never change between
loads.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
POWER = 0.8  # the chance of finding a difference; one smaller than that "can go unseen"


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def points(self) -> str:
        """As a page shows it: percentage points, rounded."""
        return f"{100 * self.low:.0f}–{100 * self.high:.0f}%"


_Z = NormalDist().inv_cdf(1 - ALPHA / 2)


def wilson(n: int, d: int) -> Interval | None:
    """The 95% Wilson score interval of n / d; None when d is 0 (there is no rate).

    Written out rather than asked of SciPy's `binomtest(n, d).proportion_ci(method="wilson")`
    on every call, which costs half a millisecond, and a score table holds hundreds of rates:
    a test holds the two equal for every n / d up to 200."""
    if d <= 0:
        return None
    # The bounds meet 0 and 1 exactly where SciPy's do.
    return _wilson_rate(n / d, d)


def case_interval(per_case: Sequence[tuple[int, int]]) -> Interval | None:
    """The 95% interval of a rate summed over cases, with the case as the unit: for a run whose
    attempts repeat each case, attempts of one case are not independent, so plain Wilson over
    attempts is too narrow. Wilson's interval on the effective sample size (Kish): the attempts
    divided by the design effect, the rate's variance over cases (the ratio estimator's) against
    the binomial variance over attempts, held between 1 (independent attempts) and the attempts
    per case (each case one trial). With one attempt per case it is Wilson's interval exactly;
    where every attempt agrees (a rate of 0 or 1) there is no variance to read, and the cases
    count as the trials. None when no case has a denominator."""
    pairs = [(n, d) for n, d in per_case if d]
    if not pairs:
        return None
    n = np.array([p[0] for p in pairs], dtype=np.float64)
    d = np.array([p[1] for p in pairs], dtype=np.float64)
    return _case_interval(n, d)


def case_interval_of(n: np.ndarray, d: np.ndarray) -> Interval | None:
    """`case_interval` of per-case figures given as two arrays, numerators and denominators in
    the same order (the cases without a denominator are left out here)."""
    kept = d != 0
    if not kept.any():
        return None
    return _case_interval(n[kept].astype(np.float64), d[kept].astype(np.float64))


def _case_interval(n: np.ndarray, d: np.ndarray) -> Interval:
    cases, attempts = len(d), float(d.sum())
    rate = float(n.sum()) / attempts
    most = attempts / cases  # the design effect when each case is one trial
    binomial = rate * (1 - rate) / attempts
    if cases < 2 or binomial == 0:
        effect = most
    else:
        over_cases = cases / (cases - 1) * float(np.sum((n - rate * d) ** 2)) / attempts**2
        effect = min(most, max(1.0, over_cases / binomial))
    effective = attempts / effect
    return _wilson_rate(rate, effective)


def _wilson_rate(p: float, size: float) -> Interval:
    """Wilson's score interval for a rate `p` over `size` trials (a size need not be whole)."""
    centre = (p + _Z * _Z / (2 * size)) / (1 + _Z * _Z / size)
    half = _Z * math.sqrt(p * (1 - p) / size + _Z * _Z / (4 * size * size)) / (1 + _Z * _Z / size)
    return Interval(0.0 if p == 0 else centre - half, 1.0 if p == 1 else centre + half)


MCNEMAR = "McNemar exact"  # one attempt a case
PAIRED_T = "paired t"  # cases repeated


@dataclass(frozen=True)
class Paired:
    """A candidate against a baseline on the cases both ran: the difference, its test, and the
    95% interval that test inverts (`delta`), so the interval excludes 0 exactly when
    p < 0.05. `interval_at` gives the interval at another level, the one a family-wise
    decision tests each row at (`records.evidence`)."""

    cases: int
    baseline_rate: float
    candidate_rate: float
    p_value: float
    test: str  # MCNEMAR or PAIRED_T
    discordant: tuple[int, int] | None = None  # (baseline only, candidate only), for McNemar
    standard_error: float | None = None  # of the difference over cases, for the paired t-test
    # A case's attempts on the side with fewer, on average, for the paired t-test (None for a
    # kept test: `detectable_at` then reads one, which overstates what could go unseen).
    attempts: float | None = None

    @property
    def difference(self) -> float:
        return self.candidate_rate - self.baseline_rate

    @functools.cached_property
    def delta(self) -> Interval:
        """The 95% interval of the difference (candidate minus baseline, as rates) that the
        test inverts, worked out when first asked for."""
        return self.interval_at(ALPHA)

    @property
    def label(self) -> str:
        """This test read alone at 5%. A page's words come from `records.evidence`, which
        reads it within the family its decision covers."""
        if self.p_value < ALPHA and self.difference < 0:
            return "regressed"
        if self.p_value < ALPHA and self.difference > 0:
            return "improved"
        return "within noise"

    def interval_at(self, alpha: float) -> Interval:
        """The interval of the difference at level 1 - alpha that this test inverts: it
        excludes 0 exactly when p < alpha. For McNemar's test, the exact (Clopper-Pearson)
        interval of the candidate's share of the changed cases, as a difference of rates;
        for the paired t-test, the difference plus or minus Student's t quantile on
        cases - 1 degrees of freedom times its standard error, within -1 to 1."""
        if self.discordant is not None:
            i = _mcnemar_interval(*self.discordant, self.cases, self.p_value, alpha)
            # Held to the difference as the rates give it (the same number, rounded apart).
            return Interval(min(i.low, self.difference), max(i.high, self.difference))
        se = self.standard_error or 0.0
        return _t_interval(self.difference, se, self.cases, alpha, self.p_value < alpha)

    def detectable_at(self, alpha: float = ALPHA, power: float = POWER) -> float | None:
        """The smallest fall (or rise) of rates, as a fraction, that a test of as many cases,
        as noisy as these, finds with probability about `power` at level `alpha` (the level
        a decision tests its row at): the test's critical value plus `power`'s quantile (q),
        times the difference's standard error, counting the noise the change itself adds (a
        case that falls from always passing starts to disagree with itself). For the paired
        t-test, Student's quantiles on cases - 1 degrees of freedom, the test's standard error
        and at most d (1 - d) a trial more; for McNemar's, the normal ones and the changed
        cases, those seen and those the change makes. So a row that never changed still
        needs about q^2 cases (McNemar's), or q^2 trials, to fall before it is called. None
        where nothing could be tested (the t-test on one case). A simulation holds it to its
        power (`tests/test_evidence_power.py`)."""
        if self.cases < 1:
            return None
        return _detectable(self, alpha, power)

    def reversed(self) -> Paired:
        """The same test read the other way round: the baseline as the candidate."""
        return Paired(
            self.cases,
            self.candidate_rate,
            self.baseline_rate,
            self.p_value,
            self.test,
            None if self.discordant is None else (self.discordant[1], self.discordant[0]),
            self.standard_error,
            self.attempts,
        )


def mcnemar_exact(baseline_only: int, candidate_only: int) -> float:
    """Two-sided exact McNemar p: the discordant cases as a fair coin's flips, twice the
    smaller tail of Binomial(n, 1/2) (the coin is symmetric, so the two tails are equal, as
    `binomtest` finds them: a test holds the two equal), summed in whole numbers and rounded
    once. No SciPy: importing `scipy.stats` for this alone cost a scoring process half a
    second and 70 MB. The sum takes as many steps as the smaller count, at most half the
    cases."""
    n = baseline_only + candidate_only
    if n == 0:
        return 1.0
    k = min(baseline_only, candidate_only)
    term = tail = 1  # C(n, 0), and the sum of C(n, i) for i <= k
    for i in range(1, k + 1):
        term = term * (n - i + 1) // i
        tail += term
    return min(1.0, 2 * tail / 2**n)  # Python divides whole numbers correctly rounded


def _clopper_pearson(x: int, n: int, alpha: float) -> tuple[float, float]:
    """The exact equal-tailed interval of a binomial share x / n at level 1 - alpha: the
    shares whose own two-sided test (twice the smaller tail) x does not reject, from the beta
    quantiles. SciPy's special functions are imported here, when a page asks for an interval,
    never by a scoring (which keeps its tests without them)."""
    from scipy.special import betaincinv

    low = 0.0 if x == 0 else float(betaincinv(x, n - x + 1, alpha / 2))
    high = 1.0 if x == n else float(betaincinv(x + 1, n - x, 1 - alpha / 2))
    return low, high


def _mcnemar_interval(
    baseline_only: int, candidate_only: int, cases: int, p_value: float, alpha: float
) -> Interval:
    """The McNemar test inverted: the changed cases n = b + c split as Binomial(n, share),
    the share's exact interval, and the difference of rates (2 share - 1) n / cases. It holds
    1/2 (a difference of 0) exactly when the exact p is at least alpha; the bounds, found in
    floating point, are held to the side of 0 that the exact p (summed in whole numbers)
    decides."""
    n = baseline_only + candidate_only
    if n == 0 or cases == 0:
        return Interval(0.0, 0.0)
    low, high = _clopper_pearson(candidate_only, n, alpha)
    if p_value < alpha:
        if candidate_only > baseline_only:
            low = max(low, math.nextafter(0.5, 1.0))
        else:
            high = min(high, math.nextafter(0.5, 0.0))
    else:
        low, high = min(low, 0.5), max(high, 0.5)
    scale = n / cases
    d_low, d_high = (2 * low - 1) * scale, (2 * high - 1) * scale
    seen = (candidate_only - baseline_only) / cases
    return Interval(min(d_low, seen), max(d_high, seen))


def compare(
    baseline: Sequence[tuple[int, int]], candidate: Sequence[tuple[int, int]]
) -> Paired | None:
    """Paired comparison of one column over shared cases: each item is a case's (n, d) on each
    side, in the same case order. Cases with d = 0 on either side are left out.

    The difference, its interval and its p all read one estimator over one set of cases: each
    side's rate is its sum of n over its sum of d on the paired cases (the rate a row shows).
    With one attempt per case the test is McNemar's exact test and the interval the one it
    inverts; with repeats, the paired t-test over cases (`paired_t`). Either way the interval
    excludes 0 exactly when p < 0.05."""
    return compare_each({None: (baseline, candidate)})[None]


def compare_each[K](
    columns: dict[K, tuple[Sequence[tuple[int, int]], Sequence[tuple[int, int]]]],
) -> dict[K, Paired | None]:
    """`compare` of several columns at once (each key's baseline and candidate), by key."""
    out: dict[K, Paired | None] = {}
    for key, (baseline, candidate) in columns.items():
        pairs = [(a, b) for a, b in zip(baseline, candidate, strict=True) if a[1] and b[1]]
        if not pairs:
            out[key] = None
            continue
        na, da, nb, db = np.array(_columns(pairs), dtype=np.float64)
        if bool(np.all(da == 1) and np.all(db == 1)):  # one attempt a case
            discordant = (int(np.sum((na == 1) & (nb == 0))), int(np.sum((na == 0) & (nb == 1))))
            p = mcnemar_exact(*discordant)
            base_rate, cand_rate = float(na.sum() / da.sum()), float(nb.sum() / db.sum())
            out[key] = Paired(len(pairs), base_rate, cand_rate, p, MCNEMAR, discordant)
        else:
            out[key] = paired_t(na, da, nb, db)
    return out


def _columns(pairs: list[tuple[tuple[int, int], tuple[int, int]]]) -> tuple[list[int], ...]:
    return (
        [a[0] for a, _ in pairs],
        [a[1] for a, _ in pairs],
        [b[0] for _, b in pairs],
        [b[1] for _, b in pairs],
    )


ROUNDING = 1e-12  # a spread over cases this small beside the attempts' noise is rounding


def paired_t(na: np.ndarray, da: np.ndarray, nb: np.ndarray, db: np.ndarray) -> Paired:
    """The paired t-test over cases of the difference of two ratio estimators, each side's
    sum of n over its sum of d (every d > 0), the case as the unit.

    Each case's part of the difference is its linearised influence, (nb - Rb db) / sum(db) -
    (na - Ra da) / sum(da); the difference's variance is read from those parts' spread over
    the cases, m / (m - 1) times their sum of squares. Where the parts do not spread at all
    (every case moved exactly alike, as when each went from all Clean to none; in floating
    point, a spread below `ROUNDING` times the noise below, which is rounding), the attempts'
    own noise stands in: each case's pooled rate p (both sides' attempts) as p (1 - p) n / (n - 1)
    a trial over its n attempts. t = difference / standard error on m - 1 degrees of freedom,
    two-sided. A single case, or no variance at all (no attempt disagrees with another of its
    case), cannot be tested: p = 1."""
    m = len(da)
    sa, sb = float(da.sum()), float(db.sum())
    ra, rb = float(na.sum()) / sa, float(nb.sum()) / sb
    parts = (nb - rb * db) / sb - (na - ra * da) / sa
    variance = m / (m - 1) * float(np.sum(parts * parts)) if m > 1 else 0.0
    n = da + db
    pooled = (na + nb) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        trial = np.where(n > 1, pooled * (1 - pooled) * n / (n - 1), pooled * (1 - pooled))
    noise = float(np.sum(trial * (da / (sa * sa) + db / (sb * sb))))
    if variance <= ROUNDING * noise:  # the parts cancel exactly, but for rounding
        variance = noise
    se = math.sqrt(variance)
    difference = rb - ra
    if m < 2 or se == 0:
        p = 1.0
    else:
        p = t_two_sided(difference / se, m - 1)
    return Paired(m, ra, rb, p, PAIRED_T, None, se, min(sa, sb) / m)


def t_two_sided(t: float, freedom: int) -> float:
    """Two-sided p of Student's t with `freedom` degrees of freedom: the regularised incomplete
    beta I_x(freedom / 2, 1 / 2) at x = freedom / (freedom + t^2). Written out (a continued
    fraction) rather than asked of SciPy, whose import costs a scoring process a fifth of a
    second and 30 MB: a test holds it to SciPy's `stdtr` over a grid."""
    if t == 0:
        return 1.0
    x = freedom / (freedom + t * t)
    return min(1.0, _beta_regularised(freedom / 2, 0.5, x))


def _beta_regularised(a: float, b: float, x: float) -> float:
    """I_x(a, b) by its continued fraction (Lentz's method), from the side where it converges."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _t_interval(difference: float, se: float, cases: int, alpha: float, rejects: bool) -> Interval:
    """The paired t-test inverted at level 1 - alpha, held to -1..1 (a difference of rates
    lies there) and to the side of 0 that the test's p decides (`rejects`: p < alpha), since
    the quantile and the p are found in floating point apart. SciPy's quantile is imported
    here, when a page asks, never by a scoring."""
    if cases < 2:  # nothing to read a spread from: any difference of rates
        return Interval(-1.0, 1.0)
    if se == 0:  # no case has attempts that disagree: nothing is beyond noise
        return Interval(min(difference, 0.0), max(difference, 0.0))
    from scipy.special import stdtrit

    half = float(stdtrit(cases - 1, 1 - alpha / 2)) * se
    low, high = max(-1.0, difference - half), min(1.0, difference + half)
    if rejects:
        if difference > 0:
            low = max(low, math.nextafter(0.0, 1.0))
        else:
            high = min(high, math.nextafter(0.0, -1.0))
    else:
        low, high = min(low, 0.0), max(high, 0.0)
    return Interval(min(low, difference), max(high, difference))


def _detectable(test: Paired, alpha: float, power: float) -> float | None:
    """`Paired.detectable_at`, worked out."""
    m = test.cases
    if test.discordant is not None:  # McNemar's, as the normal test of the changed cases
        q = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
        # x cases falling add x changed cases to the b + c seen: x = q sqrt(b + c + x).
        seen = sum(test.discordant)
        return min(1.0, (q * q + math.sqrt(q**4 + 4 * q * q * seen)) / 2 / m)
    if m < 2:
        return None
    from scipy.special import stdtrit  # a page's question, never a scoring's

    q = float(stdtrit(m - 1, 1 - alpha / 2)) + float(stdtrit(m - 1, power))
    # A fall of d in every case adds at most d (1 - d) a trial over its r attempts to the
    # spread seen: d = q sqrt(se^2 + d (1 - d) / (r m)), a quadratic in d.
    se = test.standard_error or 0.0
    c = q * q / ((test.attempts or 1.0) * m)
    return min(1.0, (c + math.sqrt(c * c + 4 * (1 + c) * q * q * se * se)) / (2 * (1 + c)))


# --- one case across runs --------------------------------------------------------------------
#
# A case's figures per run are (clean, counted) for one model and surface. Three questions:
# do its repeats disagree more than slips explain (flaky), did its rate change at some run
# (first flip), and does it separate the models (discrimination)?

SLIP = 0.05  # an attempt of a steady case may go the other way this often without it being flaky
FLAKY_RUNS = 2  # at least this many runs must disagree within themselves


@dataclass(frozen=True)
class Flakiness:
    runs: int  # runs with two or more counted repeats
    disagreeing: int  # of those, runs whose repeats disagree
    p_value: float  # of that many disagreeing runs if every attempt slips at SLIP at most

    @property
    def flaky(self) -> bool:
        return self.disagreeing >= FLAKY_RUNS and self.p_value < ALPHA


def flakiness(runs: Sequence[tuple[int, int]]) -> Flakiness:
    """Whether repeats under one run, model and surface disagree beyond slips. A steady case
    (one that would pass, or fail, every time) may still slip: an attempt goes the other way
    with probability SLIP at most. Then a run of m repeats disagrees within itself with
    probability at most 1 - (1 - SLIP)^m - SLIP^m, runs independently; the count of
    disagreeing runs is Poisson-binomial, and its upper tail is the p. Flaky when at least
    FLAKY_RUNS runs disagree and p < 0.05. A case whose rate is only uncertain (few attempts,
    all agreeing in each run) is never flaky, however wide its interval."""
    repeats = tuple(d for _, d in runs if d >= 2)
    disagree = sum(1 for k, d in runs if d >= 2 and 0 < k < d)
    if disagree < FLAKY_RUNS:
        return Flakiness(len(repeats), disagree, 1.0)
    return Flakiness(len(repeats), disagree, _slipping_tail(repeats, disagree))


def flakiness_of_rows(clean: np.ndarray, counted: np.ndarray) -> list[Flakiness]:
    """`flakiness` of each row of two matrices of whole numbers, a run's Clean and counted
    attempts in each column (a run that does not hold the row counts 0 of 0, which the test
    passes over as it passes over any run without repeats)."""
    repeated = counted >= 2
    disagreeing = repeated & (clean > 0) & (clean < counted)
    out: list[Flakiness] = []
    steady: dict[tuple[int, int], Flakiness] = {}
    for row, (runs, disagree) in enumerate(
        zip(repeated.sum(axis=1).tolist(), disagreeing.sum(axis=1).tolist(), strict=True)
    ):
        if disagree < FLAKY_RUNS:
            # The figures are frozen: rows that read alike share one.
            if (runs, disagree) not in steady:
                steady[(runs, disagree)] = Flakiness(runs, disagree, 1.0)
            out.append(steady[(runs, disagree)])
        else:
            repeats = tuple(counted[row][repeated[row]].tolist())
            out.append(Flakiness(runs, disagree, _slipping_tail(repeats, disagree)))
    return out


@functools.lru_cache(maxsize=1024)
def _slipping_tail(repeats: tuple[int, ...], at_least: int) -> float:
    """The flaky p for runs of these repeat counts, at least `at_least` of them disagreeing.
    Kept per counts: the runs of a corpus mostly repeat each case alike, so the cases of a
    page share a handful of these."""
    m = np.array(repeats, dtype=np.float64)
    q = 1 - (1 - SLIP) ** m - SLIP**m
    return _poisson_binomial_tail(q, at_least)


def _poisson_binomial_tail(q: np.ndarray, at_least: int) -> float:
    """P(at least `at_least` of independent events with probabilities q happen)."""
    pmf = np.zeros(len(q) + 1)
    pmf[0] = 1.0
    for p in q:
        pmf[1:] = pmf[1:] * (1 - p) + pmf[:-1] * p
        pmf[0] *= 1 - p
    return float(min(1.0, pmf[at_least:].sum()))


@dataclass(frozen=True)
class Flip:
    index: int  # the first run (0-based, in run order) of the changed rate
    before: tuple[int, int]  # clean / counted over the runs before it
    after: tuple[int, int]  # over it and the runs after
    p_value: float  # Fisher's exact test of the split, before the correction for the splits


def first_flip(runs: Sequence[tuple[int, int]]) -> Flip | None:
    """The run after which a case's rate differs from the runs before it beyond noise: each
    split of the runs in order (runs before t against t and after) is tested by Fisher's exact
    test (two-sided, by doubling the smaller tail); the split with the smallest p is the
    change point, taken when its p is below 0.05 divided by the number of splits (Bonferroni,
    so a steady case is flagged in at most 5% of its histories). None when no split is."""
    return first_flips([runs])[0]


def first_flips(timelines: Sequence[Sequence[tuple[int, int]]]) -> list[Flip | None]:
    """`first_flip` of each timeline, with every split of every timeline tested at once (see
    `first_flips_of`)."""
    clean = np.array([n for runs in timelines for n, _ in runs], dtype=np.int64)
    counted = np.array([d for runs in timelines for _, d in runs], dtype=np.int64)
    return first_flips_of(clean, counted, [len(runs) for runs in timelines])


def first_flips_of(
    clean: np.ndarray, counted: np.ndarray, lengths: Sequence[int] | np.ndarray
) -> list[Flip | None]:
    """`first_flip` of each of several timelines laid end to end: `clean` and `counted` hold
    each run's figures, the first `lengths[0]` of them the first timeline's, and so on. Every
    split of every timeline is tested in one call of SciPy's (a call costs far more than a
    split, and a corpus page holds thousands of timelines), and only the splits that can be a
    flip: a timeline that never changes (every attempt Clean, or none) has none to test, nor
    has a split whose own table is too likely."""
    sizes = np.asarray(lengths, dtype=np.int64)
    out: list[Flip | None] = [None] * len(sizes)
    if not len(sizes):
        return out
    k = np.asarray(clean, dtype=np.int64)
    d = np.asarray(counted, dtype=np.int64)
    # Running sums from 0, so that a stretch's sum is the difference of two of them.
    sum_k = np.concatenate(([0], np.cumsum(k)))
    sum_d = np.concatenate(([0], np.cumsum(d)))
    ends = np.cumsum(sizes)
    starts = ends - sizes
    total_k, total_d = sum_k[ends] - sum_k[starts], sum_d[ends] - sum_d[starts]
    changing = np.flatnonzero((sizes >= 2) & (total_k > 0) & (total_k < total_d))
    if not len(changing):
        return out
    # One entry per split of a changing timeline: the runs before split t are its first t.
    splits = sizes[changing] - 1
    line = np.repeat(np.arange(len(changing)), splits)
    first = np.cumsum(splits) - splits  # each timeline's first split
    before_end = starts[changing][line] + np.arange(len(line)) - first[line] + 1
    bk = sum_k[before_end] - sum_k[starts[changing]][line]
    bd = sum_d[before_end] - sum_d[starts[changing]][line]
    tk, td = total_k[changing][line], total_d[changing][line]
    ok = (bd > 0) & (bd < td)
    threshold = (ALPHA / splits)[line]
    # Both tails hold the split's own table, so its p is at least twice that table's
    # probability: a split whose table alone is too likely cannot be a flip, and is not tested
    # (with a margin far wider than the rounding of the log-gamma sums).
    log_choose = _log_choose_table(int(td.max()))
    table = np.exp(log_choose(tk, bk) + log_choose(td - tk, bd - bk) - log_choose(td, bd))
    wanted = ok & (2 * table < threshold * 1.001)
    at = np.flatnonzero(wanted)
    if not len(at):
        return out
    from scipy.stats import hypergeom

    p = np.ones(len(bk))
    low = hypergeom.cdf(bk[at], td[at], tk[at], bd[at])
    high = hypergeom.sf(bk[at] - 1, td[at], tk[at], bd[at])
    p[at] = np.minimum(1.0, 2 * np.minimum(low, high))
    for n in np.unique(line[at]).tolist():
        start, count = int(first[n]), int(splits[n])
        split_p = p[start : start + count]
        best = int(np.argmin(split_p))  # the earliest of equal p
        if split_p[best] >= ALPHA / count:
            continue
        b = start + best
        out[int(changing[n])] = Flip(
            best + 1,
            (int(bk[b]), int(bd[b])),
            (int(tk[b] - bk[b]), int(td[b] - bd[b])),
            float(split_p[best]),
        )
    return out


def _log_choose_table(most: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """log(n choose k) for whole numbers up to `most`, each log-gamma read from one table of
    them (the same values SciPy's `gammaln` gives each number, computed once a number)."""
    from scipy.special import gammaln

    log_factorial = gammaln(np.arange(most + 2, dtype=np.float64))

    def log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
        return log_factorial[n + 1] - log_factorial[k + 1] - log_factorial[n - k + 1]

    return log_choose


@dataclass(frozen=True)
class Discrimination:
    v: float  # Cramér's V of models against Clean: 0 (no separation) to 1 (complete)
    p_value: float  # the chi-square test of equal Clean rates across the models
    models: int  # models with a counted attempt


def discrimination(per_model: Sequence[tuple[int, int]]) -> Discrimination:
    """How strongly a case separates the models: each model's (clean, counted) on it as a
    models x {clean, not} table; Cramér's V = sqrt(chi-square / attempts), between 0 (every
    model passes it as often) and 1 (some models always pass it, the others never), with the
    chi-square test of equal rates across models. V needs no ranking of the models and is
    bounded, so cases with different numbers of attempts compare; a case every model always
    (or never) passes has V = 0 and p = 1."""
    return discriminations([per_model])[0]


def discriminations(cases: Sequence[Sequence[tuple[int, int]]]) -> list[Discrimination]:
    """`discrimination` of each case, every chi-square p read in one call of SciPy's."""
    out: list[Discrimination | None] = []
    tested: list[tuple[int, float, float, int]] = []  # (at, chi-square, attempts, models)
    for per_model in cases:
        rows = [(k, d - k) for k, d in per_model if d > 0]
        if len(rows) < 2:
            out.append(Discrimination(0.0, 1.0, len(rows)))
            continue
        table = np.array(rows, dtype=np.float64)
        n = table.sum()
        col = table.sum(axis=0)
        if (col == 0).any():
            out.append(Discrimination(0.0, 1.0, len(rows)))
            continue
        expected = np.outer(table.sum(axis=1), col) / n
        chi2 = float(((table - expected) ** 2 / expected).sum())
        tested.append((len(out), chi2, float(n), len(rows)))
        out.append(None)
    if tested:
        from scipy.stats import chi2 as chi2_dist

        ps = chi2_dist.sf([t[1] for t in tested], [t[3] - 1 for t in tested]).tolist()
        for (at, chi2, n, models), p in zip(tested, ps, strict=True):
            out[at] = Discrimination(float(min(1.0, math.sqrt(chi2 / n))), float(p), models)
    return [d for d in out if d is not None]
