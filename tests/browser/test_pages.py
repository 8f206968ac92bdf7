"""The site's frame around everything else: upload, login, and the error pages."""

from __future__ import annotations

import pytest

from tests.browser.conftest import check_layout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_upload_and_key_pages_read_at_both_widths(page):
    check_layout(page, "/upload/")
    check_layout(page, "/keys/")
    check_layout(page, "/replays/")


def test_the_login_page_says_why_it_was_reached(page, settings):
    settings.EVALDASH_PUBLIC_READ = False
    check_layout(page, "/login/?next=/runs/1/")
    page.goto(page.base + "/")  # reading needs an account here: sent to log in
    page.wait_for_url("**/login/?next=/**")
    assert "reading results on this evaldash needs an account" in page.inner_text("main")
    page.fill("input[name=username]", "nobody")
    page.fill("input[name=password]", "wrong-password")
    page.click("form.login-form button[type=submit]")
    assert "do not match an account" in page.locator(".request-error").inner_text()
    assert page.problems == [], page.problems


def test_error_pages_keep_the_sites_frame(page):
    for url, text in (("/runs/999999/", "Not found"), ("/?sort=sideways", "Invalid query")):
        page.goto(page.base + url)
        assert page.locator("header.top nav").count() == 1, url
        assert text in page.inner_text("main"), url
