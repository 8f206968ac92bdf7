"""The upload page, the upload API (token-authenticated), each upload's record and the audit log."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required as admin_staff_required
from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaldash.middleware import accepts_uploads
from evaldash.uploads import IncomingFileUploadHandler
from records.formats.numbers import NotWhole, parse_whole
from records.ingest import IngestReport
from records.ingest.inputs import disk_full
from records.models import (
    ApiToken,
    AuditEvent,
    Upload,
)
from records.tasks import queue_kept
from records.tasks.pending import incoming_dir, keep_files
from records.views.access import (
    api_token_of,
    is_partial,
    query_form,
    read_access,
    render_page,
    token_read,
)
from records.views.forms import ProgressForm

# Staff pages send a reader who is not logged in to the site's login, not the admin site's.
staff_member_required = admin_staff_required(login_url="login")


UPLOAD_FIELDS = ("file", "files")


def _request_files(request: HttpRequest) -> list[Any]:
    return request.FILES.getlist("file") + request.FILES.getlist("files")


def expect_files(request: HttpRequest) -> IncomingFileUploadHandler:
    """The handler that parses the request's files into the uploads storage's own directory;
    set here before anything reads the body (the CSRF check reads it too), or found if set."""
    for handler in request.upload_handlers:
        if isinstance(handler, IncomingFileUploadHandler):
            return handler
    handler = IncomingFileUploadHandler(request, incoming_dir(), UPLOAD_FIELDS)
    request.upload_handlers = [handler]
    return handler


def receive(request: HttpRequest, upload: Upload) -> Upload | None:
    """Parse the request's files into the uploads storage's own directory as the body arrives
    (no database write meanwhile), move each into the storage by a rename, then save the upload
    naming them and queue its ingest. Whole or nothing: a body that breaks off or ends early, or
    any failure before the upload is committed, leaves no file and no row. None when the body
    held no whole file."""
    handler = expect_files(request)
    try:
        files = _request_files(request)
        if handler.interrupted or not files:
            return None
        kept = keep_files([(f.name, f) for f in files])
        return queue_kept(upload, kept, allow_digest_mismatch=_override(request))
    except Exception as exc:
        if full := disk_full(exc):
            raise NoRoom(full) from exc
        raise
    finally:
        handler.close_files()  # what was not moved into the storage


class NoRoom(Exception):
    """The uploads storage's disk (or the database) is full: nothing of the upload was kept."""

    def __init__(self, full: str) -> None:
        self.full = full
        where = "the uploads storage" if full == "disk" else "the database"
        super().__init__(f"{where} is full: nothing of this upload was kept; send it again later")

    @property
    def status(self) -> int:
        # 507 Insufficient Storage for the uploads' own disk; a full database is the server's
        # operational failure, as it is to a waiting upload.
        return 507 if self.full == "disk" else 503

    def response(self) -> JsonResponse:
        answer = JsonResponse({"error": str(self), "full": self.full}, status=self.status)
        answer["Retry-After"] = str(settings.EVALDASH_FULL_RETRY_SECONDS)
        return answer


def report_of(upload: Upload) -> IngestReport:
    """A done upload's summary as the report its ingest answered with."""
    s = upload.summary or {}
    return IngestReport(
        stored=s.get("stored", []),
        present=s.get("already_present", []),
        refused=s.get("refused", []),
        ignored=s.get("ignored", []),
        keys=s.get("keys", []),
        replays=s.get("replays", []),
        suites=s.get("suites", []),
    )


def _override(request: HttpRequest) -> bool:
    """The operator's explicit override for a corpus key whose declared digest differs."""
    return request.POST.get("allow_digest_mismatch") in ("1", "true", "on", "yes")


@accepts_uploads
@csrf_exempt  # the body is parsed into the uploads storage first; `upload_page` checks CSRF
@require_http_methods(["GET", "POST"])
@login_required
def upload(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return upload_page(request)
    handler = expect_files(request)
    try:
        return upload_page(request)
    finally:
        handler.close_files()  # also when the CSRF check or the permission refused it


@csrf_protect
def upload_page(request: HttpRequest) -> HttpResponse:
    context = upload_page_context(request)
    template, status = "records/uploads/upload.html", 200
    if request.method == "POST":
        if not context["can_upload"]:
            return HttpResponse("You do not have the upload permission.", status=403)
        try:
            up = receive(request, Upload(source=Upload.Source.WEB, user=request.user))
        except NoRoom as exc:
            up, status = None, exc.status
            context["error"] = f"{str(exc).capitalize()}."
        if up is None and status == 200:
            context["error"] = "Choose at least one file to upload."
            status = 400
        elif up is not None:
            context["upload"] = up
            if up.status == Upload.Status.DONE:
                context["report"] = report_of(up)
                status = 200 if context["report"].ok else 422
    context["recent"] = recent_uploads()  # after an upload, with it
    # Sent in place, the form's answer is the report alone.
    partial = "report" if request.method == "POST" else ""
    response = render_page(request, template, context, partial=partial, status=status)
    if "upload" in context and is_partial(request):
        # A reload then opens the upload's own page, which follows it too.
        response["HX-Push-Url"] = context["upload"].get_absolute_url()
    return response


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


@require_GET
@read_access
@query_form(ProgressForm)
def upload_progress(request: HttpRequest, pk: int, form: ProgressForm) -> HttpResponse:
    """An upload's state as the partial the upload page polls; it stops asking once done, and
    then brings the page's list of recent uploads up to date too when the page shows one."""
    up = get_object_or_404(Upload, pk=pk)
    follows = form.cleaned_data["recent"]
    context = {"upload": up, "follows_recent": follows}
    if follows and up.finished:
        context["recent"] = recent_uploads()
    return render(request, "records/uploads/_progress.html", context)


@require_GET
@staff_member_required
def queue(request: HttpRequest) -> HttpResponse:
    """The task queue: what waits, what runs (and on which worker), what failed."""
    from django_tasks_db.models import DBTaskResult

    from records.models.intake import WorkerBeat

    results = DBTaskResult.objects.order_by("-enqueued_at")
    return render(
        request,
        "records/uploads/queue.html",
        {
            "waiting": results.filter(status="READY")[:50],
            "running": results.filter(status="RUNNING")[:50],
            "failed": results.filter(status="FAILED")[:50],
            "counts": {s: results.filter(status=s).count() for s in ("READY", "RUNNING", "FAILED")},
            "workers": WorkerBeat.objects.order_by("-beat_at")[:20],
            "uploads": Upload.objects.exclude(status=Upload.Status.DONE)
            .select_related("user", "token")
            .order_by("-created_at")[:50],
        },
    )


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
        token, failure = api_token_of(request)
        if failure:
            return failure
        assert token is not None
        return view(request, token)

    return wrapper


MAX_WAIT_SECONDS = 600
POLL_SECONDS = 0.25
_waiters: dict[int, threading.BoundedSemaphore] = {}


def waiters() -> threading.BoundedSemaphore:
    """The waiting slots of this process (EVALDASH_API_WAITERS)."""
    n = settings.EVALDASH_API_WAITERS
    return _waiters.setdefault(n, threading.BoundedSemaphore(n) if n else threading.Semaphore(0))


def _wait_seconds(request: HttpRequest) -> tuple[int, HttpResponse | None]:
    raw = request.GET.get("wait", "")
    if raw == "":
        return 0, None
    try:
        return parse_whole(raw, maximum=MAX_WAIT_SECONDS), None
    except NotWhole:
        return 0, JsonResponse(
            {"error": f"wait: give whole seconds from 0 to {MAX_WAIT_SECONDS}", "field": "wait"},
            status=400,
        )


def _busy() -> HttpResponse:
    response = JsonResponse(
        {"error": "too many requests are waiting for uploads; ask again without ?wait= or later"},
        status=503,
    )
    response["Retry-After"] = "5"
    return response


def _hold(up: Upload, seconds: int) -> Upload:
    """Poll the upload (a short read every POLL_SECONDS, no lock held) until it is done or
    `seconds` pass; the caller holds a waiting slot."""
    deadline = time.monotonic() + seconds
    while not (up.finished or up.waiting) and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(POLL_SECONDS, left))
        up.refresh_from_db()
    return up


def upload_answer(request: HttpRequest, up: Upload, *, created: bool = False) -> JsonResponse:
    """What the API says of an upload: its status and progress, and once done its summary with
    each shard's run (run_id, page, gate). Done: 200, or 422 if something was refused; failed:
    500 with the error; queued again because the database was full: 503 with Retry-After and
    "waiting: database full"; else still queued or running: 202 to the POST that made it, else
    200."""
    url = request.build_absolute_uri(reverse("records:api-upload-status", args=[up.pk]))
    body: dict[str, Any] = {
        "upload": up.pk,
        "status": up.status,
        "url": url,
        "page": request.build_absolute_uri(up.get_absolute_url()),
        "progress": up.progress,
    }
    status = 202 if created else 200
    if up.status == Upload.Status.DONE:
        report = report_of(up)
        for entry in report.stored + report.present:
            if entry.get("url"):
                entry["url"] = request.build_absolute_uri(entry["url"])
        body |= {**report.as_dict(), "summary": report.summary_line()}
        status = 200 if report.ok else 422
    elif up.status == Upload.Status.FAILED:
        body["error"] = up.error
        status = 500
    elif up.waiting:
        # An operational failure, not a refusal: the bytes are kept and tried again later.
        body["error"] = up.error
        status = 503
    response = JsonResponse(body, status=status)
    if status == 503:
        response["Retry-After"] = str(settings.EVALDASH_FULL_RETRY_SECONDS)
    if created:
        response["Location"] = reverse("records:api-upload-status", args=[up.pk])
    return response


@token_upload
def api_upload(request: HttpRequest, token: ApiToken) -> HttpResponse:
    wait, bad = _wait_seconds(request)
    if bad:
        return bad
    slot = waiters() if wait else None
    if slot is not None and not slot.acquire(blocking=False):
        return _busy()  # before a byte of the body is read
    try:
        try:
            up = receive(request, Upload(source=Upload.Source.API, token=token))
        except NoRoom as exc:
            return exc.response()
        if up is None:
            return JsonResponse(
                {"error": "no file: send files as multipart field 'file'"}, status=400
            )
        return upload_answer(request, _hold(up, wait), created=True)
    finally:
        if slot is not None:
            slot.release()


@token_read
def api_upload_status(request: HttpRequest, pk: int) -> HttpResponse:
    """An upload's state for an upload token (`?wait=S` holds it until done or S seconds)."""
    wait, bad = _wait_seconds(request)
    if bad:
        return bad
    up = Upload.objects.filter(pk=pk).first()
    if up is None:
        return JsonResponse({"error": f"no upload {pk}"}, status=404)
    if wait and not (up.finished or up.waiting):
        slot = waiters()
        if not slot.acquire(blocking=False):
            return _busy()
        try:
            up = _hold(up, wait)
        finally:
            slot.release()
    return upload_answer(request, up)


@require_GET
@staff_member_required
def audit(request: HttpRequest) -> HttpResponse:
    uploads = Upload.objects.select_related("user", "token").order_by("-created_at")[:100]
    events = AuditEvent.objects.select_related("user")[:100]
    return render(request, "records/uploads/audit.html", {"uploads": uploads, "events": events})
