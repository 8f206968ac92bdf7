"""A row's history: one model on one surface over the runs of one corpus digest, each run's score
on a column with its interval, and the first run where it fell by more than noise, each run
against the one before it decided as their comparison and the gate decide them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from django.urls import reverse

from records import evidence, stats
from records.models import PublishedRow, Run, ScoreRow, Scoring, Verdict
from records.queries.compare import parse_row_key
from records.queries.decisions import decide_pairs
from records.scoring.tables import figure_sums, ratio_of, summed
from records.scoring.vocabulary import COLUMN_BY_TITLE

RUNS_SHOWN = 60


@dataclass
class Point:
    run: Run
    row_key: str
    ratio: tuple[int, int]
    interval: stats.Interval | None
    previous: Run | None = None
    # Against the previous point's run, as the comparison and the gate decide that pair
    # (`records.queries.decisions`: Holm over the pair's rows on this column).
    decision: evidence.Decision | None = None
    rule: str = ""
    first_drop: bool = False

    column: str = "Clean"  # as titled

    @property
    def test(self) -> stats.Paired | None:
        return None if self.decision is None else self.decision.test

    @property
    def compare_url(self) -> str | None:
        """The comparison of this run with the one before it, deciding the same column."""
        if self.previous is None:
            return None
        state = {"kind": "runs", "baseline": self.previous.pk, "candidate": self.run.pk}
        if self.column != "Clean":
            state["column"] = self.column
        return f"{reverse('records:compare')}?{urlencode(state)}"

    @property
    def when(self) -> datetime | None:
        return self.run.started_at


@dataclass
class Published:
    """A row an uploaded model results record published for this model, surface and mode."""

    row: PublishedRow
    ratio: tuple[int, int]
    interval: stats.Interval | None


@dataclass
class History:
    digest: str
    model: str
    surface: str
    mode: str
    title: str  # the column, as titled on the pages
    points: list[Point] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)  # the modes this model ran on this surface
    more_runs: int = 0  # earlier runs of the digest left off the page
    published: list[Published] = field(default_factory=list)  # rows of uploaded records

    @property
    def first_drop(self) -> Point | None:
        return next((p for p in self.points if p.first_drop), None)


def rows_of_digest(digest: str) -> list[tuple[str, str, str, int]]:
    """(model, surface, mode, runs) for every row the digest's scored runs hold."""
    seen: dict[tuple[str, str, str], set[int]] = {}
    for row_key, run_pk in ScoreRow.objects.filter(
        scoring__run__corpus_digest=digest, scoring__verdict_count__gt=0
    ).values_list("row_key", "scoring__run"):
        k = parse_row_key(row_key)
        seen.setdefault((k.get("model", ""), k.get("surface", ""), k.get("mode", "")), set()).add(
            run_pk
        )
    return sorted((*key, len(runs)) for key, runs in seen.items())


def history(digest: str, model: str, surface: str, mode: str | None, title: str) -> History:
    """The history of (model, surface, mode) on the column titled `title`, over the latest
    RUNS_SHOWN scored runs of `digest`, oldest first. At most nine queries (ten when more runs
    are left off), however many runs and whatever the column: the runs, their scorings, the
    row's keys and its per-case figures, then the pairs' decisions (`decide_pairs`: scorings,
    rows, every paired row's per-case figures in one query, and on Clean whether those are
    kept), the last reading the rows uploaded records published."""
    column = COLUMN_BY_TITLE[title]
    out = History(digest, model, surface, mode or "", title)
    scored = (
        Run.objects.filter(corpus_digest=digest, scorings__verdict_count__gt=0)
        .distinct()
        .order_by("-started_at", "-id")
    )
    runs = list(scored[:RUNS_SHOWN])[::-1]
    out.more_runs = scored.count() - len(runs) if len(runs) == RUNS_SHOWN else 0
    latest = Scoring.objects.latest_for(runs)
    # Each run's row for the model and surface (in the chosen mode; else the first mode seen).
    rows: dict[int, str] = {}
    modes: set[str] = set()
    for scoring_id, row_key in ScoreRow.objects.filter(
        scoring__in=latest.values(), model=model, surface=surface
    ).values_list("scoring", "row_key"):
        row_mode = parse_row_key(row_key).get("mode", "")
        modes.add(row_mode)
        if mode is None or row_mode == mode:
            rows.setdefault(scoring_id, row_key)
    out.modes = sorted(modes)
    if mode is None and out.modes:
        out.mode = out.modes[0]
        rows = {s: k for s, k in rows.items() if parse_row_key(k).get("mode", "") == out.mode}
    # Per-case figures of every run's row, in one query.
    per_case: dict[int, dict[str, dict[str, int]]] = {}
    for r in (
        Verdict.objects.filter(scoring__in=list(rows), row_key__in=set(rows.values()))
        .values("scoring", "row_key", "case")
        .annotate(**figure_sums())
        .order_by()
    ):
        if rows.get(r["scoring"]) == r["row_key"]:
            per_case.setdefault(r["scoring"], {})[r["case"]] = summed(r)
    previous: Point | None = None
    for run in runs:
        scoring = latest.get(run.pk)
        if scoring is None or scoring.pk not in rows:
            continue
        cases = per_case.get(scoring.pk, {})
        pairs = [ratio_of(f, column) for f in cases.values()]
        ratio = (sum(n for n, _ in pairs), sum(d for _, d in pairs))
        # The interval as the run's own pages show it: the case as the unit where cases repeat.
        interval = stats.case_interval(pairs) if run.repeat > 1 else stats.wilson(*ratio)
        point = Point(run, rows[scoring.pk], ratio, interval, column=title)
        if previous is not None:
            point.previous = previous.run
        out.points.append(point)
        previous = point
    # Each run against the one before it, decided as its comparison decides it.
    decided = decide_pairs({p.run.pk: p.previous.pk for p in out.points if p.previous}, (column,))
    before = {p.run.pk: p for p in out.points}
    for point in out.points:
        if point.previous is None:
            continue
        pair = decided[point.run.pk]
        row = pair.row(before[point.previous.pk].row_key, point.row_key)
        point.rule = pair.rule
        point.decision = None if row is None else row.decisions.get(column)
        if (
            point.decision
            and point.decision.label == evidence.REGRESSED
            and not any(p.first_drop for p in out.points)
        ):
            point.first_drop = True
    for row in PublishedRow.objects.filter(
        corpus_digest=digest, model=model, surface=surface
    ).select_related("record")[:RUNS_SHOWN]:
        if row.key.get("mode", "") == out.mode:
            pair = row.columns.get(column) or {"numerator": 0, "denominator": 0}
            ratio = (pair["numerator"], pair["denominator"])
            out.published.append(Published(row, ratio, stats.wilson(*ratio)))
    return out
