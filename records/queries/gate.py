"""The CI gate: did a run regress against a baseline, with evidence, in the gated columns?

The baseline is a run given by its run id, or "previous": the latest earlier run of the same
corpus digest, models and surfaces (the comparison pages use the same rule). Whether a row
regressed is decided once, for every page and the gate, by `records.queries.decisions`: each
row tested case by case, the tests read together with Holm's adjustment over every row (and
column) the gate covers, so a steady project fails at most one run in twenty. With "previous"
and no earlier comparable run there is nothing to compare: the gate passes and says so, unless
the caller requires a baseline. A baseline with which no row could be compared fails, naming
why, unless the caller allows an empty comparison.

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
from records.queries.annotations import excused_cases, excused_words
from records.queries.compare import case_flips
from records.queries.decisions import RunDecision, decide
from records.queries.failures import NewMode, new_modes_since
from records.queries.runs import previous_runs
from records.scoring.run import score_unscored
from records.scoring.tables import case_figures, ratio_of
from records.scoring.vocabulary import COLUMN_BY_TITLE, COLUMN_TITLE, COLUMN_TITLES

# Regressed cases named per regressed row in the comment (the JSON lists as many).
CASES_NAMED = 5
# New failure modes named in the comment (the JSON lists every one).
MODES_NAMED = 5


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
    columns: list[str]  # as titled on the pages
    regressed: list[dict[str, Any]] = field(default_factory=list)
    rows: int = 0
    problem: str = ""
    reason: str = ""  # why there is no baseline
    require_baseline: bool = False
    allow_empty: bool = False
    ignore_labels: bool = False
    base_url: str = ""  # the dashboard's public address, for the comment's links
    decision: RunDecision | None = None
    new_modes: list[NewMode] | None = None  # failure modes the baseline has none of

    def modes_lines(self) -> list[str]:
        """The comment's lines naming the failure modes new since the baseline (the first few)."""
        if not self.new_modes:
            return []
        total = sum(m.attempts for m in self.new_modes)
        n = len(self.new_modes)
        lines = [
            "",
            f"{n} new failure mode{'s' if n != 1 else ''}, {total} attempt"
            f"{'s' if total != 1 else ''}, since the baseline:",
            "",
        ]
        for m in self.new_modes[:MODES_NAMED]:
            sig = m.signature
            what = " ".join(
                str(v)
                for v in (
                    sig.get("outcome"),
                    sig.get("step"),
                    sig.get("tool"),
                    sig.get("action"),
                    sig.get("check"),
                    sig.get("message"),
                )
                if v
            )
            lines.append(
                f"- [{m.id}]({self.link(m.url)}) {markdown_code(what)}: {m.attempts} attempt"
                f"{'s' if m.attempts != 1 else ''}"
            )
        if n > MODES_NAMED:
            lines.append(f"- and {n - MODES_NAMED} more")
        return lines

    @property
    def column(self) -> str:
        return ", ".join(self.columns)

    @property
    def passed(self) -> bool:
        if self.baseline is None:
            return not self.require_baseline
        if self.problem and not (self.allow_empty and not self.rows):
            return False
        return not self.failing

    @property
    def failing(self) -> list[dict[str, Any]]:
        """The regressed rows that fail the gate: all but those the team's labels excuse."""
        return [r for r in self.regressed if not r["excused"]]

    @property
    def rule(self) -> str:
        return "" if self.decision is None else self.decision.rule

    def link(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    @property
    def run_url(self) -> str:
        return self.link(reverse("records:run", args=[self.run.pk]))

    @property
    def comparison_url(self) -> str | None:
        if self.baseline is None:
            return None
        state: dict[str, Any] = {
            "kind": "runs",
            "baseline": self.baseline.pk,
            "candidate": self.run.pk,
        }
        if self.columns != ["Clean"]:
            # Every gated column: the comparison decides over the family the gate decided.
            state["column"] = self.columns
        query = urlencode(state, doseq=True)
        return self.link(f"{reverse('records:compare')}?{query}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run.run_id,
            "baseline": None if self.baseline is None else self.baseline.run_id,
            "column": self.column,
            "columns": self.columns,
            "passed": self.passed,
            "reason": self.reason,
            "require_baseline": self.require_baseline,
            "allow_empty": self.allow_empty,
            "ignore_labels": self.ignore_labels,
            "rule": self.rule,
            "rows_compared": self.rows,
            "new_failure_modes": None
            if self.new_modes is None
            else [
                {
                    "id": m.id,
                    "signature": m.signature,
                    "attempts": m.attempts,
                    "url": self.link(m.url),
                }
                for m in self.new_modes
            ],
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
            "(exact McNemar test with one attempt per case, paired t-test over cases with "
            f"repeats; {self.rule}; [the comparison]({self.comparison_url}))."
        )
        if self.problem:
            allowed = " An empty comparison is allowed, so the gate passes." if self.passed else ""
            return f"{head}\n\n{markdown_code(self.problem)}{allowed}\n"
        if self.decision is not None:
            head += f" {self.decision.sentence[0].upper()}{self.decision.sentence[1:]}."
        if not self.regressed:
            return (
                "\n".join([head, "", "No row regressed beyond noise.", *self.modes_lines()]) + "\n"
            )
        lines = [
            head,
            "",
            "| Model | Surface | Mode | Column | Baseline (%) | Candidate (%) | Δ (points) "
            "| Interval (points) | p | Holm p | Test | Regressed cases |",
            "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        excused = [r for r in self.regressed if r["excused"]]
        for r in self.regressed:
            low, high = r["interval_points"]
            key = r["key"]
            named = ", ".join(markdown_code(c, in_table=True) for c in r["cases_regressed"])
            more = r["cases_regressed_total"] - len(r["cases_regressed"])
            lines.append(
                f"| {markdown_code(key['model'], in_table=True)} "
                f"| {markdown_code(key['surface'], in_table=True)} "
                f"| {markdown_code(key['mode'], in_table=True)} | {r['column']} "
                f"| {r['baseline_percent']:.1f} | {r['candidate_percent']:.1f} "
                f"| {r['delta_points']:+.1f} | {low:+.1f} to {high:+.1f} at "
                f"{r['confidence_percent']:.4g}% | {r['p_value']:.3g} | {r['p_adjusted']:.3g} "
                f"| {markdown_code(r['test'], in_table=True)} {r['coverage']} "
                f"| {named or '-'}{f' and {more} more' if more > 0 else ''} |"
            )
        if excused:
            lines += ["", "Excused by the team's labels (these rows do not fail the gate):", ""]
            lines += [
                f"- {markdown_code(r['row'])}: {r['excused_words']}"
                + (f" ({markdown_code(r['excused_note'])})" if r["excused_note"] else "")
                for r in excused
            ]
        return "\n".join(lines + self.modes_lines()) + "\n"


def gate(
    run: Run,
    baseline: Run | None,
    column_titles: str | list[str],
    *,
    require_baseline: bool = False,
    allow_empty: bool = False,
    ignore_labels: bool = False,
    base_url: str = "",
) -> GateResult:
    """The gate's answer for `run` against `baseline` on the given columns. A regressed row
    whose cases that fell on the gated column are all labelled known-flaky (unresolved) is
    reported, excused, and does not fail the gate, unless `ignore_labels`."""
    titles = [column_titles] if isinstance(column_titles, str) else list(column_titles)
    titles = list(dict.fromkeys(titles or ["Clean"]))
    columns = []
    for title in titles:
        if title not in COLUMN_BY_TITLE:
            raise GateError(f"no column {title!r}; one of {', '.join(COLUMN_TITLES)}", 400)
        columns.append(COLUMN_BY_TITLE[title])
    result = GateResult(
        run,
        baseline,
        titles,
        require_baseline=require_baseline,
        allow_empty=allow_empty,
        ignore_labels=ignore_labels,
        base_url=base_url,
    )
    if baseline is None:
        result.reason = (
            f"run {run.run_id!r} has no earlier run of the same corpus digest, models and "
            "surfaces to compare with; name a baseline run id to compare with another"
        )
        return result
    score_unscored((baseline, run))
    result.decision = decision = decide(baseline.pk, run.pk, columns)
    result.rows = len(decision.rows)
    result.problem = decision.problem
    result.new_modes = new_modes_since(run, baseline)
    regressed = []
    for row in decision.rows:
        for column, d in row.decisions.items():
            if d.label != "regressed":
                continue
            t, interval = d.test, d.interval
            regressed.append((row, column))
            result.regressed.append(
                {
                    "row": row.key.label,
                    "key": row.key.as_dict(),
                    "column": COLUMN_TITLE[column],
                    "baseline_percent": 100 * t.baseline_rate,
                    "candidate_percent": 100 * t.candidate_rate,
                    "delta_points": 100 * t.difference,
                    "interval_points": [100 * interval.low, 100 * interval.high],
                    "confidence_percent": 100 * d.confidence,
                    "p_value": t.p_value,
                    "p_adjusted": d.p_adjusted,
                    "test": t.test,
                    "cases": t.cases,
                    "coverage": row.coverage,
                    "cases_regressed_total": 0,
                    "cases_regressed": [],
                    "cases_fell": [],
                    "excused": False,
                    "excused_by": {},
                    "excused_words": "",
                    "excused_note": "",
                }
            )
    if regressed:
        # The regressed cases of the regressed rows only: a bounded read.
        sa, sb = baseline.latest_scoring(), run.latest_scoring()
        assert sa is not None and sb is not None
        pairs = list(dict.fromkeys((row.baseline, row.candidate) for row, _ in regressed))
        counts, changes = case_flips(sa, sb, pairs, limit=CASES_NAMED)
        # The cases whose rate on the gated column fell: the labels must excuse every one.
        per_a = case_figures(sa, [a for a, _ in pairs])
        per_b = case_figures(sb, [b for _, b in pairs])
        fell: dict[tuple[str, str], list[str]] = {}
        for row, column in regressed:
            a, b = per_a.get(row.baseline, {}), per_b.get(row.candidate, {})
            fell[(row.baseline, column)] = [
                case
                for case in sorted(set(a) & set(b))
                if _fell(ratio_of(a[case], column), ratio_of(b[case], column))
            ]
        labels = (
            {}
            if ignore_labels
            else excused_cases(
                run.corpus_digest, sorted({c for found in fell.values() for c in found})
            )
        )
        for (row, column), r in zip(regressed, result.regressed, strict=True):
            r["cases_regressed_total"] = counts.get(row.baseline, {}).get("regressed", 0)
            r["cases_regressed"] = [
                f.case for f in changes.get(row.baseline, []) if f.kind == "regressed"
            ]
            found = fell[(row.baseline, column)]
            r["cases_fell"] = found
            excusing = {c: labels[c] for c in found if c in labels}
            if found and len(excusing) == len(found):
                r["excused"] = True
                r["excused_by"] = {c: a.label.slug for c, a in excusing.items()}
                r["excused_words"] = excused_words(excusing)
                r["excused_note"] = next((a.note for a in excusing.values() if a.note), "")
    return result


def _fell(before: tuple[int, int], after: tuple[int, int]) -> bool:
    """Whether a case's rate fell (both sides with a denominator, as the test pairs them)."""
    (na, da), (nb, db) = before, after
    return bool(da and db) and nb * da < na * db


def resolve(run_id: str, baseline: str) -> tuple[Run, Run | None]:
    run = run_by_id(run_id)
    return run, previous_comparable(run) if baseline == "previous" else run_by_id(baseline)
