"""Failure modes across runs (`/failures/`), one mode's page, and their JSON and CSV answers."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import batched
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from records.models import FailureMode
from records.queries import failures as q
from records.queries.annotations import About, labels, mode_labels
from records.scorer.score import SIGNATURE_PARTS
from records.views.access import query_form, read_access, render_page
from records.views.annotations import annotation_panel
from records.views.charts import escaped
from records.views.exports import export
from records.views.forms import SURFACE_CHOICES, page_field
from records.views.search import RunsField

TREND_HEIGHT = 56


class FailuresForm(forms.Form):
    """Which runs and attempts the failure pages cover, and the page of the list."""

    digest = forms.RegexField(regex=r"^[0-9a-f]{1,64}$", required=False, max_length=64)
    run = RunsField(required=False)
    model = forms.CharField(required=False, max_length=500)
    surface = forms.ChoiceField(required=False, choices=[("", "any"), *SURFACE_CHOICES])
    case = forms.CharField(required=False, max_length=500)
    since = forms.DateField(required=False)
    label = forms.SlugField(required=False, max_length=50)
    page = page_field()

    def chosen(self) -> q.Chosen:
        d = self.cleaned_data
        return q.choose(
            q.FailureFilter(
                d.get("digest") or "",
                tuple(d.get("run") or ()),
                d.get("model") or "",
                d.get("surface") or "",
                d.get("case") or "",
                d.get("since"),
                d.get("label") or "",
            )
        )


def trend_chart(mode: q.Mode, height: int = TREND_HEIGHT) -> dict[str, Any]:
    """A mode's attempts in each run chosen, oldest first: a small bar chart, the newest run's
    bar marked when the mode is new there."""
    runs = [run for run, _ in mode.per_run]
    colours = ["#6b7280"] * len(runs)
    if mode.new and colours:
        colours[-1] = "#dc2626"
    return {
        "data": [
            {
                "type": "bar",
                "x": [run.run_id for run in runs],
                "y": [n for _, n in mode.per_run],
                "marker": {"color": colours},
                "hovertemplate": "%{x}: %{y} attempts<extra></extra>",
            }
        ],
        "layout": {
            "height": height,
            "margin": {"l": 2, "r": 2, "t": 2, "b": 2},
            "xaxis": {"visible": False, "type": "category"},
            "yaxis": {"visible": False, "rangemode": "tozero"},
            "showlegend": False,
            "bargap": 0.15,
        },
    }


def _lines(found: q.Modes) -> list[tuple[q.Mode, dict[str, Any], str, str, str, list[str]]]:
    """Each mode of the page with its trend, the trend's element id, its page, its search and
    the labels it carries."""
    chosen = found.chosen
    labelled = mode_labels(m.id for m in found.page.object_list)
    return [
        (
            m,
            escaped(trend_chart(m)),
            f"trend-{m.id}",
            q.mode_url(chosen, m.id),
            q.search_link(chosen, m.id),
            labelled.get(m.id, []),
        )
        for m in found.page.object_list
    ]


@require_GET
@read_access
@query_form(FailuresForm)
def failures(request: HttpRequest, form: FailuresForm) -> HttpResponse:
    chosen = form.chosen()
    found = q.modes(chosen, form.cleaned_data.get("page") or 1)
    return render_page(
        request,
        "records/failures/list.html",
        {
            "form": form,
            "chosen": chosen,
            "found": found,
            "page": found.page,
            "lines": _lines(found),
            "parts": SIGNATURE_PARTS,
            "vocabulary": labels(),
        },
        partial="records/failures/_modes.html",
    )


@require_GET
@read_access
def failures_json(request: HttpRequest) -> HttpResponse:
    """The failures list as JSON, a page of modes at a time (`next` the following page's
    address); an invalid query is answered in JSON too, naming each field."""
    form = FailuresForm(request.GET)
    if not form.is_valid():
        errors = {name: " ".join(msgs) for name, msgs in form.errors.items()}
        return JsonResponse({"error": "invalid query", "fields": errors}, status=400)
    chosen = form.chosen()
    found = q.modes(chosen, form.cleaned_data.get("page") or 1)
    next_url = None
    if found.page.has_next():
        query = chosen.filter.query(page=found.page.next_page_number())
        next_url = reverse("records:failures-json") + "?" + urlencode(query)
    return JsonResponse(q.as_json(found, next_url))


@require_GET
@read_access
@query_form(FailuresForm)
def failures_csv(request: HttpRequest, form: FailuresForm) -> HttpResponse:
    """Every mode of the filter as CSV, streamed: a line per mode."""
    chosen = form.chosen()

    def rows() -> Iterator[dict[str, Any]]:
        for shown in batched(q.every_mode(chosen), 500):
            labels = mode_labels([m.id for m in shown])
            for m in shown:
                yield _csv_line(m, labels.get(m.id, []))

    return export("csv", "failure-modes", rows())


def _csv_line(m: q.Mode, labels: list[str]) -> dict[str, Any]:
    return {
        "id": m.id,
        **{part: m.signature.get(part) or "" for part in SIGNATURE_PARTS},
        "attempts": m.attempts,
        "cases": " ".join(case for case, _ in m.cases),
        "models": " ".join(f"{k}={v}" for k, v in m.models.items()),
        "surfaces": " ".join(f"{k}={v}" for k, v in m.surfaces.items()),
        "runs": len(m.seen),
        "first_run": m.first_run.run_id,
        "last_run": m.last_run.run_id,
        "new": "yes" if m.new else "no",
        "labels": " ".join(labels),
    }


@require_GET
@read_access
@query_form(FailuresForm)
def failure_mode(request: HttpRequest, mode_id: str, form: FailuresForm) -> HttpResponse:
    stored = get_object_or_404(FailureMode, pk=mode_id)
    chosen = form.chosen()
    mode = q.one_mode(chosen, mode_id)  # None: no attempt of the filter failed in it
    page = Paginator(q.mode_attempts(chosen, mode_id), q.ATTEMPTS_PER_PAGE).get_page(
        form.cleaned_data.get("page") or 1
    )
    return render_page(
        request,
        "records/failures/mode.html",
        {
            "form": form,
            "chosen": chosen,
            "stored": stored,
            "mode": mode,
            "signature": [(part, stored.signature.get(part)) for part in SIGNATURE_PARTS],
            "page": page,
            "search_url": q.search_link(chosen, mode_id),
            "list_url": reverse("records:failures") + _query(chosen),
            "trend": escaped_trend(mode),
            "annotations": annotation_panel(request, About("mode", mode=mode_id)),
        },
        partial="records/failures/_attempts.html",
    )


def escaped_trend(mode: q.Mode | None) -> dict[str, Any] | None:
    return escaped(trend_chart(mode, 120)) if mode is not None else None


def _query(chosen: q.Chosen) -> str:
    query = chosen.filter.query()
    return "?" + urlencode(query) if query else ""
