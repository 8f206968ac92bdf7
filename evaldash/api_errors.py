"""Every answer under /api/ is JSON, errors included: whatever answered an /api/ request with
an error page (Django's 400, 403, 404 and 500 pages, a 405 from a method decorator, the CSRF
failure page, the debug pages) is answered instead as {"error": ...} with the same status, and
the limits Django enforces while parsing a body are worded by name."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError

# Bytes of a plain-text refusal kept as the error message.
_MESSAGE_CHARS = 500


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def _worded(exc: BaseException) -> tuple[int, str] | None:
    """The status and message for an exception Django turns into an error page, if it is one."""
    if isinstance(exc, TooManyFilesSent):
        return 400, (
            f"The request sends more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files "
            "(DATA_UPLOAD_MAX_NUMBER_FILES); send them in several requests. Nothing was stored."
        )
    if isinstance(exc, TooManyFieldsSent):
        return 400, (
            f"The request sends more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} fields "
            "(DATA_UPLOAD_MAX_NUMBER_FIELDS). Nothing was stored."
        )
    if isinstance(exc, RequestDataTooBig):
        return 413, (
            f"The request's fields other than files take more than "
            f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE). "
            "Nothing was stored."
        )
    if isinstance(exc, MultiPartParserError):
        return 400, f"The multipart body cannot be read: {exc}. Nothing was stored."
    if isinstance(exc, (SuspiciousOperation, BadRequest)):
        return 400, f"Bad request: {exc}"
    if isinstance(exc, PermissionDenied):
        return 403, str(exc) or "You may not do this."
    if isinstance(exc, Http404):
        return 404, "Not found."
    return None


class ApiErrorsAsJson:
    """First in MIDDLEWARE, so that it sees the answer every other layer gave."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not is_api(request) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        return self._as_json(request, response)

    def process_exception(self, request: HttpRequest, exc: Exception) -> None:
        # Django still logs the exception and renders its page; the wording is kept for the
        # JSON answer that replaces that page.
        if is_api(request):
            request.api_error = _worded(exc)  # type: ignore[attr-defined]

    def _as_json(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        status = response.status_code
        worded = getattr(request, "api_error", None)
        if worded is not None and worded[0] in (status, 413):
            status, message = worded
        elif status == 405:
            allowed = response.get("Allow", "no method")
            message = f"{request.method} is not allowed here; this address takes {allowed}."
        elif status == 404:
            message = f"No API address {request.path_info} exists."
        elif response.get("Content-Type", "").startswith("text/plain") and not response.streaming:
            message = response.content.decode("utf-8", "replace")[:_MESSAGE_CHARS]
        elif status >= 500:
            message = "The server failed while answering; the error is logged."
        else:
            message = response.reason_phrase
        answer = JsonResponse({"error": message}, status=status)
        for header in ("Allow", "WWW-Authenticate", "Retry-After"):
            if header in response:
                answer[header] = response[header]
        return answer
