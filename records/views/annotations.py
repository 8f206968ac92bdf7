"""Labels and notes: the panel a case, attempt or failure-mode page includes (and the forms it
posts, answered in place for htmx and by a redirect without it), the review queue, and the
annotations API (`/api/v1/annotations`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from records.formats.numbers import NotWhole, parse_whole
from records.models import Annotation, Attempt, Label
from records.models.annotations import MODE_ID, WEB_LINK
from records.queries import annotations as q
from records.views.access import api_token_of, is_partial, query_form, read_access, render_page
from records.views.forms import WholeNumberField, page_field

PANEL = "records/annotations/_panel.html"
WRITE = "records.add_annotation"
NOTE_CHARS = 10_000
REVIEW_PER_PAGE = 50
API_PER_PAGE = 100
MAX_PER_PAGE = 500


class LabelField(forms.CharField):
    """A label of the vocabulary, by its slug; empty: none."""

    def clean(self, value: Any) -> Label | None:
        slug = super().clean(value)
        if not slug:
            return None
        label = Label.objects.filter(slug=slug).first()
        if label is None:
            known = ", ".join(Label.objects.values_list("slug", flat=True))
            raise forms.ValidationError(f"unknown label {slug!r}: use one of {known}")
        return label


class ContentForm(forms.Form):
    """What an annotation says: a label, a note in Markdown, a link (http or https)."""

    label = LabelField(required=False, max_length=40)
    note = forms.CharField(required=False, max_length=NOTE_CHARS, strip=False)
    link = forms.CharField(required=False, max_length=2000, validators=[WEB_LINK])

    def clean(self) -> dict[str, Any]:
        d = super().clean()
        if not self.errors and not d.get("label") and not (d.get("note") or "").strip():
            raise forms.ValidationError("give a label or a note")
        return d


class AnnotationForm(ContentForm):
    """A new annotation: its target and what it says; `client_key` makes a retry harmless."""

    target = forms.ChoiceField(choices=Annotation.Target.choices)
    digest = forms.RegexField(regex=r"^[0-9a-f]{1,64}\Z", required=False, max_length=64)
    case = forms.CharField(required=False, max_length=500)
    attempt = WholeNumberField(required=False, min_value=1)
    mode = forms.CharField(required=False, max_length=16, validators=[MODE_ID])
    client_key = forms.CharField(required=False, max_length=200)

    def clean(self) -> dict[str, Any]:
        d = super().clean()
        target = d.get("target")
        needs = {"case": ("digest", "case"), "attempt": ("attempt",), "mode": ("mode",)}
        for name in needs.get(target or "", ()):
            if not d.get(name) and name not in self.errors:
                self.add_error(name, f"a {target} annotation names its {name}")
        if target == "attempt" and d.get("attempt"):
            if not Attempt.objects.filter(pk=d["attempt"]).exists():
                self.add_error("attempt", f"no attempt {d['attempt']}")
        return d

    def about(self) -> q.About:
        d = self.cleaned_data
        target = d["target"]
        return q.About(
            target,
            digest=(d.get("digest") or "") if target == "case" else "",
            case=(d.get("case") or "") if target == "case" else "",
            attempt=d.get("attempt") if target == "attempt" else None,
            mode=(d.get("mode") or "") if target == "mode" else "",
        )


def annotation_panel(request: HttpRequest, about: q.About) -> dict[str, Any]:
    """What `records/annotations/_panel.html` shows for a target: its annotations (newest
    first, each with its note rendered and its history), the vocabulary, and whether the
    reader may write. A page includes it with one line:
    `{% include "records/annotations/_panel.html" with panel=annotations %}`."""
    can_write = request.user.has_perm(WRITE)
    return {
        "about": about,
        "annotations": list(q.on(about)),
        "labels": q.labels() if can_write else [],  # for the forms, which only writers see
        "can_write": can_write,
        "next": request.get_full_path(),
    }


def _written(request: HttpRequest, about: q.About, status: int = 200, **extra: Any) -> HttpResponse:
    """The answer to a form of the panel: the panel again, in place, for htmx; otherwise back
    to the page it was posted from (or the target's page)."""
    if is_partial(request) or status != 200:
        context = {"panel": {**annotation_panel(request, about), **extra}}
        nxt = request.POST.get("next", "")
        if url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
            context["panel"]["next"] = nxt
        template = PANEL if is_partial(request) else "records/annotations/refused.html"
        return render_page(request, template, context, status=status)
    nxt = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        return redirect(nxt)
    return redirect(q.evidence_url(Annotation(**about.fields())))


def _refused(request: HttpRequest) -> int:
    """A refused form's status: 400, or for htmx 422, which the page's script swaps in (the
    panel then says what was wrong beside the form)."""
    return 422 if is_partial(request) else 400


def may_write(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A form of the panel: a POST by an account holding `records.add_annotation`; anyone else
    is refused (403) before the view runs."""

    @require_POST
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(WRITE):
            return render_page(
                request,
                "403.html",
                {"message": "Writing labels and notes needs the add annotation permission."},
                status=403,
            )
        return view(request, *args, **kwargs)

    return wrapper


def _about_of(a: Annotation) -> q.About:
    return q.About(a.target, a.digest, a.case, a.attempt_id, a.mode)


def _whole_or_none(raw: str) -> int | None:
    """A refused form's attempt, for the panel it comes back in: the number if it is one."""
    try:
        return parse_whole(raw)
    except NotWhole:
        return None


@may_write
def annotate(request: HttpRequest) -> HttpResponse:
    form = AnnotationForm(request.POST)
    if not form.is_valid():
        about = q.About(
            request.POST.get("target", "case"),
            request.POST.get("digest", ""),
            request.POST.get("case", ""),
            _whole_or_none(request.POST.get("attempt", "")),
            request.POST.get("mode", ""),
        )
        return _written(request, about, status=_refused(request), form=form)
    d = form.cleaned_data
    q.write(
        form.about(),
        q.Writer.of_user(request.user),
        label=d["label"],
        note=d["note"],
        link=d["link"],
        client_key=d.get("client_key") or "",
    )
    return _written(request, form.about())


@may_write
def annotation_edit(request: HttpRequest, pk: int) -> HttpResponse:
    a = get_object_or_404(Annotation.objects.select_related("label"), pk=pk)
    form = ContentForm(request.POST)
    if not form.is_valid():
        return _written(request, _about_of(a), status=_refused(request), form=form, editing=a.pk)
    d = form.cleaned_data
    q.edit(a, q.Writer.of_user(request.user), label=d["label"], note=d["note"], link=d["link"])
    return _written(request, _about_of(a))


@may_write
def annotation_resolve(request: HttpRequest, pk: int) -> HttpResponse:
    a = get_object_or_404(Annotation.objects.select_related("label"), pk=pk)
    q.set_resolved(a, q.Writer.of_user(request.user), request.POST.get("resolved", "1") != "0")
    return _written(request, _about_of(a))


# --- the review queue --------------------------------------------------------------------------


class ReviewForm(forms.Form):
    digest = forms.RegexField(regex=r"^[0-9a-f]{1,64}\Z", required=False, max_length=64)
    page = page_field()


@require_GET
@read_access
@query_form(ReviewForm)
def review(request: HttpRequest, form: ReviewForm) -> HttpResponse:
    items = q.review_items(form.cleaned_data.get("digest") or "")
    page = Paginator(items, REVIEW_PER_PAGE).get_page(form.cleaned_data.get("page") or 1)
    labels = q.labels()
    return render_page(
        request,
        "records/annotations/review.html",
        {
            "form": form,
            "page": page,
            "count": len(items),
            "labels": labels,
            "keyed": [(n, label) for n, label in enumerate(labels[:9], start=1)],
            "can_write": request.user.has_perm(WRITE),
        },
    )


# --- the API -----------------------------------------------------------------------------------


def as_json(request: HttpRequest, a: Annotation) -> dict[str, Any]:
    """An annotation as the API answers it."""
    return {
        "id": a.pk,
        "target": a.target,
        "digest": a.digest or None,
        "case": a.case or None,
        "attempt": a.attempt_id,
        "mode": a.mode or None,
        "label": a.label.slug if a.label else None,
        "note": a.note,
        "link": a.link or None,
        "author": a.author,
        "created": a.created_at.isoformat(),
        "resolved": a.resolved,
        "url": request.build_absolute_uri(q.evidence_url(a)),
    }


def _fields(form: forms.Form) -> JsonResponse:
    fields = {name: " ".join(msgs) for name, msgs in form.errors.items()}
    message = "; ".join(f"{n}: {m}" if n != "__all__" else m for n, m in fields.items())
    return JsonResponse({"error": f"invalid annotation: {message}", "fields": fields}, status=400)


class ListForm(forms.Form):
    target = forms.ChoiceField(required=False, choices=[("", ""), *Annotation.Target.choices])
    digest = forms.RegexField(regex=r"^[0-9a-f]{1,64}\Z", required=False, max_length=64)
    case = forms.CharField(required=False, max_length=500)
    attempt = WholeNumberField(required=False, min_value=1)
    mode = forms.CharField(required=False, max_length=16, validators=[MODE_ID])
    label = forms.SlugField(required=False, max_length=40)
    resolved = forms.ChoiceField(required=False, choices=[("", ""), ("0", "0"), ("1", "1")])
    page = page_field()
    per_page = WholeNumberField(required=False, min_value=1, max_value=MAX_PER_PAGE)

    def clean(self) -> dict[str, Any]:
        d = super().clean()
        for name in sorted(set(self.data) - set(self.fields)):
            self.add_error(None, f"unknown parameter '{name}'")
        return d


@csrf_exempt
def api_annotations(request: HttpRequest) -> HttpResponse:
    """GET lists annotations (filters, paged); POST writes one (idempotent by client_key)."""
    if request.method not in ("GET", "POST"):
        return JsonResponse(
            {"error": "use GET or POST"}, status=405, headers={"Allow": "GET, POST"}
        )
    token, failure = api_token_of(request)
    if failure:
        return failure
    assert token is not None
    if request.method == "GET":
        return _api_list(request)
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        return JsonResponse({"error": f"the body is not JSON: {exc}"}, status=400)
    if not isinstance(body, dict):
        return JsonResponse({"error": "the body is a JSON object"}, status=400)
    known = set(AnnotationForm.base_fields)
    unknown = sorted(set(body) - known)
    if unknown:
        return JsonResponse(
            {
                "error": f"unknown field(s): {', '.join(unknown)}",
                "fields": dict.fromkeys(unknown, "unknown"),
            },
            status=400,
        )
    wrong = [
        k for k, v in body.items() if isinstance(v, bool) or not isinstance(v, str | int | None)
    ]
    if wrong:
        return JsonResponse(
            {
                "error": f"not a string: {', '.join(wrong)}",
                "fields": dict.fromkeys(wrong, "a string"),
            },
            status=400,
        )
    form = AnnotationForm({k: "" if v is None else str(v) for k, v in body.items()})
    if not form.is_valid():
        return _fields(form)
    d = form.cleaned_data
    a, created = q.write(
        form.about(),
        q.Writer.of_token(token),
        label=d["label"],
        note=d["note"],
        link=d["link"],
        client_key=d.get("client_key") or "",
    )
    return JsonResponse(as_json(request, a), status=201 if created else 200)


def _api_list(request: HttpRequest) -> HttpResponse:
    form = ListForm(request.GET)
    if not form.is_valid():
        return _fields(form)
    d = form.cleaned_data
    wanted = Annotation.objects.select_related("label")
    for name, lookup in (
        ("target", "target"),
        ("digest", "digest"),
        ("case", "case"),
        ("attempt", "attempt"),
        ("mode", "mode"),
        ("label", "label__slug"),
    ):
        if d.get(name):
            wanted = wanted.filter(**{lookup: d[name]})
    if d.get("resolved"):
        wanted = wanted.filter(resolved=d["resolved"] == "1")
    number = d.get("page") or 1
    per_page = d.get("per_page") or API_PER_PAGE
    count = wanted.count()
    shown = list(wanted.order_by("-created_at", "-id")[(number - 1) * per_page : number * per_page])
    following = None
    if number * per_page < count:
        query = request.GET.copy()
        query["page"] = str(number + 1)
        following = request.build_absolute_uri(
            f"{reverse('records:api-annotations')}?{query.urlencode()}"
        )
    return JsonResponse(
        {"count": count, "annotations": [as_json(request, a) for a in shown], "next": following}
    )
