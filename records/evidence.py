"""The one rule behind "regressed / improved / within noise", and the one definition of each
cost figure. Pure Python on `records.stats`, no Django: every page, export and the CI gate reads
its words and figures from here.

A decision covers a family of paired tests: the rows (and columns, where several are gated) of
one comparison of two runs. Each test's p is adjusted over the family by Holm's step-down
method, so that a comparison of two runs that differ only by chance calls any row regressed or
improved in at most 5% of such comparisons, however many rows it tests (family-wise error).
A row is "regressed" (or "improved") when its adjusted p is below 5% and its difference falls
(or rises); otherwise its difference is "within noise".

The interval shown beside a decision is the one its test inverts at the level Holm tested that
row at: 5% / (m - j + 1) for the j-th smallest p of m while the steps reject, and the level of
the first step that did not reject for every row from there on. So the interval excludes 0
exactly when the row is called regressed or improved, row by row (`tests/test_evidence.py`
holds this over random families).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from records import stats

ALPHA = stats.ALPHA
RULE = "Holm"

REGRESSED, IMPROVED, NOISE = "regressed", "improved", "within noise"


@dataclass(frozen=True)
class Decision:
    """One test read within its family."""

    test: stats.Paired
    p_adjusted: float
    alpha: float  # the level this row was tested at (its interval's is 1 - alpha)
    family: int  # how many tests the decision covers

    @property
    def p_value(self) -> float:
        """The test's own p, before the adjustment."""
        return self.test.p_value

    @property
    def difference(self) -> float:
        return self.test.difference

    @property
    def interval(self) -> stats.Interval:
        """The difference's interval at this row's level, the one its test inverts."""
        return self.test.interval_at(self.alpha)

    @property
    def confidence(self) -> float:
        return 1 - self.alpha

    @property
    def detectable(self) -> float | None:
        """The smallest difference this row's test would find about 80% of the time at the
        level it is tested at, from the noise of its cases and the change's own
        (`stats.Paired.detectable_at`): below it, a change can go unseen."""
        return self.test.detectable_at(self.alpha)

    @property
    def label(self) -> str:
        if self.p_adjusted < ALPHA and self.difference < 0:
            return REGRESSED
        if self.p_adjusted < ALPHA and self.difference > 0:
            return IMPROVED
        return NOISE


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p of each p, in the order given: the j-th smallest of m is
    max over i <= j of (m - i + 1) p_(i), at most 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def decide(tests: Sequence[stats.Paired | None]) -> list[Decision | None]:
    """Each test read within the family of all the tests given (None stands for a row that
    could not be tested, and counts for nothing), in the order given."""
    present = [(i, t) for i, t in enumerate(tests) if t is not None]
    m = len(present)
    out: list[Decision | None] = [None] * len(tests)
    if not m:
        return out
    adjusted = holm([t.p_value for _, t in present])
    # The level of each step: 5% / (m - j) at step j (from 0) while the steps reject; the
    # first step that does not reject fixes the level of every later one.
    order = sorted(range(m), key=lambda k: present[k][1].p_value)
    level, stopped = [ALPHA] * m, None
    for step, k in enumerate(order):
        at = ALPHA / (m - step)
        if stopped is None and present[k][1].p_value >= at:
            stopped = at
        level[k] = at if stopped is None else stopped
    for k, (i, t) in enumerate(present):
        out[i] = Decision(t, adjusted[k], level[k], m)
    return out


def rule_words(family: int, what: str = "rows") -> str:
    """The rule as a page names it, e.g. "Holm-adjusted over 12 rows, 5% family-wise"."""
    unit = what if family != 1 else what.removesuffix("s")
    return f"{RULE}-adjusted over {family} {unit}, {100 * ALPHA:.0f}% family-wise"


def verdict_of(labels: Sequence[str]) -> str:
    """What a family's decisions say together: "regressed" if any row regressed, else
    "improved" if any improved, else "within noise" ("" for no decision)."""
    found = set(labels)
    return next((x for x in (REGRESSED, IMPROVED, NOISE) if x in found), "")


# --- cost figures ---------------------------------------------------------------------------------
#
# Each figure is the cost of every attempt of a row (every try charged, at the run's own price)
# over one denominator, defined here once (docs/pages.md, "Cost"):
# - per attempt: over every attempt of the row, counted apart or not;
# - per completed: over the attempts the scorer found Completed (the score tables' Completed
#   column), not over attempts whose ending says "completed";
# - per case: over the distinct cases the row ran.
# None where the row is unpriced or the denominator is 0.


def per(cost: float | None, denominator: int | None) -> float | None:
    if cost is None or not denominator:
        return None
    return cost / denominator


def cost_per_attempt(cost: float | None, attempts: int | None) -> float | None:
    return per(cost, attempts)


def cost_per_completed(cost: float | None, completed: int | None) -> float | None:
    return per(cost, completed)


def cost_per_case(cost: float | None, cases: int | None) -> float | None:
    return per(cost, cases)
