"""Logging in: failed attempts are recorded in the audit log, and an account (or an address)
with too many recent failures is refused for a while, so passwords cannot be guessed at speed.
The record lives in the database, so every server process counts the same failures."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from records.models import AuditEvent

FAILURES_PER_ACCOUNT = 5
FAILURES_PER_ADDRESS = 20
LOCKOUT = timedelta(minutes=15)


def _address(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") or "") if request is not None else ""


@receiver(user_login_failed)
def record_failed_login(sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any):
    username = str(credentials.get("username") or "").replace("\x00", "")[:150]
    AuditEvent.objects.create(
        action="login_failed", detail={"username": username, "address": _address(request)}
    )


def locked_out(username: str, address: str) -> bool:
    recent = AuditEvent.objects.filter(
        action="login_failed", created_at__gte=timezone.now() - LOCKOUT
    )
    return recent.filter(detail__username=username).count() >= FAILURES_PER_ACCOUNT or (
        bool(address) and recent.filter(detail__address=address).count() >= FAILURES_PER_ADDRESS
    )


class ThrottledLoginView(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "").replace("\x00", "")[:150]
        if locked_out(username, _address(request)):
            # No form validation here: it would try the password, and count one more failure.
            minutes = int(LOCKOUT.total_seconds() // 60)
            context = self.get_context_data(
                form=self.form_class(request, initial={"username": username}),
                refusal=f"Too many failed logins for this account or address. Nothing was "
                f"checked; try again in {minutes} minutes.",
            )
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)
