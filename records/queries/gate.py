"""The CI gate: did a run regress against a baseline, with evidence, in one column?

The baseline is a run given by its run id, or "previous": the latest earlier run of the same
corpus digest, models and surfaces (the comparison pages use the same rule). A row regressed when
its case-by-case test says so (`records.stats`); a difference within noise passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from records.models import Run
from records.queries.compare import compare_runs
from records.queries.runs import previous_runs
from records.scores.run import score_unscored
from records.scores.tables import COLUMN_BY_TITLE, COLUMN_TITLES


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


@dataclass
class GateResult:
    run: Run
    baseline: Run
    column: str  # as titled on the pages
    regressed: list[dict[str, Any]] = field(default_factory=list)
    rows: int = 0
    problem: str = ""

    @property
    def passed(self) -> bool:
        return not self.regressed and not self.problem

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run.run_id,
            "baseline": self.baseline.run_id,
            "column": self.column,
            "passed": self.passed,
            "rows_compared": self.rows,
            "regressed": self.regressed,
            "problem": self.problem,
            "markdown": self.markdown(),
        }

    def markdown(self) -> str:
        head = (
            f"**evaldash gate: {'passed' if self.passed else 'failed'}** — `{self.run.run_id}` "
            f"against `{self.baseline.run_id}` on {self.column}, {self.rows} row(s) compared "
            "case by case."
        )
        if self.problem:
            return f"{head}\n\n{self.problem}\n"
        if not self.regressed:
            return f"{head}\n\nNo row regressed beyond noise.\n"
        lines = [
            head,
            "",
            "| Row | Baseline | Candidate | Δ (points) | 95% interval | p | Test |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in self.regressed:
            low, high = r["interval"]
            lines.append(
                f"| `{r['row']}` | {100 * r['baseline_rate']:.1f}% | {100 * r['candidate_rate']:.1f}% "
                f"| {r['delta_points']:+.1f} | {100 * low:+.1f} to {100 * high:+.1f} "
                f"| {r['p_value']:.3g} | {r['test']} over {r['cases']} cases |"
            )
        return "\n".join(lines) + "\n"


def gate(run: Run, baseline: Run | None, column_title: str) -> GateResult:
    column = COLUMN_BY_TITLE.get(column_title)
    if column is None:
        raise GateError(f"no column {column_title!r}; one of {', '.join(COLUMN_TITLES)}", 400)
    if baseline is None:
        raise GateError(
            f"run {run.run_id!r} has no earlier run of the same corpus digest, models and "
            "surfaces to compare with; name a baseline run id"
        )
    score_unscored((baseline, run))
    rows, problem = compare_runs(baseline, run, flip_limit=0, page=None)
    result = GateResult(run, baseline, column_title, problem=problem)
    for c in rows:
        test = c.tests.get(column)
        if test is None:
            continue
        result.rows += 1
        if test.label == "regressed":
            result.regressed.append(
                {
                    "row": c.identity,
                    "baseline_rate": test.baseline_rate,
                    "candidate_rate": test.candidate_rate,
                    "delta_points": 100 * test.difference,
                    "interval": [test.delta.low, test.delta.high],
                    "p_value": test.p_value,
                    "test": test.test,
                    "cases": test.cases,
                }
            )
    return result


def resolve(run_id: str, baseline: str) -> tuple[Run, Run | None]:
    run = run_by_id(run_id)
    return run, previous_comparable(run) if baseline == "previous" else run_by_id(baseline)
