"""Each run's answer against its previous comparable run, as the CI gate reads it: the runs list's
first column of evidence.

The rule is the gate's (`records.queries.gate`): the baseline is the latest earlier run of the
same corpus digest, models and surfaces (`previous_runs`); rows pair as a comparison pairs them
(`match_rows`, refused as it refuses them); each pair is tested case by case on Clean over the
cases both ran (`paired_tests`); a run regressed when a row did. The cases are read from the
per-case figures kept with each scoring, never from verdicts, so a page of runs costs the same
few queries however many runs, rows and attempts it shows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from records.models import CaseFigure, Run, ScoreRow, Scoring
from records.queries.cases import fill_missing
from records.queries.compare import Side, differences, evidence_of, match_rows, refusal
from records.queries.runs import previous_runs
from records.scoring.ranking import paired_tests
from records.scoring.tables import RowKey, TableRow

COLUMN = "clean"  # the gate's default column, and the runs list's headline


@dataclass(frozen=True)
class Answer:
    """A run's Clean against its baseline: "regressed", "improved", "within noise", "no
    baseline" (no earlier comparable run) or "not compared" (one side is not scored, or no
    row of the two can be compared)."""

    label: str
    baseline: int | None = None  # the baseline run's pk
    candidate: int | None = None
    rows: int = 0  # rows tested case by case
    regressed: int = 0  # of those, rows that regressed beyond noise
    improved: int = 0

    @property
    def comparison_url(self) -> str | None:
        if self.baseline is None or self.candidate is None:
            return None
        query = urlencode({"kind": "runs", "baseline": self.baseline, "candidate": self.candidate})
        return f"{reverse('records:compare')}?{query}"

    @property
    def sentence(self) -> str:
        if self.label == "no baseline":
            return "no earlier run has the same corpus digest, models and surfaces"
        if self.label == "not compared":
            return "the previous comparable run and this one cannot be compared row by row"
        told = f"{self.rows} row{'s' if self.rows != 1 else ''} tested case by case on Clean"
        if self.label == "regressed":
            return f"{self.regressed} of {told} fell beyond noise (as the CI gate reads it)"
        if self.label == "improved":
            return f"{self.improved} of {told} rose beyond noise, none fell"
        return f"{told}: every difference is within noise"


def latest_of(runs: list[int]) -> dict[int, Scoring]:
    """Each run's latest scoring, as the gate takes it (scored or not), by run pk; its run
    joined (one query)."""
    latest: dict[int, Scoring] = {}
    for s in (
        Scoring.objects.filter(run__in=runs)
        .select_related("run")
        .defer("run__cases_seen")
        .order_by("run", "-created_at", "-id")
    ):
        latest.setdefault(s.run_id, s)
    return latest


def answers(runs: list[Run]) -> dict[int, Answer]:
    """Each run's answer against its previous comparable run, by run pk: five queries for a page
    of runs (previous runs, scorings, which scorings keep per-case figures, rows, figures)."""
    previous = previous_runs(runs)
    out = {r.pk: Answer("no baseline") for r in runs if r.pk not in previous}
    if not previous:
        return out
    latest = latest_of(sorted({*previous, *previous.values()}))
    pairs = {}
    for candidate, baseline in previous.items():
        sa, sb = latest.get(baseline), latest.get(candidate)
        if sa is None or sb is None or not sa.verdict_count or not sb.verdict_count:
            out[candidate] = Answer("not compared", baseline, candidate)
        else:
            pairs[candidate] = (sa, sb)
    scorings = {s.pk: s for pair in pairs.values() for s in pair}
    fill_missing(scorings.values())
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
    per_case: dict[int, dict[str, dict[str, dict[str, int]]]] = defaultdict(dict)
    for scoring, row_key, case, clean, counted in CaseFigure.objects.filter(
        scoring__in=list(scorings)
    ).values_list("scoring", "row_key", "case", "clean", "counted"):
        per_case[scoring].setdefault(row_key, {})[case] = {"clean": clean, "counted": counted}
    for candidate, (sa, sb) in pairs.items():
        labels = []
        for a, b in match_rows(rows[sa.pk], rows[sb.pk]):
            if a is None or b is None:
                continue
            ra, rb = _side(sa, a), _side(sb, b)
            if refusal(ra, rb, differences(ra, rb)):
                continue
            test = paired_tests(
                per_case[sa.pk].get(a.row_key, {}),
                per_case[sb.pk].get(b.row_key, {}),
                (COLUMN,),
            ).get(COLUMN)
            if test is not None:
                labels.append(test.label)
        label = evidence_of(labels) or "not compared"
        out[candidate] = Answer(
            label,
            sa.run_id,
            candidate,
            len(labels),
            labels.count("regressed"),
            labels.count("improved"),
        )
    return out


def _side(scoring: Scoring, row: TableRow) -> Side:
    figures: dict[str, Any] = {}
    return Side(scoring.run, scoring, row, figures, None)
