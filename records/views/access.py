"""Who may do what, decided in the view (never in a partial, which can be requested alone), the htmx
partial switch, and the small lookups every page family shares."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import get_object_or_404, render

from records.models import (
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
                return _bad_request(form, request)
            return view(request, *args, form=form, **kwargs)

        return wrapper

    return decorate


def _get_run_or_404(pk: int) -> Run:
    return get_object_or_404(Run.objects.select_related("shard", "shard__upload"), pk=pk)


def _get_attempt_or_404(pk: int) -> Attempt:
    return get_object_or_404(Attempt.objects.select_related("run", "session"), pk=pk)


def _partial(request: HttpRequest) -> bool:
    return bool(request.htmx and not request.htmx.history_restore_request)


def _bad_request(form: Any, request: HttpRequest | None = None) -> HttpResponse:
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
