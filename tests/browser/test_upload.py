"""The upload page: what was stored shown beside the form that sent it, the list refreshed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import check_layout, log_in, send_files, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.fixture
def uploader_page(page):
    log_in(page, "sender", "add_upload")
    return page


def test_an_upload_reports_beside_its_form_and_refreshes_the_list(uploader_page):
    page = uploader_page
    check_layout(page, "/upload/")
    page.goto(page.base + "/upload/")
    assert page.title() == "Upload · evaldash"
    before = page.locator("#recent-uploads tbody tr").count()
    shard = (FIXTURES / "modelrecord" / "modeleval-dynamic.jsonl").read_bytes()
    send_files(page, ("modeleval-new.jsonl", shard), ("modeleval-bad.jsonl", b"{\n"))
    report = page.locator("#upload-form + #report")  # right under the form that sent it
    report.locator("h2").wait_for()
    settled(page)
    text = report.inner_text()
    assert "1 shard stored" in text and "modeleval-new.jsonl" in text
    assert "modeleval-bad.jsonl line 1" in text
    assert page.locator("#recent-uploads tbody tr").count() == min(before + 1, 15)
    assert not page.locator("#upload-form button[type=submit]").is_disabled()
    # The browser logs the 422 (something was refused); nothing else went wrong.
    assert [p for p in page.problems if "422" not in p] == [], page.problems


def test_a_key_and_a_refused_conformance_run_are_reported_too(uploader_page):
    page = uploader_page
    page.goto(page.base + "/upload/")
    key = (FIXTURES / "corpus" / "corpus-key-sample.json").read_bytes()
    send_files(page, ("key.json", key))
    page.locator("#report h3 >> text=Corpus keys").wait_for()
    assert "key.json" in page.locator("#report").inner_text()
    # A conformance run the reader refuses: the refusal beside its own form.
    page.set_input_files(
        "input[name=output]",
        [{"name": "out.jsonl", "mimeType": "application/json", "buffer": b"not json\n"}],
    )
    page.fill("input[name=adapter]", "python/langgraph")
    page.click("form:has(input[name=adapter]) button[type=submit]")
    page.wait_for_load_state("networkidle")
    error = page.locator("form:has(input[name=adapter]) + .request-error")
    assert "refused" in error.inner_text() and "out.jsonl" in error.inner_text()
