"""Adapter conformance: the adapter x case matrix, failures by template, each adapter's history,
runs, suites, and runs posted by the page or the API."""

from __future__ import annotations

import json as _json
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from evaldash.middleware import accepts_uploads
from records.conformance.formats import ConformanceError, ambiguities, template_of
from records.conformance.store import RunMeta, store_run
from records.models import (
    ApiToken,
    ConformanceResult,
    ConformanceRun,
    ConformanceSuite,
    Upload,
)
from records.queries.trace import pretty_json
from records.views.access import (
    read_access,
)
from records.views.exports import export
from records.views.uploads import recent_uploads, token_upload, upload_page_context


def _latest_runs() -> list[ConformanceRun]:
    latest: dict[str, ConformanceRun] = {}
    for run in ConformanceRun.objects.select_related("suite").order_by("adapter", "-ran_at", "-id"):
        latest.setdefault(run.adapter, run)
    return sorted(latest.values(), key=lambda r: r.adapter)


def _matrix() -> tuple[list[str], list[tuple[ConformanceRun, list[Any]]]]:
    runs = _latest_runs()
    results: dict[int, dict[str, ConformanceResult]] = {r.pk: {} for r in runs}
    for res in ConformanceResult.objects.filter(run__in=runs):
        results[res.run_id][res.case] = res
    cases: list[str] = []
    for run in runs:
        names = [c["name"] for c in run.suite.cases] if run.suite else list(results[run.pk])
        for name in names:
            if name not in cases:
                cases.append(name)
    return cases, [(run, [results[run.pk].get(c) for c in cases]) for run in runs]


def failures_first(
    cases: list[str], rows: list[tuple[ConformanceRun, list[Any]]]
) -> tuple[list[str], list[tuple[ConformanceRun, list[Any]]]]:
    """The matrix with the cases some adapter failed leftmost (most failures first, then the
    suite's order), so no failure waits off-screen; the adapters that failed something on top."""

    def failed(res: Any) -> bool:
        return res is not None and not res.passed

    fails = [sum(failed(cells[i]) for _, cells in rows) for i in range(len(cases))]
    order = sorted(range(len(cases)), key=lambda i: (-fails[i], i))
    moved = [(run, [cells[i] for i in order]) for run, cells in rows]
    moved.sort(key=lambda rc: not any(failed(res) for res in rc[1]))
    return [cases[i] for i in order], moved


@require_GET
@read_access
def conformance(request: HttpRequest) -> HttpResponse:
    cases, rows = failures_first(*_matrix())
    return render(
        request,
        "records/conformance/matrix.html",
        {
            "cases": cases,
            "rows": rows,
            "suites": ConformanceSuite.objects.all()[:20],
        },
    )


@require_GET
@read_access
def conformance_export(request: HttpRequest, fmt: str) -> HttpResponse:
    cases, rows = _matrix()
    out = []
    for run, cells in rows:
        for case, res in zip(cases, cells, strict=True):
            out.append(
                {
                    "adapter": run.adapter,
                    "adapter_version": run.adapter_version,
                    "commit": run.commit,
                    "ran_at": run.ran_at.isoformat(),
                    "run": run.pk,
                    "aborted": run.aborted,
                    "case": case,
                    "status": "aborted"
                    if run.aborted
                    else ("not run" if res is None else ("pass" if res.passed else "fail")),
                    "failures": " | ".join(res.failures)
                    if res and fmt == "csv"
                    else (res.failures if res else []),
                }
            )
    return export(fmt, "conformance-matrix", out)


@require_GET
@read_access
def conformance_failures(request: HttpRequest) -> HttpResponse:

    groups: dict[str, list[tuple[ConformanceRun, ConformanceResult, str]]] = {}
    for run in _latest_runs():
        for res in run.results.filter(passed=False):
            for text in res.failures:
                groups.setdefault(template_of(text), []).append((run, res, text))
    ordered = sorted(groups.items(), key=lambda kv: (-len({r.adapter for r, _, _ in kv[1]}), kv[0]))
    return render(request, "records/conformance/failures.html", {"groups": ordered})


@require_GET
@read_access
def conformance_adapter(request: HttpRequest) -> HttpResponse:
    name = request.GET.get("name", "")
    runs = list(
        ConformanceRun.objects.filter(adapter=name)
        .select_related("suite")
        .order_by("ran_at", "id")[:200]
    )
    if not runs:
        raise Http404("no run of that adapter")
    by_run: dict[int, dict[str, ConformanceResult]] = {r.pk: {} for r in runs}
    for res in ConformanceResult.objects.filter(run__in=runs):
        by_run[res.run_id][res.case] = res
    cases: list[str] = []
    for run in runs:
        for c in by_run[run.pk]:
            if c not in cases:
                cases.append(c)
    # Which rule broke when, and which commit fixed it: transitions between completed runs.
    events = []
    previous: dict[str, bool] = {}
    for run in runs:
        if run.aborted:
            continue
        for case, res in by_run[run.pk].items():
            before = previous.get(case)
            if before is True and not res.passed:
                events.append(("broke", case, run, res))
            elif before is False and res.passed:
                events.append(("fixed", case, run, res))
            previous[case] = res.passed
    rows = [(c, [by_run[r.pk].get(c) for r in runs]) for c in cases]
    return render(
        request,
        "records/conformance/adapter.html",
        {
            "name": name,
            "runs": runs,
            "rows": rows,
            "events": list(reversed(events)),
        },
    )


@require_GET
@read_access
def conformance_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(ConformanceRun.objects.select_related("suite", "upload"), pk=pk)
    return render(
        request, "records/conformance/run.html", {"run": run, "results": list(run.results.all())}
    )


@require_GET
@read_access
def conformance_suite(request: HttpRequest, pk: int) -> HttpResponse:
    suite = get_object_or_404(ConformanceSuite, pk=pk)
    case = request.GET.get("case")
    chosen = next((c for c in suite.cases if c.get("name") == case), None) if case else None
    if case and chosen is None:
        raise Http404("no such case in this suite")
    return render(
        request,
        "records/conformance/suite.html",
        {
            "suite": suite,
            "ambiguities": ambiguities(suite.cases),
            "chosen": chosen,
            "chosen_json": {
                k: pretty_json(v) for k, v in (chosen or {}).items() if k not in ("name", "rule")
            },
        },
    )


@token_upload
def api_conformance(request: HttpRequest, token: ApiToken) -> HttpResponse:
    return _conformance_post(request, Upload.objects.create(source=Upload.Source.API, token=token))


def _conformance_post(request: HttpRequest, upload: Upload) -> HttpResponse:

    f = request.FILES.get("output")
    data = f.read() if f else b""
    name = f.name if f else "(no output)"
    try:
        out = store_run(data, name, RunMeta.from_strings(name, request.POST.dict()), upload)
    except ConformanceError as exc:
        upload.summary = {"refused": [exc.as_dict()]}
        upload.save(update_fields=["summary"])
        return JsonResponse({"refused": [exc.as_dict()]}, status=422)
    upload.summary = {"conformance_runs": [out]}
    upload.save(update_fields=["summary"])
    return JsonResponse(out, status=200)


@accepts_uploads
@require_POST
@login_required
@permission_required("records.add_upload", raise_exception=True)
def upload_conformance(request: HttpRequest) -> HttpResponse:
    response = _conformance_post(
        request, Upload.objects.create(source=Upload.Source.WEB, user=request.user)
    )
    if response.status_code == 200:
        return redirect("records:conformance-run", pk=_json.loads(response.content)["run"])
    # Refused: the upload page again, the refusal beside the form that sent it.
    context = upload_page_context(request)
    context["recent"] = recent_uploads()
    context["conformance_refused"] = _json.loads(response.content)["refused"]
    return render(request, "records/uploads/upload.html", context, status=response.status_code)
