"""Logging in: failed attempts are recorded in the audit log, and an account (or an address)
with too many recent failures is refused for a while, so passwords cannot be guessed at speed.
The record lives in the database, so every server process counts the same failures."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView
from django.db import IntegrityError, transaction
from django.db.models import F
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from records.models import AuditEvent
from records.models.intake import LoginSlots

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


def take_slots(username: str, address: str) -> list[str] | None:
    """Take one password check for the account and one for the address (an address of "" has
    none to take), each by a conditional update that no simultaneous login can slip between:
    the keys taken, or None (and nothing taken) when either has none left in the window."""
    wanted = [(f"account:{username}", FAILURES_PER_ACCOUNT)]
    if address:
        wanted.append((f"address:{address}", FAILURES_PER_ADDRESS))
    taken: list[str] = []
    for key, limit in wanted:
        if not _take(key, limit):
            give_back(taken)
            return None
        taken.append(key)
    return taken


def _take(key: str, limit: int) -> bool:
    now = timezone.now()
    slots = LoginSlots.objects.filter(key=key)
    if not slots.exists():
        try:
            with transaction.atomic():
                LoginSlots.objects.create(key=key, window_start=now)
        except IntegrityError:
            pass  # a simultaneous login created it
    # A window past the lockout starts again (once: the first to see it moves its start).
    slots.filter(window_start__lt=now - LOCKOUT).update(window_start=now, taken=0)
    return bool(slots.filter(taken__lt=limit).update(taken=F("taken") + 1))


def give_back(keys: list[str]) -> None:
    """Return the checks a login took that did not fail (it logged in, or checked nothing)."""
    LoginSlots.objects.filter(key__in=keys, taken__gt=0).update(taken=F("taken") - 1)


def throttled(view: Callable[..., HttpResponse], refuse: Callable[..., HttpResponse]):
    """A login view whose POST is refused (by `refuse(request, username)`, before any password
    is checked) while the account or address is locked out (`locked_out`) or has no check left
    in its window (`take_slots`); a login that succeeds gives its checks back."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = normalised_username(request.POST.get("username", ""))
        address = client_address(request)
        taken = None if locked_out(username, address) else take_slots(username, address)
        if taken is None:
            return refuse(request, username)
        response = view(request, *args, **kwargs)
        if getattr(request, "user", None) is not None and request.user.is_authenticated:
            give_back(taken)
        return response

    return wrapper


class ThrottledLoginView(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        check = throttled(super().post, self.refused)
        return check(request, *args, **kwargs)

    def refused(self, request: HttpRequest, username: str) -> HttpResponse:
        # No form validation here: it would try the password, and count one more failure.
        minutes = int(LOCKOUT.total_seconds() // 60)
        context = self.get_context_data(
            form=self.form_class(request, initial={"username": username}),
            refusal=f"Too many failed logins for this account or address. Nothing was "
            f"checked; try again in {minutes} minutes.",
        )
        return self.render_to_response(context, status=429)


def refused_login(request: HttpRequest, username: str) -> HttpResponse:
    """The site's login page with the lockout's refusal (429), for any login address."""
    view = ThrottledLoginView()
    view.setup(request)
    return view.refused(request, username)
