"""The upload page, the upload API (token-authenticated), each upload's record and the audit log."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaldash.middleware import accepts_uploads
from records.ingest import Input, ingest
from records.models import (
    ApiToken,
    AuditEvent,
    Upload,
)
from records.queries.gate import GateError, gate, resolve
from records.views.access import (
    _partial,
    read_access,
)


def _uploaded_inputs(request: HttpRequest) -> list[Input]:
    files = request.FILES.getlist("file") + request.FILES.getlist("files")
    out = []
    for f in files:
        out.append(Input(f.name, _opener(f), f.size))
    return out


def _opener(f: Any) -> Callable[[], Any]:
    def open_() -> Any:
        f.seek(0)
        return _NoClose(f)

    return open_


class _NoClose:
    """Hands an uploaded file to the ingest as a stream without letting it close the upload."""

    def __init__(self, f: Any) -> None:
        self.f = f

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)

    def __enter__(self) -> _NoClose:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.f.seek(0)

    def close(self) -> None:
        pass


def _override(request: HttpRequest) -> bool:
    """The operator's explicit override for a corpus key whose declared digest differs."""
    return request.POST.get("allow_digest_mismatch") in ("1", "true", "on", "yes")


@accepts_uploads
@require_http_methods(["GET", "POST"])
@login_required
def upload(request: HttpRequest) -> HttpResponse:
    context = upload_page_context(request)
    template, status = "records/uploads/upload.html", 200
    if request.method == "POST":
        if not context["can_upload"]:
            return HttpResponse("You do not have the upload permission.", status=403)
        inputs = _uploaded_inputs(request)
        if not inputs:
            context["error"] = "Choose at least one file to upload."
            status = 400
        else:
            up = Upload.objects.create(source=Upload.Source.WEB, user=request.user)
            context["report"] = ingest(inputs, up, allow_digest_mismatch=_override(request))
            context["upload"] = up
            status = 200 if context["report"].ok else 422
        if _partial(request):
            template = "records/uploads/upload.html#report"
    context["recent"] = recent_uploads()  # after an upload, with it
    return render(request, template, context, status=status)


def recent_uploads() -> list[Upload]:
    return list(Upload.objects.select_related("user", "token").order_by("-created_at")[:15])


def upload_page_context(request: HttpRequest) -> dict[str, Any]:
    """What the upload page shows around whatever was just sent (also for the conformance form,
    whose refusals are shown on this page); the recent uploads are read last."""
    return {
        "can_upload": request.user.has_perm("records.add_upload"),
        "max_bytes": settings.EVALDASH_MAX_UPLOAD_BYTES,
    }


@require_GET
@read_access
def upload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    up = get_object_or_404(Upload.objects.select_related("user", "token"), pk=pk)
    return render(
        request,
        "records/uploads/detail.html",
        {"upload": up, "summary": up.summary, "shards": up.shards.select_related("run")},
    )


def _api_token(request: HttpRequest) -> tuple[ApiToken | None, HttpResponse | None]:
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


def token_upload(
    view: Callable[[HttpRequest, ApiToken], HttpResponse],
) -> Callable[..., HttpResponse]:
    """An upload API address: a POST authenticated by an upload token (no cookies, so no CSRF),
    whose body may be as large as an upload; the view is given the live token."""

    @accepts_uploads
    @csrf_exempt
    @require_POST
    @functools.wraps(view)
    def wrapper(request: HttpRequest) -> HttpResponse:
        token, failure = _api_token(request)
        if failure:
            return failure
        assert token is not None
        return view(request, token)

    return wrapper


@token_upload
def api_upload(request: HttpRequest, token: ApiToken) -> HttpResponse:
    inputs = _uploaded_inputs(request)
    if not inputs:
        return JsonResponse({"error": "no file: send files as multipart field 'file'"}, status=400)
    up = Upload.objects.create(source=Upload.Source.API, token=token)
    report = ingest(inputs, up, allow_digest_mismatch=_override(request))
    body = {"upload": up.pk, **report.as_dict(), "summary": report.summary_line()}
    return JsonResponse(body, status=200 if report.ok else 422)


@require_GET
@staff_member_required
def audit(request: HttpRequest) -> HttpResponse:
    uploads = Upload.objects.select_related("user", "token").order_by("-created_at")[:100]
    events = AuditEvent.objects.select_related("user")[:100]
    return render(request, "records/uploads/audit.html", {"uploads": uploads, "events": events})


@csrf_exempt  # token-authenticated, no cookies involved
@require_GET
def api_gate(request: HttpRequest, run_id: str) -> HttpResponse:
    """The CI gate (records.queries.gate) as JSON, for an upload token."""
    _, failure = _api_token(request)
    if failure:
        return failure
    require = request.GET.get("require_baseline", "0")
    if require not in ("0", "1", "true", "false"):
        return JsonResponse(
            {"error": f"require_baseline={require!r}: use 1 or 0", "field": "require_baseline"},
            status=400,
        )
    try:
        result = gate(
            *resolve(run_id, request.GET.get("baseline") or "previous"),
            request.GET.get("column") or "Clean",
            require_baseline=require in ("1", "true"),
            base_url=settings.EVALDASH_PUBLIC_URL or request.build_absolute_uri("/"),
        )
    except GateError as exc:
        return JsonResponse({"error": str(exc)}, status=exc.status)
    return JsonResponse(result.as_dict())
