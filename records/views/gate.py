"""The CI gate's address: does a run regress against its baseline (records.queries.gate)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from records.queries.gate import GateError, gate, resolve
from records.views.access import token_read


@token_read
def api_gate(request: HttpRequest, run_id: str) -> HttpResponse:
    """The CI gate as JSON, for an upload token."""
    flags = {}
    for name in ("require_baseline", "allow_empty", "ignore_labels"):
        value = request.GET.get(name, "0")
        if value not in ("0", "1", "true", "false"):
            return JsonResponse(
                {"error": f"{name}={value!r}: use 1 or 0", "field": name}, status=400
            )
        flags[name] = value in ("1", "true")
    try:
        result = gate(
            *resolve(run_id, request.GET.get("baseline") or "previous"),
            [c for c in request.GET.getlist("column") if c] or ["Clean"],
            **flags,
            base_url=settings.EVALDASH_PUBLIC_URL or request.build_absolute_uri("/"),
        )
    except GateError as exc:
        return JsonResponse({"error": str(exc)}, status=exc.status)
    return JsonResponse(result.as_dict())
