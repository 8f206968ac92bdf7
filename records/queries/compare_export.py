"""A comparison of runs as its exports carry it: one row per compared pair of rows, with what the
page shows as numbers (CSV, JSON), and the Markdown summary, every run-supplied value escaped."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from records.formats.markdown import markdown_code
from records.models import Run
from records.queries.compare import FLIP_ORDER, compare_runs
from records.queries.decisions import decide
from records.scoring.vocabulary import COLUMN_BY_TITLE, COLUMN_TITLES


def comparison_rows(
    baseline: Run,
    candidates: list[Run],
    *,
    cases: bool = False,
    titles: Sequence[str] = ("Clean",),
) -> Iterator[dict[str, Any]]:
    """Every row of every candidate against the baseline, each changed case too with `cases`:
    an export is whole, never a page. Rows are decided on every column titled in `titles`, read
    as one family, as the page and the gate decide them."""
    columns = tuple(COLUMN_BY_TITLE[t] for t in titles)
    for candidate in candidates:
        decision = decide(baseline.pk, candidate.pk, columns)
        rows, problem = compare_runs(
            baseline, candidate, flip_limit=None, page=None, decision=decision
        )
        for c in rows:
            yield comparison_row(baseline, candidate, c, problem, cases=cases, rule=decision.rule)


def comparison_markdown(baseline: Run, candidates: list[Run], rows: list[dict[str, Any]]) -> str:
    """The comparison in a few Markdown lines: a row each, what regressed and what was fixed."""
    lines = [
        f"Comparison of {markdown_code(baseline.run_id)} (baseline) with "
        + ", ".join(markdown_code(c.run_id) for c in candidates),
        "",
    ]
    for r in rows:
        lines.append(
            f"- {markdown_code(r['row'])} vs {markdown_code(r['candidate'])}: "
            + (
                f"not compared: {markdown_code(r['refused'])}"
                if r["refused"]
                else f"{r['reading'] or 'not tested'} ({r['rule'] or 'no test'}); "
                f"{r['regressed']} case(s) now failing, {r['fixed']} now passing"
                + ("; shared cases only" if r["shared_cases_only"] else "")
                + "; "
                + ", ".join(
                    f"{t} {_ratio(r, t + ' before')} → {_ratio(r, t + ' after')}"
                    for t in ("Clean", "Completion")
                    if r.get(t + " before d") is not None
                )
            )
        )
    return "\n".join(lines) + "\n"


def comparison_row(
    baseline: Run, candidate: Run, c: Any, problem: str, *, cases: bool = False, rule: str = ""
) -> dict[str, Any]:
    """One compared row as the exports carry it: what the page shows, as numbers. Every row has
    every key (None where the rows were not compared), so a CSV's header fits each line."""
    out: dict[str, Any] = {
        "baseline": baseline.run_id,
        "candidate": candidate.run_id,
        "row": c.identity,
        # The row's identity as parts: a model spec may hold spaces or `=`.
        **c.key.as_dict(),
        "refused": c.refused or problem,
        "shared_cases_only": c.shared_only,
        "reading": c.evidence or None,
        "rule": rule if c.decision is not None else None,
        "shared cases": c.shared or None,
        **{k: c.kinds.get(k, 0) for k in FLIP_ORDER},
    }
    compared = bool(c.baseline and c.candidate and not c.refused)
    columns = (
        c.tested_columns()
        if compared
        else [(t, None, None, None, None, None) for t in COLUMN_TITLES]
    )
    for title, a, b, d, t, decided in columns:
        for side, pair in (("before", a), ("after", b)):
            out[f"{title} {side} n"] = pair[0] if pair else None
            out[f"{title} {side} d"] = pair[1] if pair else None
            out[f"{title} {side} rate"] = round(pair[0] / pair[1], 6) if pair and pair[1] else None
        out[f"{title} delta (points)"] = None if d is None else round(d, 2)
        # A decided column's interval is the one its Holm step tested (its confidence given);
        # another column's is its test's own 95% interval, and it decides nothing.
        interval = decided.interval if decided else (t.delta if t else None)
        out[f"{title} delta low (points)"] = round(100 * interval.low, 2) if interval else None
        out[f"{title} delta high (points)"] = round(100 * interval.high, 2) if interval else None
        out[f"{title} interval confidence"] = (
            round(decided.confidence, 6) if decided else (0.95 if t else None)
        )
        # Six significant digits, not places: a paired t-test's p may be far below 1e-6.
        out[f"{title} p"] = float(f"{t.p_value:.6g}") if t else None
        out[f"{title} p adjusted"] = float(f"{decided.p_adjusted:.6g}") if decided else None
        out[f"{title} reading"] = decided.label if decided else None
        out[f"{title} test"] = t.test if t else None
    out["cost delta usd"] = None if not compared or c.cost_delta is None else round(c.cost_delta, 6)
    if cases:
        out["cases"] = [f.__dict__ for f in c.flips] if compared else []
    return out


def _ratio(row: dict[str, Any], prefix: str) -> str:
    n, d = row[prefix + " n"], row[prefix + " d"]
    return "-" if not d else f"{n:,} / {d:,}"
