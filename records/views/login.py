"""Logging in: failed attempts are recorded in the audit log, and an account (or an address)
with too many recent failures is refused for a while, so passwords cannot be guessed at speed.
The record lives in the database, so every server process counts the same failures."""

from __future__ import annotations

import unicodedata
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from records.models import AuditEvent

FAILURES_PER_ACCOUNT = 5
FAILURES_PER_ADDRESS = 20
LOCKOUT = timedelta(minutes=15)


def normalised_username(raw: Any) -> str:
    """The account name a login form asks about, as Django's login form hands it to the
    authentication backend (white space around it stripped, NFKC), so `ann `, `ann\\t`, `ann`
    followed by a no-break space and fullwidth `ａｎｎ` all count against the one account `ann`."""
    text = str(raw or "").replace("\x00", "")
    return unicodedata.normalize("NFKC", text.strip())[:150]


def client_address(request: HttpRequest | None) -> str:
    """The address a request came from, or "" where it cannot be told apart from everyone's.

    Behind the TLS proxy (`EVALDASH_BEHIND_TLS_PROXY`) every connection comes from the proxy, so
    the client is the last address the proxy appended to X-Forwarded-For (earlier entries are
    whatever the client sent, and prove nothing); without that header the client is unknown.
    Without a proxy, X-Forwarded-For is the client's own text and is ignored."""
    if request is None:
        return ""
    if getattr(settings, "EVALDASH_BEHIND_TLS_PROXY", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        return forwarded.rsplit(",", 1)[-1].strip()[:64]
    return (request.META.get("REMOTE_ADDR") or "")[:64]


@receiver(user_login_failed)
def record_failed_login(sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any):
    AuditEvent.objects.create(
        action="login_failed",
        detail={
            "username": normalised_username(credentials.get("username")),
            "address": client_address(request),
        },
    )


def locked_out(username: str, address: str) -> bool:
    """Whether logins as `username` (already normalised) from `address` are refused for now.
    An address that is "" (every client behind the proxy sharing it) locks no one out."""
    recent = AuditEvent.objects.filter(
        action="login_failed", created_at__gte=timezone.now() - LOCKOUT
    )
    return recent.filter(detail__username=username).count() >= FAILURES_PER_ACCOUNT or (
        bool(address) and recent.filter(detail__address=address).count() >= FAILURES_PER_ADDRESS
    )


class ThrottledLoginView(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = normalised_username(request.POST.get("username", ""))
        if locked_out(username, client_address(request)):
            # No form validation here: it would try the password, and count one more failure.
            minutes = int(LOCKOUT.total_seconds() // 60)
            context = self.get_context_data(
                form=self.form_class(request, initial={"username": username}),
                refusal=f"Too many failed logins for this account or address. Nothing was "
                f"checked; try again in {minutes} minutes.",
            )
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)
