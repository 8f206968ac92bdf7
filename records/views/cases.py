"""A corpus's cases across runs, one case's timelines, and their JSON export."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import get_template
from django.views.decorators.http import require_GET

from records.queries import cases as q
from records.queries.annotations import About, case_labels, label_facet
from records.views.access import query_form, read_access
from records.views.annotations import annotation_panel
from records.views.exports import export
from records.views.forms import SURFACE_CHOICES, page_field

CASES_PER_PAGE = 100


class CasesForm(forms.Form):
    """Which runs and rows the case pages cover, and the corpus page's order and flag."""

    digest = forms.RegexField(regex=r"^[0-9a-f]{1,64}$", required=False, max_length=64)
    since = forms.DateField(required=False)
    until = forms.DateField(required=False)
    commit = forms.RegexField(regex=r"^[0-9a-fA-F]{1,40}$", required=False, max_length=40)
    model = forms.CharField(required=False, max_length=500)
    surface = forms.ChoiceField(required=False, choices=[("", "any"), *SURFACE_CHOICES])
    flag = forms.ChoiceField(required=False, choices=[("", "any"), *((f, f) for f in q.FLAGS)])
    label = forms.SlugField(required=False, max_length=40)
    sort = forms.ChoiceField(
        required=False,
        choices=[("", "")] + [(f"{s}{k}", f"{s}{k}") for k in q.SORTS for s in ("", "-")],
    )
    page = page_field()

    def choice(self) -> q.Choice | None:
        d = self.cleaned_data
        digest = d.get("digest") or q.newest_digest()
        if not digest:
            return None
        return q.Choice(
            digest,
            d.get("since"),
            d.get("until"),
            (d.get("commit") or "").lower(),
            d.get("model") or "",
            d.get("surface") or "",
        )


class CaseForm(CasesForm):
    case = forms.CharField(max_length=500)


@require_GET
@read_access
@query_form(CasesForm)
def cases(request: HttpRequest, form: CasesForm) -> HttpResponse:
    choice = form.choice()
    context: dict[str, Any] = {"form": form, "choice": choice, "flags": q.FLAGS}
    if choice is not None:
        corpus = q.corpus(choice)
        labelled = case_labels(choice.digest)
        shown = labelled_only(corpus.cases, labelled, form.cleaned_data.get("label") or "")
        flag = form.cleaned_data.get("flag")
        if flag:
            shown = [c for c in shown if getattr(c, flag)]
        shown = q.sorted_cases(shown, form.cleaned_data.get("sort") or "")
        page = Paginator(shown, CASES_PER_PAGE).get_page(form.cleaned_data.get("page") or 1)
        context.update(
            corpus=corpus,
            page=page,
            lines=[(c, links(corpus, c)) for c in page.object_list],
            labelled=labelled,
            label_counts=label_facet(labelled, (c.case for c in corpus.cases)),
            health=q.health(corpus),
            flag_counts=[(f, f.replace("_", " "), corpus.count(f)) for f in q.FLAGS],
        )
    return render(request, "records/cases/corpus.html", context)


def labelled_only(cases: list[q.CaseLine], labelled: dict[str, list[str]], label: str):
    """The cases carrying `label` unresolved (every case when no label is asked)."""
    return [c for c in cases if label in labelled.get(c.case, ())] if label else cases


def links(corpus: q.Corpus, line: q.CaseLine) -> dict[str, str]:
    """The searches for the attempts behind a case's figures."""
    find = q.search_link
    return {
        "attempts": find(corpus.choice, corpus.runs, case=line.case),
        "clean": find(corpus.choice, corpus.runs, case=line.case, clean="yes"),
        "unclean": find(corpus.choice, corpus.runs, case=line.case, clean="no"),
    }


def labelled_corpus(form: CasesForm) -> tuple[dict, str]:
    """The corpus page's export (`/cases.json`'s answer) with each case's labels and the label
    facet, only the cases carrying `label=` when it is set."""
    choice = form.choice()
    assert choice is not None
    corpus = q.corpus(choice)
    labelled = case_labels(choice.digest)
    label = form.cleaned_data.get("label") or ""
    data = q.as_json(corpus)
    if label:
        kept = {c.case for c in labelled_only(corpus.cases, labelled, label)}
        data["cases"] = [c for c in data["cases"] if c["case"] in kept]
    for c in data["cases"]:
        c["labels"] = labelled.get(c["case"], [])
    data["facets"] = {"label": label_facet(labelled, (c.case for c in corpus.cases))}
    return data, label


@require_GET
@read_access
def cases_json(request: HttpRequest) -> HttpResponse:
    """The corpus page as JSON; an invalid query is answered in JSON too, naming each field."""
    form = CasesForm(request.GET)
    if not form.is_valid():
        errors = {name: " ".join(msgs) for name, msgs in form.errors.items()}
        return JsonResponse({"error": "invalid query", "fields": errors}, status=400)
    if form.choice() is None:
        return JsonResponse({"error": "no corpus key is stored: name a digest"}, status=404)
    return JsonResponse(labelled_corpus(form)[0])


# The CSV's columns: a case's figures over the runs chosen, as `/cases.json` names them.
CSV_COLUMNS = (
    "case",
    "steps",
    "attempts",
    "difficulty",
    "discrimination",
    "flaky",
    "flipped",
    "never_passed",
    "always_passed",
)


@require_GET
@read_access
@query_form(CasesForm)
def cases_csv(request: HttpRequest, form: CasesForm) -> HttpResponse:
    """The corpus page's cases as CSV, a row a case, with their labels (space-separated)."""
    if form.choice() is None:
        raise Http404("no corpus key is stored")
    data, _ = labelled_corpus(form)
    rows = (
        {
            **{k: c[k] for k in CSV_COLUMNS[:3]},
            "clean": c["clean"][0],
            "counted": c["clean"][1],
            **{k: c[k] for k in CSV_COLUMNS[3:]},
            "labels": " ".join(c["labels"]),
        }
        for c in data["cases"]
    )
    return export("csv", "cases", rows)


@require_GET
@read_access
@query_form(CaseForm)
def case_page(request: HttpRequest, form: CaseForm) -> HttpResponse:
    choice = form.choice()
    if choice is None:
        raise Http404("no corpus key is stored")
    corpus, line = q.one_case(choice, form.cleaned_data["case"])
    if line is None:
        raise Http404("the corpus has no such case")
    rows = TimelineRows()
    timelines = [
        (
            m,
            timeline_chart(m),
            f"timeline-{n}",
            q.search_link(choice, corpus.runs, case=line.case, model=m.model, surface=m.surface),
            rows.of(m),
        )
        for n, m in enumerate(line.by_model)
    ]
    return render(
        request,
        "records/cases/case.html",
        {
            "form": form,
            "choice": choice,
            "corpus": corpus,
            "line": line,
            "timelines": timelines,
            "links": links(corpus, line),
            "annotations": annotation_panel(request, About("case", choice.digest, line.case)),
        },
    )


class TimelineRows:
    """The rows of a case's timelines: each point, whether it is its line's first flip, its
    run's cells and its repeats. A case's page shows every run once per model and surface and
    the same few strings of marks over and over, so each run's cells and each string of
    marks are rendered once, from their templates."""

    def __init__(self) -> None:
        self.run_cells = get_template("records/cases/_run_cells.html")
        self.repeats = get_template("records/cases/_repeats.html")
        self.runs: dict[tuple[int, bool], str] = {}
        self.marks: dict[str, str] = {}

    def of(self, m: q.ModelLine) -> list[tuple[q.Point, bool, str, str]]:
        flip_at = m.flip_at
        return [(p, p is flip_at, *self.cells(p, p is flip_at)) for p in m.timeline]

    def cells(self, p: q.Point, flip: bool) -> tuple[str, str]:
        run = (p.run.pk, flip)
        if run not in self.runs:
            self.runs[run] = self.run_cells.render({"run": p.run, "flip": flip})
        if p.marks not in self.marks:
            self.marks[p.marks] = self.repeats.render({"repeats": p.repeats})
        return self.runs[run], self.marks[p.marks]


def timeline_chart(m: q.ModelLine) -> dict[str, Any]:
    """A model's Clean rate on a case over runs (x: run date, with its commit), with each run's
    95% interval as error bars and the first flip marked."""
    points = [p for p in m.timeline if p.clean[1]]
    xs = [p.run.started_at.isoformat() if p.run.started_at else p.run.run_id for p in points]
    ys = [round(100 * p.clean[0] / p.clean[1], 2) for p in points]
    lows = [y - 100 * p.interval.low for y, p in zip(ys, points, strict=True)]
    highs = [100 * p.interval.high - y for y, p in zip(ys, points, strict=True)]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Clean",
            "x": xs,
            "y": ys,
            "error_y": {"type": "data", "array": highs, "arrayminus": lows, "thickness": 1},
            "customdata": [
                [p.run.run_id, p.run.commit[:12] or "-", p.clean[0], p.clean[1], p.marks]
                for p in points
            ],
            "hovertemplate": "%{customdata[0]} (commit %{customdata[1]})<br>"
            "Clean %{customdata[2]} / %{customdata[3]}<br>repeats %{customdata[4]}"
            "<extra></extra>",
        }
    ]
    if m.flip_at is not None and m.flip_at in points:
        i = points.index(m.flip_at)
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "first flip",
                "x": [xs[i]],
                "y": [ys[i]],
                "marker": {"size": 14, "symbol": "diamond-open", "color": "#dc2626"},
                "hoverinfo": "skip",
            }
        )
    return {
        "data": data,
        "layout": {
            "height": 240,
            "margin": {"l": 48, "r": 12, "t": 8, "b": 40},
            "yaxis": {"title": {"text": "Clean %"}, "range": [-5, 105]},
            "showlegend": False,
        },
    }
