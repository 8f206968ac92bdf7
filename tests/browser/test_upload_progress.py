"""The upload page follows an upload live, queued, then running, then done, and a reload keeps
following it on the upload's own page; the staff's queue page shows what waits. Screenshots at
1440 and 390 px are written to the test's temporary directory (not kept)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User

from records.models import Upload
from records.tasks import run_upload
from tests.browser.conftest import check_layout, send_files

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
FIXTURES = Path(__file__).parent.parent / "fixtures"
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
# Where to keep the screenshots to look at them (a directory); the test's own by default.
SHOTS = os.environ.get("EVALDASH_SHOTS", "")


def _log_in_staff(page) -> None:
    user = User.objects.create_user("staff", password="pw-123456789-x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="add_upload"))
    page.goto(page.base + "/login/")
    page.fill("input[name=username]", "staff")
    page.fill("input[name=password]", "pw-123456789-x")
    page.click("form.login-form button[type=submit]")
    page.wait_for_load_state("networkidle")


def _shots(page, tmp_path: Path, name: str) -> None:
    where = Path(SHOTS) if SHOTS and Path(SHOTS).is_dir() else tmp_path
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(where / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 1000})


def test_the_upload_page_follows_an_upload_from_queued_to_done_across_a_reload(
    page, settings, tmp_path
):
    settings.TASKS = DATABASE  # no worker runs: the upload waits until the test runs it
    _log_in_staff(page)
    page.goto(page.base + "/upload/")
    shard = (FIXTURES / "modelrecord" / "modeleval-dynamic.jsonl").read_bytes()
    send_files(page, ("modeleval-live.jsonl", shard))
    state = page.locator("#report .upload-state")
    state.locator("h2", has_text="queued").wait_for()
    up = Upload.objects.get(source="web")
    assert page.url.endswith(up.get_absolute_url())  # pushed: a reload opens the upload's page
    _shots(page, tmp_path, "upload-queued")

    check_layout(page, "/queue/")
    assert "1 waiting" in page.locator("main").inner_text()
    _shots(page, tmp_path, "queue")

    # A worker takes it: it is running, a shard part read (as the worker's reporter writes it).
    Upload.objects.filter(pk=up.pk).update(
        status="running",
        tries=1,
        progress={
            "bytes_total": len(shard),
            "file": "modeleval-live.jsonl",
            "shard_bytes": [len(shard) // 2, len(shard)],
            "shards_done": 0,
            "attempts_done": 0,
        },
    )
    page.goto(page.base + up.get_absolute_url())  # the reload, on the upload's own page
    running = page.locator(".upload-state h2", has_text="running")
    running.wait_for()
    assert "modeleval-live.jsonl" in page.locator(".upload-state").inner_text()
    _shots(page, tmp_path, "upload-running")

    Upload.objects.filter(pk=up.pk).update(status="queued")
    assert run_upload(up.pk) == "done"
    page.locator(".upload-state h2", has_text="done").wait_for(timeout=15000)
    text = page.locator(".upload-state").inner_text()
    assert "run-fixture-dynamic" in text and "modeleval-live.jsonl" in text
    # Done: the part stops asking.
    assert page.locator(".upload-state[hx-trigger]").count() == 0
    _shots(page, tmp_path, "upload-done")
    assert page.problems == [], page.problems


def test_recent_uploads_catch_up_in_place_when_a_refused_upload_ends(page, settings):
    settings.TASKS = DATABASE  # no worker runs: the upload waits until the test runs it
    _log_in_staff(page)
    page.goto(page.base + "/upload/")
    bad = (FIXTURES / "hostile" / "modeleval-unknown-field.jsonl").read_bytes()
    send_files(page, ("modeleval-bad.jsonl", bad))
    page.locator("#report .upload-state h2", has_text="queued").wait_for()
    up = Upload.objects.get(source="web")
    row = page.locator("#recent-uploads tbody tr", has_text=str(up.pk)).first
    assert "queued" in row.inner_text()  # not "nothing": it has not ended yet
    assert run_upload(up.pk) == "done"
    page.locator("#report .upload-state h2", has_text="done").wait_for(timeout=15000)
    page.locator("#report .errors", has_text="unknown field").wait_for()
    # Without a reload: the row says what the upload came to.
    row = page.locator("#recent-uploads tbody tr", has_text=str(up.pk)).first
    cells = row.locator("td")
    assert cells.nth(4).inner_text().strip() == "nothing"
    assert cells.nth(6).inner_text().strip() == "1"
    assert page.locator("#recent-uploads").count() == 1
    assert page.problems == [], page.problems
