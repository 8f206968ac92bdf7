"""The search across runs (`/search/`), its JSON and CSV answers: parse the query with a form,
ask `records.queries.search`, render."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.urls import reverse
from django.views.decorators.http import require_GET

from records.formats.shard import ENDINGS, TURN_STATUSES
from records.queries.search import (
    ATTEMPT_COLUMNS,
    CALL_COLUMNS,
    SORTS,
    Search,
    SearchQuery,
    attempt_identity,
)
from records.scorer.score import OUTCOMES
from records.scoring.vocabulary import TITLED_COLUMNS
from records.search import snippets
from records.views.access import query_form, read_access, render_page
from records.views.exports import export_groups
from records.views.forms import WholeNumberField, page_field

YES_NO = [("", "either"), ("yes", "yes"), ("no", "no")]
PER_PAGE = 25
JSON_PER_PAGE = 100
MAX_PER_PAGE = 500
# The parameters (every value of every one) a search takes: each filter is shown with a link
# that removes it, which repeats the others, so the page grows with their square.
MAX_FILTERS = 40

# A facet's name and the parameter a click on one of its values sets.
FACETS = [
    ("run", "Run", "run"),
    ("model", "Model", "model"),
    ("surface", "Surface", "surface"),
    ("case", "Case", "case"),
    ("tool", "Tool", "tool"),
    ("requested", "Requested action", "action"),
    ("dispatched", "Dispatched action", "action"),
    ("outcome", "Call outcome", "outcome"),
    ("ended_by", "Ended by", "ended_by"),
    ("verdict", "Verdict", "verdict"),
    ("label", "Label", "label"),
]


class RunsField(forms.Field):
    """`run`, repeatable: run_ids exactly."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        values = value if isinstance(value, list) else [value] if value else []
        for v in values:
            if len(v) > 200:
                raise forms.ValidationError("a run_id is at most 200 characters")
        return [v for v in values if v]


def _yes_no(value: str) -> bool | None:
    return {"yes": True, "no": False}.get(value)


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=500, label="Words")
    run = RunsField(required=False)
    digest = forms.CharField(required=False, max_length=64, label="Corpus digest")
    commit = forms.CharField(required=False, max_length=100)
    model = forms.CharField(required=False, max_length=300)
    surface = forms.CharField(required=False, max_length=100)
    case = forms.CharField(required=False, max_length=100)
    ended_by = forms.ChoiceField(
        required=False, choices=[("", "any ending"), *((e, e) for e in ENDINGS)]
    )
    verdict = forms.ChoiceField(
        required=False, choices=[("", "any verdict"), *((o, o) for o in OUTCOMES)]
    )
    tool = forms.CharField(required=False, max_length=200)
    action = forms.CharField(required=False, max_length=200)
    outcome = forms.CharField(required=False, max_length=200, label="Call outcome")
    observed = forms.ChoiceField(required=False, choices=YES_NO)
    truncated = forms.ChoiceField(required=False, choices=[("", "either"), ("yes", "yes")])
    turn_status = forms.ChoiceField(
        required=False, choices=[("", "any"), *((s, s) for s in TURN_STATUSES)]
    )
    verify = forms.ChoiceField(required=False, choices=[("", "any"), ("failed", "failed")])
    label = forms.SlugField(required=False, max_length=40)
    # A score cell's drill links: a row of the score table, a column's hits or misses (read
    # from each run's latest scoring); they have no control of their own.
    row = forms.CharField(required=False, max_length=2000, widget=forms.HiddenInput)
    column = forms.ChoiceField(
        required=False, choices=[("", ""), *TITLED_COLUMNS], widget=forms.HiddenInput
    )
    hit = forms.ChoiceField(
        required=False,
        choices=[("", ""), ("yes", "behind the numerator"), ("no", "missed")],
        widget=forms.HiddenInput,
    )
    # A count over a row's counted attempts (the overhead cell's calls): those attempts only.
    counted = forms.ChoiceField(required=False, choices=YES_NO, widget=forms.HiddenInput)
    # A failure mode's link: its attempts (`records.queries.failures.search_link`).
    failure = forms.RegexField(
        regex=r"^[0-9a-f]{16}$", required=False, max_length=16, widget=forms.HiddenInput
    )
    sort = forms.ChoiceField(
        required=False,
        choices=[("", ""), *((s, s) for key in SORTS for s in (key, f"-{key}"))],
        widget=forms.HiddenInput,
    )
    page = page_field(widget=forms.HiddenInput)
    per_page = WholeNumberField(
        required=False, min_value=1, max_value=MAX_PER_PAGE, widget=forms.HiddenInput
    )

    def __init__(self, data: QueryDict, *, fixed: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.fixed = fixed  # parameters the page sets itself (a run's tab: run)
        if data is not None:
            self.data = data.copy()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        unknown = sorted(set(self.data) - set(self.fields) - set(self.fixed))
        for name in unknown:
            self.add_error(None, f"unknown parameter '{name}'")
        given = sum(len(self.data.getlist(name)) for name in self.data)
        if given > MAX_FILTERS:
            self.add_error(
                None,
                f"a search takes at most {MAX_FILTERS} parameters (MAX_FILTERS); {given} given",
            )
        return data

    def query(self) -> SearchQuery:
        d = self.cleaned_data
        return SearchQuery(
            runs=d.get("run") or [],
            digest=d.get("digest") or "",
            commit=d.get("commit") or "",
            model=d["model"],
            surface=d["surface"],
            case=d["case"],
            ended_by=d["ended_by"],
            verdict=d[self.VERDICT],
            clean=_yes_no(d["clean"]),
            tool=d["tool"],
            action=d["action"],
            outcome=d[self.CALL_OUTCOME],
            observed=_yes_no(d["observed"]),
            truncated=d["truncated"] == "yes",
            turn_status=d["turn_status"],
            verify_failed=d["verify"] == "failed",
            row=d["row"],
            column=d["column"],
            hit=_yes_no(d["hit"]),
            counted=_yes_no(d["counted"]),
            failure=d.get("failure") or "",
            sort=d["sort"],
            q=d["q"],
            label=d["label"],
        )

    # The parameters naming a verdict's outcome and a call's.
    VERDICT = "verdict"
    CALL_OUTCOME = "outcome"

    @property
    def drilled(self) -> str:
        """The score conditions a drill link set, in words (they have no control of their own)."""
        d = self.cleaned_data
        parts = []
        if d.get("row"):
            parts.append(f"row {d['row']}")
        if d.get("column") and d.get("hit"):
            title = dict(TITLED_COLUMNS)[d["column"]]
            parts.append(
                f"behind the {title} numerator" if d["hit"] == "yes" else f"that missed {title}"
            )
        if d.get("counted"):
            parts.append("counted" if d["counted"] == "yes" else "counted apart")
        return "; ".join(parts)

    @property
    def narrowed(self) -> list[tuple[str, str, str]]:
        """The conditions set, each as (parameter, value, the address without it)."""
        # Each parameter is encoded once; each link joins the others (at most MAX_FILTERS).
        pairs = [(n, v) for n in self.data if n != "page" for v in self.data.getlist(n)]
        encoded = [urlencode([pair]) for pair in pairs]
        out = []
        for name in self.fields:
            if name in ("page", "per_page", "sort", "row", "column", "hit", "counted"):
                continue
            for value in self.data.getlist(name):
                if value:
                    kept = zip(encoded, pairs, strict=True)
                    rest = "&".join(e for e, pair in kept if pair != (name, value))
                    out.append((name, value, rest))
        return out


# `clean` names a parameter and the form's own method: the field is declared beside the class.
SearchForm.base_fields["clean"] = forms.ChoiceField(required=False, choices=YES_NO)


class RunSearchForm(SearchForm):
    """The search narrowed to one run (its Attempts tab, its export, an attempt's neighbours).
    There `outcome` names the verdict's outcome, as a run's pages have always linked it, and
    `call_outcome` the call's; the run is the page's own, not a parameter."""

    VERDICT = "outcome"
    CALL_OUTCOME = "call_outcome"

    def __init__(self, data: QueryDict, run_pk: int, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.run_pk = run_pk
        for name in ("run", "digest", "commit"):
            del self.fields[name]
        self.fields["call_outcome"] = self.fields["outcome"]
        self.fields["call_outcome"].label = "Call outcome"
        self.fields["outcome"] = self.fields.pop("verdict")
        self.fields["outcome"].label = "Verdict"

    def query(self) -> SearchQuery:
        query = super().query()
        query.run_pk = self.run_pk
        return query


def _parse(request: HttpRequest) -> SearchForm:
    form = SearchForm(request.GET)
    form.is_valid()
    return form


def facet_links(
    data: QueryDict, facets: dict[str, dict[str, int]], form: SearchForm | None = None
) -> list[dict[str, Any]]:
    """Each facet's values with their counts and the address a click goes to (the query with
    that value set, back to its first page), and whether that value is set already."""
    out = []
    names = {"verdict": form.VERDICT, "outcome": form.CALL_OUTCOME} if form else {}
    for key, title, param in FACETS:
        param = names.get(param, param)
        if form is not None and param not in form.fields:
            continue
        values = []
        for value, count in facets.get(key, {}).items():
            query = data.copy()
            query.setlist(param, [value])
            query.pop("page", None)
            values.append(
                {
                    "value": value,
                    "count": count,
                    "query": query.urlencode(),
                    "active": value in data.getlist(param),
                }
            )
        out.append({"key": key, "title": title, "param": param, "values": values})
    return out


@require_GET
@read_access
@query_form(SearchForm)
def search(request: HttpRequest, form: SearchForm) -> HttpResponse:
    context = results_context(form, request.GET, PER_PAGE)
    context["search_url"] = reverse("records:search")
    return render_page(request, "records/search/page.html", context, partial="results")


def results_context(
    form: SearchForm, data: QueryDict, per_page: int, known_count: int | None = None
) -> dict[str, Any]:
    """What the results show: a page of attempts with their matching calls, the counts and
    the facets (also a run's Attempts tab, whose stored size is `known_count`)."""
    per_page = form.cleaned_data.get("per_page") or per_page
    asked = form.cleaned_data.get("page") or 1
    found = Search(form.query(), window=(asked, per_page))
    count = found.count(known_count)
    paginator = Paginator(range(count), per_page)
    page = paginator.get_page(asked)  # past the last page: the last (outside the window)
    query = data.copy()
    query.pop("page", None)
    return {
        "form": form,
        "page": page,
        "count": count,
        "call_count": found.call_count(),
        "attempts": found.page(page.number, paginator.per_page),
        "facets": facet_links(data, found.facets(), form),
        "words": found.words,
        "query": query.urlencode(),
        "search": found,
        "indexing": found.indexing(),
    }


def _json_error(form: SearchForm) -> JsonResponse:
    fields = {name: " ".join(msgs) for name, msgs in form.errors.items()}
    message = "; ".join(f"{n}: {m}" if n != "__all__" else m for n, m in fields.items())
    return JsonResponse({"error": f"Invalid query: {message}", "fields": fields}, status=400)


@require_GET
@read_access
def search_json(request: HttpRequest) -> HttpResponse:
    form = _parse(request)
    if form.errors:
        return _json_error(form)
    number = form.cleaned_data.get("page") or 1
    per_page = form.cleaned_data.get("per_page") or JSON_PER_PAGE
    found = Search(form.query(), window=(number, per_page))
    count = found.count()
    attempts = found.page(number, per_page)
    following = None
    if number * per_page < count:
        query = request.GET.copy()
        query["page"] = str(number + 1)
        following = request.build_absolute_uri(
            f"{reverse('records:search-json')}?{query.urlencode()}"
        )
    return JsonResponse(
        {
            "count": count,
            "calls": found.call_count(),
            "attempts": [
                {
                    **attempt_identity(a),
                    "url": request.build_absolute_uri(reverse("records:attempt", args=[a.pk])),
                    "calls": [c.index for c in a.matched],
                    "labels": a.labels,
                }
                for a in attempts
            ],
            "facets": found.facets(),
            "indexing": found.indexing(),
            "next": following,
        }
    )


@require_GET
@read_access
@query_form(SearchForm)
def search_csv(request: HttpRequest, form: SearchForm) -> HttpResponse:
    found = Search(form.query())
    # Each call's snippet is found here and folded by the export's writer (`snippets.folded`).
    groups = found.groups(stretches=True)
    return export_groups("search", ATTEMPT_COLUMNS, CALL_COLUMNS, groups, last=snippets.folded)
