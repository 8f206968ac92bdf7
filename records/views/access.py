"""Who may do what, decided in the view (never in a partial, which can be requested alone): a
login, a permission or an upload token; the htmx partial switch; and the small lookups every page
family shares."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import (
    HttpRequest,
    HttpResponse,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from records.models import (
    ApiToken,
    Attempt,
    Run,
)


def read_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Browsing needs a login unless the operator opened read access (EVALDASH_PUBLIC_READ)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if settings.EVALDASH_PUBLIC_READ or request.user.is_authenticated:
            return view(request, *args, **kwargs)
        return redirect_to_login(request.get_full_path())

    return wrapper


def query_form(
    form_class: type,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Read the page's state from the query string (POST body for a POST) into `form_class`:
    invalid input is a 400 naming the fields; the view gets the bound, valid form as `form`."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            form = form_class(request.POST if request.method == "POST" else request.GET)
            if not form.is_valid():
                return bad_request(form, request)
            return view(request, *args, form=form, **kwargs)

        return wrapper

    return decorate


def get_run_or_404(pk: int) -> Run:
    """The run with its shard and upload (every run page names them) and its outbox row, if
    its index is still being written (`records.search.index.indexing`), or a 404."""
    runs = Run.objects.select_related("shard", "shard__upload", "pending_index")
    return get_object_or_404(runs, pk=pk)


def get_attempt_or_404(pk: int) -> Attempt:
    """The attempt with its run and session, or a 404."""
    return get_object_or_404(Attempt.objects.select_related("run", "session"), pk=pk)


def is_partial(request: HttpRequest) -> bool:
    """An htmx request for part of a page; a history restore asks for the whole page."""
    return bool(request.htmx and not request.htmx.history_restore_request)


# What an htmx request gets instead of the whole page: a partial of the page's template by its
# name ("tab": `page.html#tab`), or another template ("records/x/_part.html", may end in
# `#name`); a mapping chooses by the element the request targets (`None`: any other target).
Partial = str | Mapping[str | None, str]


def partial_template(request: HttpRequest, template: str, partial: Partial) -> str:
    """The template this request is answered with (see `Partial`)."""
    if not partial or not is_partial(request):
        return template
    if not isinstance(partial, str):
        chosen = partial.get(request.htmx.target, partial.get(None, ""))
        if not chosen:
            return template
        partial = chosen
    return partial if "/" in partial else f"{template}#{partial}"


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: Partial = "",
    status: int = 200,
) -> HttpResponse:
    """A page, or only the part an htmx request asks for (in the spirit of django-htmx-patterns'
    `for_htmx`). An answer that can switch templates varies on `HX-Request`, so a cache never
    hands the fragment to a full page load or the page to htmx."""
    response = render(request, partial_template(request, template, partial), context, status=status)
    if partial:
        patch_vary_headers(response, ["HX-Request"])
    return response


def bad_request(form: Any, request: HttpRequest | None = None) -> HttpResponse:
    """A 400 naming each field and what is wrong with it: in the site's frame for a page, and
    in the `X-Error` header too, which the page's script shows beside the control that asked."""
    errors = "; ".join(
        f"{name}: {' '.join(msgs)}" if name != "__all__" else " ".join(msgs)
        for name, msgs in form.errors.items()
    )
    message = f"Invalid query: {errors}"
    response = render(request, "400.html", {"message": message}, status=400)
    # A header holds one line of ASCII; the page's own copy keeps the message as it is.
    response["X-Error"] = " ".join(message.split()).encode("ascii", "backslashreplace").decode()
    return response


def api_token_of(request: HttpRequest) -> tuple[ApiToken | None, HttpResponse | None]:
    """The live upload token of a request, or the response that refuses it."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None, JsonResponse(
            {"error": "send an upload token as 'Authorization: Bearer TOKEN'"}, status=401
        )
    token = ApiToken.authenticate(raw.strip())
    if token is None:
        return None, JsonResponse({"error": "the token is not known"}, status=401)
    if not token.active:
        return None, JsonResponse({"error": "the token was revoked"}, status=403)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token, None


def token_read(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """An API address read with an upload token (a GET, no cookies, so no CSRF): a request
    without a live token is refused in JSON before the view runs."""

    @csrf_exempt
    @require_GET
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        _, failure = api_token_of(request)
        return failure or view(request, *args, **kwargs)

    return wrapper
