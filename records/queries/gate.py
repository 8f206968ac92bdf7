"""The CI gate: did a run regress against a baseline, with evidence, in one column?

The baseline is a run given by its run id, or "previous": the latest earlier run of the same
corpus digest, models and surfaces (the comparison pages use the same rule). A row regressed when
its case-by-case test says so (`records.stats`); a difference within noise passes. With
"previous" and no earlier comparable run there is nothing to compare: the gate passes and says
so, unless the caller requires a baseline.

Every figure is in percent: rates as percentages, differences and their interval in percentage
points, as the field names say. Every value the Markdown carries (run ids, model specs,
surfaces, case ids, reasons) is text a shard wrote, so each is put in a code span that no
backtick, pipe or line break inside it can leave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from records.formats.markdown import markdown_code
from records.models import Run
from records.queries.compare import case_flips, compare_runs
from records.queries.runs import previous_runs
from records.scoring.run import score_unscored
from records.scoring.vocabulary import COLUMN_BY_TITLE, COLUMN_TITLES

# Regressed cases named per regressed row in the comment (the JSON lists as many).
CASES_NAMED = 5


class GateError(Exception):
    """What the gate cannot answer, in words, with the HTTP status that says it: 404 for a run
    or baseline that is not there, 400 for an unknown column."""

    def __init__(self, message: str, status: int = 404) -> None:
        super().__init__(message)
        self.status = status


def run_by_id(run_id: str) -> Run:
    run = Run.objects.filter(run_id=run_id).order_by("-started_at", "-id").first()
    if run is None:
        raise GateError(f"no stored run has the run id {run_id!r}")
    return run


def previous_comparable(run: Run) -> Run | None:
    """The run "previous" means: the one the pages' "compare with previous" links to."""
    pk = previous_runs([run]).get(run.pk)
    return None if pk is None else Run.objects.get(pk=pk)


# --- the gate ------------------------------------------------------------------------------------


@dataclass
class GateResult:
    run: Run
    baseline: Run | None
    column: str  # as titled on the pages
    regressed: list[dict[str, Any]] = field(default_factory=list)
    rows: int = 0
    problem: str = ""
    reason: str = ""  # why there is no baseline
    require_baseline: bool = False
    base_url: str = ""  # the dashboard's public address, for the comment's links

    @property
    def passed(self) -> bool:
        if self.baseline is None:
            return not self.require_baseline
        return not self.regressed and not self.problem

    def link(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    @property
    def run_url(self) -> str:
        return self.link(reverse("records:run", args=[self.run.pk]))

    @property
    def comparison_url(self) -> str | None:
        if self.baseline is None:
            return None
        query = urlencode({"kind": "runs", "baseline": self.baseline.pk, "candidate": self.run.pk})
        return self.link(f"{reverse('records:compare')}?{query}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run.run_id,
            "baseline": None if self.baseline is None else self.baseline.run_id,
            "column": self.column,
            "passed": self.passed,
            "reason": self.reason,
            "require_baseline": self.require_baseline,
            "rows_compared": self.rows,
            "regressed": self.regressed,
            "problem": self.problem,
            "run_url": self.run_url,
            "comparison_url": self.comparison_url,
            "markdown": self.markdown(),
        }

    def markdown(self) -> str:
        run = f"[run]({self.run_url}) {markdown_code(self.run.run_id)}"
        verdict = "passed" if self.passed else "failed"
        if self.baseline is None:
            return (
                f"**evaldash gate: {verdict}**: {run} on {markdown_code(self.column)}, "
                "no baseline.\n\n"
                f"{markdown_code(self.reason)}"
                + (" A baseline is required, so the gate fails." if self.require_baseline else "")
                + "\n"
            )
        head = (
            f"**evaldash gate: {verdict}**: {run} against baseline "
            f"{markdown_code(self.baseline.run_id)} on {markdown_code(self.column)}, "
            f"{self.rows} row(s) compared case by case "
            "(exact McNemar test with one attempt per case, paired bootstrap over cases with "
            f"repeats; [the comparison]({self.comparison_url}))."
        )
        if self.problem:
            return f"{head}\n\n{markdown_code(self.problem)}\n"
        if not self.regressed:
            return f"{head}\n\nNo row regressed beyond noise.\n"
        lines = [
            head,
            "",
            "| Model | Surface | Mode | Baseline (%) | Candidate (%) | Δ (points) "
            "| 95% interval (points) | p | Test | Regressed cases |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        for r in self.regressed:
            low, high = r["interval_points"]
            key = r["key"]
            named = ", ".join(markdown_code(c, in_table=True) for c in r["cases_regressed"])
            more = r["cases_regressed_total"] - len(r["cases_regressed"])
            lines.append(
                f"| {markdown_code(key['model'], in_table=True)} "
                f"| {markdown_code(key['surface'], in_table=True)} "
                f"| {markdown_code(key['mode'], in_table=True)} "
                f"| {r['baseline_percent']:.1f} | {r['candidate_percent']:.1f} "
                f"| {r['delta_points']:+.1f} | {low:+.1f} to {high:+.1f} "
                f"| {r['p_value']:.3g} | {markdown_code(r['test'], in_table=True)} over "
                f"{r['cases']} cases | {named or '-'}{f' and {more} more' if more > 0 else ''} |"
            )
        return "\n".join(lines) + "\n"


def gate(
    run: Run,
    baseline: Run | None,
    column_title: str,
    *,
    require_baseline: bool = False,
    base_url: str = "",
) -> GateResult:
    column = COLUMN_BY_TITLE.get(column_title)
    if column is None:
        raise GateError(f"no column {column_title!r}; one of {', '.join(COLUMN_TITLES)}", 400)
    result = GateResult(
        run, baseline, column_title, require_baseline=require_baseline, base_url=base_url
    )
    if baseline is None:
        result.reason = (
            f"run {run.run_id!r} has no earlier run of the same corpus digest, models and "
            "surfaces to compare with; name a baseline run id to compare with another"
        )
        return result
    score_unscored((baseline, run))
    rows, result.problem = compare_runs(baseline, run, flip_limit=0, page=None)
    pairs = []
    for c in rows:
        test = c.tests.get(column)
        if test is None:
            continue
        result.rows += 1
        if test.label == "regressed":
            assert c.baseline and c.candidate
            pairs.append((c.baseline.row.row_key, c.candidate.row.row_key))
            result.regressed.append(
                {
                    "row": c.identity,
                    "key": c.key.as_dict(),
                    "baseline_percent": 100 * test.baseline_rate,
                    "candidate_percent": 100 * test.candidate_rate,
                    "delta_points": 100 * test.difference,
                    "interval_points": [100 * test.delta.low, 100 * test.delta.high],
                    "p_value": test.p_value,
                    "test": test.test,
                    "cases": test.cases,
                    "cases_regressed_total": c.regressions,
                    "cases_regressed": [],
                }
            )
    if pairs:
        # The first regressed cases of the regressed rows only: a bounded read.
        sides = next(c for c in rows if c.baseline and c.candidate)
        assert sides.baseline and sides.candidate
        _, changes = case_flips(
            sides.baseline.scoring, sides.candidate.scoring, pairs, limit=CASES_NAMED
        )
        for (a, _), r in zip(pairs, result.regressed, strict=True):
            r["cases_regressed"] = [f.case for f in changes.get(a, []) if f.kind == "regressed"]
    return result


def resolve(run_id: str, baseline: str) -> tuple[Run, Run | None]:
    run = run_by_id(run_id)
    return run, previous_comparable(run) if baseline == "previous" else run_by_id(baseline)
