"""Runs, surfaces and models side by side, and the comparison's exports."""

from __future__ import annotations

from typing import Any

from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
)
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from records.formats.markdown import markdown_code
from records.models import (
    Run,
)
from records.queries import compare as cmp
from records.scoring.run import latest_scoring
from records.scoring.tables import COLUMN_TITLES, score_groups
from records.views import charts
from records.views.access import (
    _bad_request,
    _get_run_or_404,
    _partial,
    query_form,
    read_access,
)
from records.views.exports import _export
from records.views.forms import CaseCompareForm, CompareForm


@require_GET
@read_access
@vary_on_headers("HX-Request")
def compare(request: HttpRequest) -> HttpResponse:

    run_choices = list(Run.objects.order_by("-started_at", "-id").values_list("pk", "run_id")[:200])
    form = CompareForm(request.GET or None, run_choices=run_choices)
    context: dict[str, Any] = {"form": form, "run_choices": run_choices}
    if request.GET and not form.is_valid():
        return _bad_request(form, request)
    data = form.cleaned_data if request.GET else {"kind": "runs"}
    context["kind"] = data["kind"]
    if data["kind"] == "runs" and data.get("baseline") and data.get("candidate"):
        baseline = _get_run_or_404(data["baseline"])
        page_no = data.get("page") or 1
        comparisons = []
        pages_needed = 1
        for pk in data["candidate"]:
            candidate = _get_run_or_404(pk)
            rows, problem = cmp.compare_runs(baseline, candidate, page=page_no)
            pages_needed = max(pages_needed, -(-len(rows) // cmp.ROWS_PER_PAGE))
            start = (page_no - 1) * cmp.ROWS_PER_PAGE
            comparisons.append((candidate, rows[start : start + cmp.ROWS_PER_PAGE], problem))
        context.update(
            baseline=baseline,
            column_titles=COLUMN_TITLES,
            comparisons=comparisons,
            page_no=page_no,
            pages_needed=pages_needed,
        )
    elif data["kind"] in ("surfaces", "models") and data.get("run"):
        run = _get_run_or_404(data["run"])
        context["run"] = run
        if data["kind"] == "surfaces":
            context["surface_groups"] = cmp.compare_surfaces(run)
        else:
            scoring = latest_scoring(run)
            groups = score_groups(scoring) if scoring and scoring.verdict_count else []
            column = data.get("column") or COLUMN_TITLES[0]
            rankings = cmp.rank_models(scoring, groups, column) if groups else []
            context.update(
                groups=[
                    cmp.RankedGroup(
                        g,
                        charts.grouped_bars(g),
                        f"bars-{i}",
                        r,
                        charts.ranked_intervals(r),
                        f"ranked-{i}",
                    )
                    for i, (g, r) in enumerate(zip(groups, rankings, strict=True))
                ],
                column=column,
                columns=COLUMN_TITLES,
                scoring=scoring,
                scatter=charts.cost_scatter(groups, column) if groups else None,
            )
    template = (
        "records/compare/page.html#result" if _partial(request) else "records/compare/page.html"
    )
    return render(request, template, context)


@require_GET
@read_access
def compare_export(request: HttpRequest, fmt: str) -> HttpResponse:

    run_choices = list(Run.objects.values_list("pk", "run_id"))
    form = CompareForm(request.GET, run_choices=run_choices)
    if (
        not form.is_valid()
        or not form.cleaned_data.get("baseline")
        or not form.cleaned_data.get("candidate")
    ):
        return HttpResponseBadRequest(
            "name a baseline and at least one candidate", content_type="text/plain"
        )
    baseline = _get_run_or_404(form.cleaned_data["baseline"])
    rows_out = []
    for pk in form.cleaned_data["candidate"]:
        candidate = _get_run_or_404(pk)
        rows, problem = cmp.compare_runs(baseline, candidate, flip_limit=None, page=None)
        for c in rows:
            rows_out.append(comparison_row(baseline, candidate, c, problem, cases=fmt == "json"))
    if fmt == "md":
        lines = [
            f"Comparison of {markdown_code(baseline.run_id)} (baseline) with "
            + ", ".join(
                markdown_code(_get_run_or_404(pk).run_id) for pk in form.cleaned_data["candidate"]
            ),
            "",
        ]
        for r in rows_out:
            lines.append(
                f"- {markdown_code(r['row'])} vs {markdown_code(r['candidate'])}: "
                + (
                    f"not compared: {markdown_code(r['refused'])}"
                    if r["refused"]
                    else f"{r['regressed']} regressed, {r['fixed']} fixed"
                    + ("; shared cases only" if r["shared_cases_only"] else "")
                    + "; "
                    + ", ".join(
                        f"{t} {_md_ratio(r, t + ' before')} → {_md_ratio(r, t + ' after')}"
                        for t in ("Clean", "Completion")
                        if r.get(t + " before d") is not None
                    )
                )
            )
        text = "\n".join(lines) + "\n"
        return HttpResponse(text, content_type="text/markdown; charset=utf-8")
    return _export(fmt, "comparison", rows_out)


def comparison_row(
    baseline: Run, candidate: Run, c: Any, problem: str, *, cases: bool = False
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
        "shared cases": c.shared or None,
        **{k: c.kinds.get(k, 0) for k in cmp.FLIP_ORDER},
    }
    compared = bool(c.baseline and c.candidate and not c.refused)
    columns = (
        c.tested_columns() if compared else [(t, None, None, None, None) for t in COLUMN_TITLES]
    )
    for title, a, b, d, t in columns:
        for side, pair in (("before", a), ("after", b)):
            out[f"{title} {side} n"] = pair[0] if pair else None
            out[f"{title} {side} d"] = pair[1] if pair else None
            out[f"{title} {side} rate"] = round(pair[0] / pair[1], 6) if pair and pair[1] else None
        out[f"{title} delta (points)"] = None if d is None else round(d, 2)
        out[f"{title} delta low (points)"] = round(100 * t.delta.low, 2) if t else None
        out[f"{title} delta high (points)"] = round(100 * t.delta.high, 2) if t else None
        out[f"{title} p"] = round(t.p_value, 6) if t else None
        out[f"{title} reading"] = t.label if t else None
        out[f"{title} test"] = t.test if t else None
    out["cost delta usd"] = None if not compared or c.cost_delta is None else round(c.cost_delta, 6)
    if cases:
        out["cases"] = [f.__dict__ for f in c.flips] if compared else []
    return out


def _md_ratio(row: dict[str, Any], prefix: str) -> str:
    n, d = row[prefix + " n"], row[prefix + " d"]
    return "-" if not d else f"{n:,} / {d:,}"


@require_GET
@read_access
@query_form(CaseCompareForm)
def compare_case(request: HttpRequest, form: CaseCompareForm) -> HttpResponse:
    """One case of a compared row: the two runs' attempts side by side, call by call."""
    data = form.cleaned_data
    baseline, candidate = _get_run_or_404(data["baseline"]), _get_run_or_404(data["candidate"])
    sa, sb = latest_scoring(baseline), latest_scoring(candidate)
    if sa is None or sb is None:
        raise Http404("both runs must be scored")
    pairs = cmp.case_side_by_side(sa, sb, data["a"], data["b"], data["case"])
    return render(
        request,
        "records/compare/case.html",
        {
            "baseline": baseline,
            "candidate": candidate,
            "case": data["case"],
            "identity": cmp.row_label(sb, data["b"]),
            "pairs": pairs,
        },
    )
