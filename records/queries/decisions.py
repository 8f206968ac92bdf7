"""Did a run regress against a baseline? The one place a pair of runs is decided, for the runs
list, the comparison, a row's history, the case pages and the CI gate alike.

Rows pair as a comparison pairs them (`match_rows`; refused as it refuses them: another corpus,
contract or repeat); rows that differ only in case coverage are compared on the cases both ran.
Each pair is tested case by case on each decided column over the cases both ran
(`paired_tests`), and the tests are read together, family-wise, by `records.evidence`: the
family is every tested row on every decided column of the pair of runs. The cases are read from
the per-case figures kept with each scoring (Clean), or summed from the verdicts (any other
column), in one query for every pair of runs decided together, never one a row or a run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from records import evidence
from records.models import CaseFigure, ScoreRow, Scoring, Verdict
from records.queries.cases import fill_missing
from records.queries.pairing import Side, differences, match_rows, refusal
from records.scoring.ranking import paired_tests
from records.scoring.tables import IDENTITY, RowKey, TableRow, figure_sums, summed_rows
from records.scoring.vocabulary import COLUMN_TITLE

DEFAULT_COLUMNS = ("clean",)
NOTHING_TESTED = "nothing tested"  # the rule's words where no row was tested

PerCase = dict[str, dict[str, dict[str, int]]]  # {row key: {case: figures}}


@dataclass
class RowDecision:
    """One row of the candidate against its baseline row, on each decided column."""

    key: RowKey
    baseline: str  # the baseline row's key
    candidate: str
    cases: tuple[int, int]  # the cases each side ran
    decisions: dict[str, evidence.Decision] = field(default_factory=dict)  # per column

    @property
    def shared(self) -> int:
        return max((d.test.cases for d in self.decisions.values()), default=0)

    @property
    def label(self) -> str:
        return evidence.verdict_of([d.label for d in self.decisions.values()])

    @property
    def detectable_points(self) -> int | None:
        """The largest of its decided columns' `evidence.Decision.detectable`, in whole rate
        points: a change smaller than about this can go unseen (None where none says)."""
        found = [x for d in self.decisions.values() if (x := d.detectable) is not None]
        return max(1, round(100 * max(found))) if found else None

    @property
    def titles(self) -> str:
        return ", ".join(COLUMN_TITLE[c] for c in self.decisions)

    @property
    def coverage(self) -> str:
        """ "on 217 shared cases of 218 / 217" where the two rows ran different cases."""
        a, b = self.cases
        if a == b == self.shared:
            return f"on {self.shared} shared case{'s' if self.shared != 1 else ''}"
        return f"on {self.shared} shared case{'s' if self.shared != 1 else ''} of {a} / {b}"


@dataclass
class RunDecision:
    """A candidate run against its baseline: every row's decision, read as one family."""

    baseline: int  # the runs' pks
    candidate: int
    columns: tuple[str, ...]
    rows: list[RowDecision] = field(default_factory=list)
    problem: str = ""  # why nothing could be compared ("" when something was)

    @property
    def family(self) -> int:
        return sum(len(r.decisions) for r in self.rows)

    @property
    def label(self) -> str:
        """ "regressed", "improved", "within noise", or "not compared" (nothing tested)."""
        return evidence.verdict_of([r.label for r in self.rows]) or "not compared"

    def count(self, label: str) -> int:
        return sum(1 for r in self.rows if r.label == label)

    @property
    def regressed(self) -> list[RowDecision]:
        return [r for r in self.rows if r.label == evidence.REGRESSED]

    def row(self, baseline_key: str, candidate_key: str) -> RowDecision | None:
        return next(
            (r for r in self.rows if (r.baseline, r.candidate) == (baseline_key, candidate_key)),
            None,
        )

    @property
    def titles(self) -> str:
        return ", ".join(COLUMN_TITLE[c] for c in self.columns)

    @property
    def rule(self) -> str:
        """The rule as the pages name it: "Holm-adjusted over 12 rows, 5% family-wise", or
        "nothing tested" where no row was tested (a family of none adjusts nothing)."""
        if not self.family:
            return NOTHING_TESTED
        what = "rows" if len(self.columns) == 1 else "row-columns"
        return evidence.rule_words(self.family, what)

    @property
    def sentence(self) -> str:
        """The decision in one sentence, the same on every page that shows it."""
        if self.label == "not compared":
            return self.problem or "no row of the two runs could be compared"
        n = len(self.rows)
        told = f"{n} row{'s' if n != 1 else ''} tested case by case on {self.titles} ({self.rule})"
        if self.label == evidence.REGRESSED:
            return f"{self.count(evidence.REGRESSED)} of {told} regressed"
        if self.label == evidence.IMPROVED:
            return f"{self.count(evidence.IMPROVED)} of {told} improved, none regressed"
        return f"{told}: every difference is within noise"


def latest_of(runs: Sequence[int]) -> dict[int, Scoring]:
    """Each run's latest scoring (scored or not), by run pk; its run joined (one query)."""
    latest: dict[int, Scoring] = {}
    for s in (
        Scoring.objects.filter(run__in=list(runs))
        .select_related("run")
        .defer("run__cases_seen")
        .order_by("run", "-created_at", "-id")
    ):
        latest.setdefault(s.run_id, s)
    return latest


def decide_pairs(
    pairs: dict[int, int], columns: Sequence[str] = DEFAULT_COLUMNS
) -> dict[int, RunDecision]:
    """Each candidate run (by pk) against its baseline run (`pairs`: candidate pk to baseline
    pk): a few queries for any number of pairs (scorings, which keep per-case figures, rows,
    figures; for any other column, the verdicts of the paired rows of every scoring, grouped
    in one query)."""
    columns = tuple(columns)
    latest = latest_of(sorted({*pairs, *pairs.values()}))
    out: dict[int, RunDecision] = {}
    scored: dict[int, tuple[Scoring, Scoring]] = {}
    for candidate, baseline in pairs.items():
        sa, sb = latest.get(baseline), latest.get(candidate)
        if sa is None or sb is None or not sa.verdict_count or not sb.verdict_count:
            out[candidate] = RunDecision(
                baseline, candidate, columns, problem="both runs must be scored to be compared"
            )
        else:
            scored[candidate] = (sa, sb)
    scorings = {s.pk: s for pair in scored.values() for s in pair}
    rows = _rows(scorings)
    matched = {c: match_rows(rows[sa.pk], rows[sb.pk]) for c, (sa, sb) in scored.items()}
    # The rows a test can read: those with a partner in the other run.
    keys: dict[int, set[str]] = defaultdict(set)
    for candidate, (sa, sb) in scored.items():
        for a, b in matched[candidate]:
            if a is not None and b is not None:
                keys[sa.pk].add(a.row_key)
                keys[sb.pk].add(b.row_key)
    per_case = _per_case(scorings, columns, keys)
    for candidate, (sa, sb) in scored.items():
        out[candidate] = _decide(
            sa, sb, rows[sa.pk], rows[sb.pk], matched[candidate], per_case, columns
        )
    return out


def decide(baseline: int, candidate: int, columns: Sequence[str] = DEFAULT_COLUMNS) -> RunDecision:
    """One candidate run against one baseline run (by pk)."""
    return decide_pairs({candidate: baseline}, columns)[candidate]


def _rows(scorings: dict[int, Scoring]) -> dict[int, list[TableRow]]:
    rows: dict[int, list[TableRow]] = defaultdict(list)
    for r in (
        ScoreRow.objects.filter(scoring__in=list(scorings))
        .select_related("session")
        .defer("figures")
        .order_by("scoring", "row_key")
    ):
        s = scorings[r.scoring_id]
        rows[s.pk].append(
            TableRow(
                r.row_key,
                r.model,
                r.surface,
                {},
                case_count=r.case_count,
                coverage=r.coverage,
                key=RowKey.of(r.model, r.surface, s.run, r.session),
            )
        )
    return rows


def _per_case(
    scorings: dict[int, Scoring], columns: tuple[str, ...], keys: dict[int, set[str]]
) -> dict[int, PerCase]:
    """Each scoring's rows' figures per case, for the rows named in `keys` (by scoring pk):
    Clean from the figures kept with each scoring; any other column summed from the verdicts
    of every scoring in one grouped query."""
    out: dict[int, PerCase] = defaultdict(dict)
    if not scorings:
        return out
    if set(columns) <= {"clean"}:
        fill_missing(scorings.values())
        for scoring, row_key, case, clean, counted in CaseFigure.objects.filter(
            scoring__in=list(scorings)
        ).values_list("scoring", "row_key", "case", "clean", "counted"):
            out[scoring].setdefault(row_key, {})[case] = {"clean": clean, "counted": counted}
        return out
    wanted = {k for found in keys.values() for k in found}
    if not wanted:
        return out
    query = (
        Verdict.objects.filter(scoring__in=list(scorings), row_key__in=sorted(wanted))
        .values("scoring", "row_key", "case")
        .annotate(**figure_sums())
        .order_by()
    )
    for r, figures in summed_rows(query):  # as `case_figures` reads them
        if r["row_key"] in keys.get(r["scoring"], ()):
            out[r["scoring"]].setdefault(r["row_key"], {})[r["case"]] = figures
    return out


def _side(scoring: Scoring, row: TableRow) -> Side:
    figures: dict[str, Any] = {}
    return Side(scoring.run, scoring, row, figures, None)


def _decide(
    sa: Scoring,
    sb: Scoring,
    left: list[TableRow],
    right: list[TableRow],
    matched: list[tuple[TableRow | None, TableRow | None]],
    per_case: dict[int, PerCase],
    columns: tuple[str, ...],
) -> RunDecision:
    result = RunDecision(sa.run_id, sb.run_id, columns)
    tested: list[tuple[RowDecision, str, Any]] = []
    refused: list[str] = []
    alone = 0
    for a, b in matched:
        if a is None or b is None:
            alone += 1
            continue
        ra, rb = _side(sa, a), _side(sb, b)
        why = refusal(ra, rb, differences(ra, rb))
        if why:
            refused.append(f"{b.key.label if b.key else b.row_key}: {why}")
            continue
        row = RowDecision(
            b.key or a.key, a.row_key, b.row_key, (a.case_count or 0, b.case_count or 0)
        )
        tests = paired_tests(
            per_case[sa.pk].get(a.row_key, {}), per_case[sb.pk].get(b.row_key, {}), columns
        )
        for column in columns:
            if column in tests:
                tested.append((row, column, tests[column]))
        result.rows.append(row)
    for (row, column, _), decision in zip(
        tested, evidence.decide([t for _, _, t in tested]), strict=True
    ):
        assert decision is not None
        row.decisions[column] = decision
    untested = sum(1 for r in result.rows if not r.decisions)
    result.rows = [r for r in result.rows if r.decisions]
    if not result.rows:
        result.problem = _nothing_compared(refused, untested, alone, left, right, result.titles)
    return result


def _apart(left: list[TableRow], right: list[TableRow]) -> list[str]:
    """The identity parts in which no row of one run shares a value with any of the other's,
    each with the values on either side ("surface (dynamic vs meta)")."""

    def values(rows: list[TableRow], part: str) -> list[str]:
        return sorted({str(getattr(r.key, part)) for r in rows if r.key is not None})

    out = []
    for part in IDENTITY:
        a, b = values(left, part), values(right, part)
        if a and b and not set(a) & set(b):
            shown = [
                ", ".join(v[:3]) + (f" and {len(v) - 3} more" if len(v) > 3 else "") for v in (a, b)
            ]
            out.append(f"{part.replace('_', ' ')} ({shown[0]} vs {shown[1]})")
    return out


def _rows_words(n: int) -> str:
    return f"{n} row{'s' if n != 1 else ''}"


def _nothing_compared(
    refused: list[str],
    untested: int,
    alone: int,
    left: list[TableRow],
    right: list[TableRow],
    titles: str,
) -> str:
    """Why no row of two runs could be compared: the rows refused, else the rows that paired
    but could not be tested (no case both ran has a denominator on the decided columns) and
    the rows with no partner, else the key parts in which the runs' rows differ."""
    head = "no row of the two runs could be compared: "
    if refused:
        shown = "; ".join(refused[:3]) + (
            f"; and {len(refused) - 3} more" if len(refused) > 3 else ""
        )
        return head + shown
    if untested:
        paired = (
            f"{_rows_words(untested)} paired on model, surface, mode and pins, but no case "
            f"both ran has a denominator on {titles}"
        )
        if alone:
            verb = "have" if alone != 1 else "has"
            paired += f"; {_rows_words(alone)} {verb} no partner in the other run"
        return head + paired
    if alone:
        apart = _apart(left, right)
        if apart:
            return head + "they differ in " + "; ".join(apart)
        return head + (
            "no row of one run has the model, surface, mode and pins of a row of the other"
        )
    return head + "neither run has a scored row"
