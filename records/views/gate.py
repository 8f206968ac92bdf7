"""The CI gate's address: does a run regress against its baseline (records.queries.gate)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from records.queries.gate import GateError, gate, resolve
from records.views.access import token_read


@token_read
def api_gate(request: HttpRequest, run_id: str) -> HttpResponse:
    """The CI gate as JSON, for an upload token."""
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
