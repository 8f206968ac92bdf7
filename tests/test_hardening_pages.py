"""The login throttle, the attempt page and its exports under hostile input, and names that
carry bidi controls or look-alike characters."""

from __future__ import annotations

import pytest

from records.models import AuditEvent

pytestmark = pytest.mark.django_db


# --- login throttling ----------------------------------------------------------------------------


def _fail(client, username: str, **meta: str) -> None:
    r = client.post("/login/", {"username": username, "password": "wrong"}, **meta)
    assert r.status_code == 200


@pytest.mark.parametrize("spelling", ["ann ", "ann\t", "ann\u00a0", "\uff41\uff4e\uff4e"])
def test_it_refuses_a_locked_account_under_every_spelling_the_login_form_reads_as_it(
    client, django_user_model, spelling
):
    django_user_model.objects.create_user("ann", password="right-password-1")
    for _ in range(5):
        _fail(client, "ann")
    r = client.post("/login/", {"username": spelling, "password": "right-password-1"})
    assert r.status_code == 429
    assert "_auth_user_id" not in client.session


def test_wrong_passwords_sent_through_variant_spellings_count_against_the_one_account(
    client, django_user_model
):
    django_user_model.objects.create_user("ann", password="right-password-1")
    for spelling in ["ann ", "ann\t", "ann\u00a0", "\uff41\uff4e\uff4e", " ann"]:
        _fail(client, spelling)
    assert set(
        AuditEvent.objects.filter(action="login_failed").values_list("detail__username", flat=True)
    ) == {"ann"}
    r = client.post("/login/", {"username": "ann", "password": "right-password-1"})
    assert r.status_code == 429


def test_behind_the_proxy_one_clients_failures_do_not_lock_out_the_others(
    client, django_user_model, settings
):
    settings.EVALDASH_BEHIND_TLS_PROXY = True
    django_user_model.objects.create_user("bob", password="right-password-2")
    proxy = {"REMOTE_ADDR": "10.0.0.1"}
    for n in range(20):
        _fail(client, f"guess{n}", HTTP_X_FORWARDED_FOR="203.0.113.9", **proxy)
    r = client.post(
        "/login/",
        {"username": "bob", "password": "right-password-2"},
        HTTP_X_FORWARDED_FOR="198.51.100.7",
        **proxy,
    )
    assert r.status_code == 302
    # The guessing client itself is refused, whatever it puts in front of the proxy's entry.
    r = client.post(
        "/login/",
        {"username": "bob", "password": "right-password-2"},
        HTTP_X_FORWARDED_FOR="198.51.100.7, 203.0.113.9",
        **proxy,
    )
    assert r.status_code == 429


def test_behind_the_proxy_without_a_forwarded_address_it_locks_per_account_only(
    client, django_user_model, settings
):
    settings.EVALDASH_BEHIND_TLS_PROXY = True
    django_user_model.objects.create_user("bob", password="right-password-2")
    for n in range(25):
        _fail(client, f"guess{n}", REMOTE_ADDR="10.0.0.1")
    r = client.post(
        "/login/", {"username": "bob", "password": "right-password-2"}, REMOTE_ADDR="10.0.0.1"
    )
    assert r.status_code == 302


def test_without_a_proxy_a_forwarded_header_is_the_clients_own_text_and_ignored(
    client, django_user_model
):
    django_user_model.objects.create_user("bob", password="right-password-2")
    for n in range(20):
        _fail(client, f"guess{n}", REMOTE_ADDR="192.0.2.5", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    r = client.post(
        "/login/",
        {"username": "bob", "password": "right-password-2"},
        REMOTE_ADDR="192.0.2.5",
        HTTP_X_FORWARDED_FOR="198.51.100.99",
    )
    assert r.status_code == 429
