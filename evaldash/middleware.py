"""What every request passes before a view: bounds on its body, no NUL in its query, and no
shared cache keeping a logged-in reader's page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import patch_cache_control

from records.formats.numbers import NotWhole, parse_whole


def accepts_uploads(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Marks a view whose body may be as large as EVALDASH_MAX_UPLOAD_BYTES; every other view
    takes at most EVALDASH_MAX_REQUEST_BYTES."""
    view.accepts_uploads = True  # type: ignore[attr-defined]
    return view


def _refusal(request: HttpRequest, message: str, status: int) -> HttpResponse:
    if request.path_info.startswith("/api/"):
        return JsonResponse({"error": message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class RequestGuard:
    """Placed before the CSRF middleware, which reads (and so spools to disk) any POST body:
    a body over the limit is refused from its Content-Length before a byte of it is read."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                return _refusal(
                    request,
                    f"The query parameter {key.replace(chr(0), '')!r} holds a NUL character.",
                    400,
                )
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            patch_cache_control(response, private=True)
        return response

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = parse_whole(raw)
        except NotWhole:
            return _refusal(request, f"The Content-Length {raw!r} is not a number.", 400)
        if getattr(view, "accepts_uploads", False):
            limit, name = settings.EVALDASH_MAX_UPLOAD_BYTES, "EVALDASH_MAX_UPLOAD_BYTES"
        else:
            limit, name = settings.EVALDASH_MAX_REQUEST_BYTES, "EVALDASH_MAX_REQUEST_BYTES"
        if length > limit:
            return _refusal(
                request,
                f"The request body is {length:,} bytes; this address takes at most "
                f"{limit:,} ({name}). Nothing was read.",
                413,
            )
        return None
