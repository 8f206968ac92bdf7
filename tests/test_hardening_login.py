"""The login lockout holds at every address that takes a password and under simultaneous
guesses (issue 45, B19 and B20)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.backends import ModelBackend
from django.db import connection
from django.test import Client

from records.models import AuditEvent
from records.views.login import FAILURES_PER_ACCOUNT

ADDRESSES = ["/login/", "/admin/login/"]


def _post(client, path: str, password: str, username: str = "ann"):
    return client.post(path, {"username": username, "password": password})


@pytest.mark.django_db
@pytest.mark.parametrize("failed_at", ADDRESSES)
@pytest.mark.parametrize("then_at", ADDRESSES)
def test_an_account_locked_at_one_login_address_is_locked_at_every_one(
    client, django_user_model, failed_at, then_at
):
    django_user_model.objects.create_user("ann", password="right-password-1", is_staff=True)
    for _ in range(FAILURES_PER_ACCOUNT):
        assert _post(client, failed_at, "wrong").status_code == 200
    # Twenty more guesses at the other address check nothing; nor does the right password.
    for _ in range(20):
        assert _post(client, then_at, "wrong").status_code == 429
    r = _post(client, then_at, "right-password-1")
    assert r.status_code == 429 and "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action="login_failed").count() == FAILURES_PER_ACCOUNT


@pytest.mark.django_db
def test_a_successful_login_gives_its_check_back(client, django_user_model):
    django_user_model.objects.create_user("ann", password="right-password-1")
    for _ in range(FAILURES_PER_ACCOUNT + 3):
        assert _post(Client(), "/login/", "right-password-1").status_code == 302


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ADDRESSES)
def test_forty_simultaneous_wrong_passwords_get_at_most_the_limit_checked(
    django_user_model, monkeypatch, path
):
    django_user_model.objects.create_user("ann", password="right-password-1", is_staff=True)
    checked, lock = [], threading.Lock()
    authenticate = ModelBackend.authenticate

    def slow_check(self, request, username=None, password=None, **kwargs):
        with lock:
            checked.append(username)
        time.sleep(0.3)  # a real password hash: every guess is in flight at once
        return authenticate(self, request, username=username, password=password, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", slow_check)
    start = threading.Barrier(40)

    def guess(n: int) -> int:
        try:
            start.wait()
            return _post(Client(), path, f"wrong-{n}").status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(guess, range(40)))
    assert len(checked) <= FAILURES_PER_ACCOUNT
    assert answers.count(429) >= 40 - FAILURES_PER_ACCOUNT
    assert AuditEvent.objects.filter(action="login_failed").count() == len(checked)
