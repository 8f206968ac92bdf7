"""Which rows of a group a paired test can tell apart, per column, and the rows' intervals where
cases repeat: computed once when a scoring is stored, since both read every case of every row
(which a page must not: its cost would grow with the run), and kept in each score row's figures.
Scorings stored before this are read live, as they were."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from records import evidence, stats
from records.models import ScoreRow, Scoring, Session
from records.scorer.score import RATIO_COLUMNS
from records.scoring.sums import ScoringSums
from records.scoring.tables import (
    TableRow,
    ranking_groups,
    ratio_of,
    rows_to_store,
    score_groups,
    score_rows,
    store_case_counts,
)

PairTests = dict[tuple[str, str], dict[str, stats.Paired]]  # (baseline, candidate) row keys


@dataclass
class Ranking:
    """A group's models on one column, best first, and which pairs a paired test over the
    cases both ran can tell apart at the 5% level."""

    title: str  # the column, as titled on the pages
    ranked: list[tuple[TableRow, tuple[int, int], stats.Interval | None]]
    apart: list[tuple[str, str, stats.Paired]]  # (higher, lower, its test)
    together: int  # pairs that cannot be told apart
    cases: int  # the most cases any pair shared
    without_rate: list[str]  # models with no rate on this column
    family: int = 0  # the pairs tested, over which the tests are read together

    @property
    def sentence(self) -> str:
        n = len(self.ranked)
        if n < 2:
            return "One model has a rate here: there is nothing to rank it against."
        pairs = n * (n - 1) // 2
        size = (
            f"at this sample size ({self.cases} case{'s' if self.cases != 1 else ''} shared; "
            f"{evidence.rule_words(self.family or pairs, 'pairs')})"
        )
        if not self.apart:
            return (
                f"No pair of the {n} models can be told apart {size}: every paired test "
                "over the cases both ran is within noise, so the order above may be chance."
            )
        told = "; ".join(f"{hi} above {lo}" for hi, lo, _ in self.apart)
        if not self.together:
            return f"Every pair of the {n} models can be told apart {size}: {told}."
        return (
            f"{len(self.apart)} of {pairs} pairs can be told apart {size}: {told}. "
            f"The other {self.together} cannot: their order may be chance."
        )


def rank(rows: list[TableRow], column: str, title: str, tests: PairTests) -> Ranking:
    """A group's rows ranked on `column`, best first, read against their pair tests: a pair is
    told apart when its test, Holm-adjusted over every pair of the group
    (`records.evidence`), puts the difference beyond noise."""
    scored = [(r, dict(r.columns)[column]) for r in rows]
    ranked = sorted(
        ((r, pair, r.interval(column)) for r, pair in scored if pair[1]),
        key=lambda x: (-x[1][0] / x[1][1], x[0].model),
    )
    pairs = [(hi, lo) for i, (hi, _, _) in enumerate(ranked) for lo, _, _ in ranked[i + 1 :]]
    found = [_test(tests, lo.row_key, hi.row_key, column) for hi, lo in pairs]
    apart, together, most = [], 0, 0
    for (hi, lo), test, decided in zip(pairs, found, evidence.decide(found), strict=True):
        most = max(most, test.cases if test else 0)
        if test and decided and decided.label != evidence.NOISE:
            higher, lower = (hi, lo) if test.difference > 0 else (lo, hi)
            apart.append((higher.model, lower.model, test))
        else:
            together += 1
    without = [r.model for r, pair in scored if not pair[1]]
    return Ranking(title, ranked, apart, together, most, without, sum(1 for t in found if t))


def _test(tests: PairTests, baseline: str, candidate: str, column: str) -> stats.Paired | None:
    """The test of `candidate` against `baseline`, whichever way round it was stored."""
    found = tests.get((baseline, candidate), {}).get(column)
    if found is not None:
        return found
    other = tests.get((candidate, baseline), {}).get(column)
    return None if other is None else other.reversed()


def paired_tests(
    a: dict[str, dict[str, int]],
    b: dict[str, dict[str, int]],
    columns: tuple[str, ...] = RATIO_COLUMNS,
) -> dict[str, stats.Paired]:
    """Each column of two rows (their figures per case) compared case by case over the cases
    both ran (`stats`)."""
    asked = _asked(_ratios(a, columns), _ratios(b, columns), sorted(set(a) & set(b)))
    tested = stats.compare_each(asked)
    return {column: result for column, result in tested.items() if result is not None}


def _ratios(
    figures: dict[str, dict[str, int]], columns: tuple[str, ...]
) -> dict[str, dict[str, tuple[int, int]]]:
    """A row's figures per case as each column's (n, d) per case."""
    return {column: {c: ratio_of(f, column) for c, f in figures.items()} for column in columns}


def _asked(
    a: dict[str, dict[str, tuple[int, int]]],
    b: dict[str, dict[str, tuple[int, int]]],
    cases: list[str],
) -> dict[str, tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """What `stats.compare_each` is asked of two rows (`_ratios`), by column: each side's
    (n, d) over `cases`."""
    return {column: ([a[column][c] for c in cases], [b[column][c] for c in cases]) for column in a}


def pair_tests(groups: list[Any], per_case: dict[str, dict[str, dict[str, int]]]) -> PairTests:
    """Every pair of rows within a group, every column, tested over the cases both ran: each
    pair's as `paired_tests` gives it, a group's pairs tested together (`stats.compare_each`),
    so that a row's column over the cases its pairs share is summed once, not once a pair."""
    out: PairTests = {}
    for g in groups:
        keys = sorted(r.row_key for r in g.rows)
        ratios = {key: _ratios(per_case.get(key, {}), RATIO_COLUMNS) for key in keys}
        asked: dict[tuple[str, str, str], Any] = {}
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                out[(a, b)] = {}
                cases = sorted(per_case.get(a, {}).keys() & per_case.get(b, {}).keys())
                for column, sides in _asked(ratios[a], ratios[b], cases).items():
                    asked[(a, b, column)] = sides
        for (a, b, column), result in stats.compare_each(asked).items():
            if result is not None:
                out[(a, b)][column] = result
    return out


def _kept_test(t: stats.Paired) -> list[Any]:
    """A pair test as a score row keeps it: its figures, and what its interval at any level is
    worked out from when a page asks (McNemar's changed cases, the paired t-test's standard
    error)."""
    extra = list(t.discordant) if t.discordant is not None else t.standard_error
    return [t.cases, t.baseline_rate, t.candidate_rate, t.p_value, t.test, extra]


def _read_test(kept: list[Any]) -> stats.Paired | None:
    """A kept pair test; None for one kept by an earlier rule (a scoring stored before the
    paired t-test, whose tests are then worked out again from its cases)."""
    if len(kept) != 6 or kept[4] not in (stats.MCNEMAR, stats.PAIRED_T):
        return None
    cases, base, cand, p, test, extra = kept
    if test == stats.MCNEMAR:
        return stats.Paired(cases, base, cand, p, test, (extra[0], extra[1]))
    return stats.Paired(cases, base, cand, p, test, None, extra)


def stored_pair_tests(rows: list[TableRow]) -> PairTests | None:
    """The pair tests kept with the rows; None where a row has none, or one was kept by an
    earlier rule (an older scoring: its tests are worked out again from its cases)."""
    out: PairTests = {}
    for r in rows:
        kept = r.figures.get("pairs")
        if kept is None:
            return None
        for other, columns in kept.items():
            read = {column: _read_test(test) for column, test in columns.items()}
            if any(test is None for test in read.values()):
                return None
            out[(r.row_key, other)] = {c: t for c, t in read.items() if t is not None}
    return out


def store_rows(
    scoring: Scoring,
    sums: ScoringSums,
    sessions: dict[str, int | None],
    session_rows: dict[int, Session],
) -> None:
    """Store the scoring's per-case counts and its rows (`records.scoring.tables`), each row
    with its pair tests against the other rows of its group (under the row whose key sorts
    first, as the baseline) and, where cases repeat, its intervals with the case as the unit.
    Computed once, at scoring time, from what the verdicts summed (`sums`), before the rows
    are stored: they are written once, and nothing is read back. `sessions`, `session_rows`:
    as `rows_to_store` takes them."""
    cells = list(sums.case_counts())
    store_case_counts(scoring, cells)
    stored = rows_to_store(scoring, sums, sessions, session_rows)
    per_case = sums.per_case()
    counts = [(row_key, done, counted) for row_key, _, done, counted, _ in cells]
    rows = score_rows(scoring, live=True, per_case=per_case, stored=stored, case_counts=counts)
    groups = ranking_groups(score_groups(scoring, rows))
    tests = pair_tests(groups, per_case)
    kept: dict[str, dict[str, Any]] = {r.row_key: {"pairs": {}} for r in rows}
    for (a, b), columns in tests.items():
        kept[a]["pairs"][b] = {column: _kept_test(t) for column, t in columns.items()}
    for r in rows:
        if r.case_intervals is not None:
            kept[r.row_key]["intervals"] = {
                c: None if ci is None else [ci.low, ci.high] for c, ci in r.case_intervals.items()
            }
        if r.repeats is not None:
            x = r.repeats
            kept[r.row_key]["repeats"] = [x.k, x.cases, x.every, x.any]
    for s in stored:
        s.figures = {**s.figures, **kept[s.row_key]}
    ScoreRow.objects.bulk_create(stored)
