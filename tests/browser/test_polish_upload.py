"""The upload pages as a new user meets them: an upload that stored no corpus key has a page,
one file picker, "already present" linked to the stored run, a shard stored unscored says so,
a broken line gives its column once and a short escaped excerpt, every page counts what an
upload stored the same way, and the staff pages send a logged-out reader to the site's login."""

from __future__ import annotations

import pytest

from records.models import Upload
from tests.browser.conftest import log_in
from tests.builders import line, published_shard
from tests.builders import shard as build_shard

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_upload_that_stored_no_corpus_key_has_its_page(page):
    up = Upload.objects.create(
        source="web",
        summary={"stored": [], "already_present": [], "refused": [], "ignored": [],
                 "conformance_runs": []},
    )  # fmt: skip
    answer = page.goto(page.base + f"/uploads/{up.pk}/")
    assert answer.status == 200
    assert page.locator("main h1").count() == 1
    assert page.problems == []


@pytest.mark.parametrize("width", [1440, 390])
def test_the_upload_page_has_one_file_picker(page, width):
    log_in(page, "uploader", "add_upload")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(page.base + "/upload/")
    form = page.locator("#upload-form")
    picker = form.locator("label.filepick")
    native = form.locator("input[type=file]")
    assert picker.inner_text().strip() == "Choose files…"
    assert native.count() == 1
    assert native.evaluate("el => getComputedStyle(el).opacity") == "0"
    box, inside = picker.bounding_box(), native.bounding_box()
    assert box["x"] <= inside["x"] and inside["x"] + inside["width"] <= box["x"] + box["width"] + 1
    with page.expect_file_chooser() as chooser:
        picker.click()
    assert chooser.value.is_multiple()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    assert page.problems == []


def test_already_present_links_the_stored_run_and_a_shard_without_its_key_says_so(page):
    from records.ingest import bytes_input, ingest

    data = published_shard(line("attempt"), corpus="0123456789abcdef")
    first = Upload.objects.create(source="cli")
    ingest([bytes_input("modeleval-nokey.jsonl", data)], first)
    page.goto(page.base + f"/uploads/{first.pk}/")
    note = page.locator("span.unscored")
    assert "0123456789abcdef" in note.inner_text()
    assert "scored when that key is uploaded" in note.inner_text()
    assert page.locator("span.unscored").count() == 1

    again = Upload.objects.create(source="cli")
    ingest([bytes_input("modeleval-nokey.jsonl", data)], again)
    page.goto(page.base + f"/uploads/{again.pk}/")
    link = page.locator("h3:has-text('Already present') + ul a")
    assert link.count() == 1
    link.click()
    page.wait_for_url("**/runs/*/")
    assert page.locator("main h1").inner_text().startswith("Run")


def test_a_broken_line_names_its_column_once_with_a_short_escaped_excerpt(page):
    from records.ingest import bytes_input, ingest

    broken = '{"schema":1,"type":"attempt" "attempt":{"key":"<b>bold</b>"}}'
    up = Upload.objects.create(source="cli")
    ingest([bytes_input("modeleval-broken.jsonl", build_shard(broken))], up)
    page.goto(page.base + f"/uploads/{up.pk}/")
    said = page.locator("ul.errors li").inner_text()
    assert "line 5" in said and "column 30" in said
    assert "line 1 column" not in said and "(char" not in said
    assert '⟨here⟩"attempt":{"key":"<b>bold</b>"…' in said  # cut short, shown as text
    assert page.locator("ul.errors li b").count() == 0
    assert len(said) < 300


def test_recent_uploads_and_the_audit_log_count_what_the_demo_stored_alike(page):
    page.goto(page.base + "/login/")
    from django.contrib.auth.models import User

    User.objects.create_user("staff", password="pw-123456789-x", is_staff=True)
    page.fill("input[name=username]", "staff")
    page.fill("input[name=password]", "pw-123456789-x")
    page.click("form.login-form button[type=submit]")
    page.wait_for_load_state("networkidle")
    demo = Upload.objects.get(source="demo")
    page.goto(page.base + "/upload/")
    recent = page.locator(f"#recent-uploads tr:has(a[href='/uploads/{demo.pk}/'])")
    page.goto(page.base + "/audit/")
    audit = page.locator(f"tr:has(a[href='/uploads/{demo.pk}/'])")
    said = audit.locator("td").nth(3).inner_text()
    assert said == "3 shards, 1 corpus key"
    page.goto(page.base + "/upload/")
    assert recent.locator("td").nth(4).inner_text() == said


def test_a_logged_out_reader_of_the_audit_log_is_sent_to_the_sites_login(page, settings):
    settings.EVALDASH_PUBLIC_READ = False
    for path in ("/audit/", "/queue/"):
        page.goto(page.base + path)
        assert page.url.endswith(f"/login/?next={path}")
        assert "/admin/" not in page.url
        assert page.locator("form.login-form").count() == 1
