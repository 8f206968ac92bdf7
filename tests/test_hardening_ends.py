"""Every upload ends: a run_id no address was ready for, a fault after the shards' commit, a
task that is gone (issue 45, B15)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from records import tasks
from records.models import ApiToken, Run, Upload
from records.tasks import queue_upload, run_upload
from records.tasks.workers import end_abandoned_uploads
from tests.builders import encode, line, shard
from tests.conftest import files_under

DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
DUMMY = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}


def run_shard(run_id: str) -> bytes:
    kinds = ("attempt", "turn", "call", "verify", "session")
    return encode([*(line(k) for k in kinds), line("run", run_id=run_id)])


SLASHED = ["team/nightly/42", "=cmd|' /C calc'!A0", "a\nb", "100%/?#&", "/", "gate"]


@pytest.fixture
def bearer(db):
    _, raw = ApiToken.issue("ci")
    return {"Authorization": f"Bearer {raw}"}


def _post(client, headers, data: bytes, query: str = ""):
    return client.post(
        "/api/v1/uploads" + query,
        {"file": [SimpleUploadedFile("modeleval-1.jsonl", data)]},
        headers=headers,
    )


@pytest.mark.parametrize("run_id", SLASHED)
def test_an_upload_whose_run_id_holds_a_slash_ends_done_with_a_gate_address_that_answers(
    client, bearer, upload_dir, run_id
):
    r = _post(client, bearer, run_shard(run_id), "?wait=30")
    body = r.json()
    assert r.status_code == 200 and body["status"] == "done", body.get("refused")
    (stored,) = body["stored"]
    assert stored["run_id"] == run_id and Upload.objects.get().status == "done"
    assert files_under(upload_dir) == []
    gate = client.get(stored["gate"], headers=bearer)
    assert gate.status_code != 404 and gate["Content-Type"] == "application/json"
    assert gate.json().get("run", run_id) == run_id


def _queued(settings) -> Upload:
    settings.TASKS = DUMMY
    return queue_upload(
        Upload(source="api"),
        [("modeleval-1.jsonl", io.BytesIO(shard()))],
        allow_digest_mismatch=False,
    )


def test_a_fault_naming_the_runs_after_the_commit_still_ends_the_upload_done(
    db, settings, monkeypatch, upload_dir
):
    up = _queued(settings)

    def broken(*args, **kwargs):
        raise ValueError("the summary could not be linked")

    monkeypatch.setattr(tasks, "settle", broken)
    assert run_upload(up.pk) == "done"
    up.refresh_from_db()
    assert [s["run_id"] for s in up.summary["stored"]] == ["run-1"]
    assert Run.objects.count() == 1 and files_under(upload_dir) == []


def test_an_upload_that_cannot_be_marked_done_is_failed_with_the_reason(
    db, settings, monkeypatch, upload_dir
):
    up = _queued(settings)

    def broken(*args, **kwargs):
        raise RuntimeError("no write")

    monkeypatch.setattr(tasks, "_mark_done", broken)
    assert run_upload(up.pk) == "failed"
    up.refresh_from_db()
    assert "stored but it was not marked done: RuntimeError: no write" in up.error
    assert up.finished_at is not None and files_under(upload_dir) == []


def test_the_sweep_queues_again_a_running_upload_whose_task_is_gone_then_fails_it(
    db, settings, upload_dir
):
    settings.TASKS = DATABASE
    settings.EVALDASH_TASK_MAX_TRIES = 2
    long_ago = timezone.now() - timedelta(seconds=600)
    up = Upload.objects.create(source="api", status="running", tries=1, started_at=long_ago)
    live = Upload.objects.create(source="api", status="running", tries=1, started_at=long_ago)
    recent = Upload.objects.create(
        source="api", status="running", tries=1, started_at=timezone.now()
    )
    tasks.ingest_upload.enqueue(live.pk).db_result.claim("w")
    assert end_abandoned_uploads() == [up.pk]
    up.refresh_from_db()
    assert up.status == "queued" and "task ended" in up.error
    queued = DBTaskResult.objects.filter(status="READY", args_kwargs__args=[up.pk])
    assert queued.count() == 1
    # Its tries spent, the next sweep ends it: failed, with the reason.
    queued.delete()
    Upload.objects.filter(pk=up.pk).update(status="running", tries=2)
    assert end_abandoned_uploads() == [up.pk]
    up.refresh_from_db()
    assert up.status == "failed" and up.finished_at is not None
    live.refresh_from_db()
    recent.refresh_from_db()
    assert (live.status, recent.status) == ("running", "running")


def test_a_waiter_is_answered_the_final_state_of_an_upload_the_sweep_ended(
    client, bearer, settings
):
    settings.TASKS = DATABASE
    settings.EVALDASH_TASK_MAX_TRIES = 1
    long_ago = timezone.now() - timedelta(seconds=600)
    up = Upload.objects.create(source="api", status="running", tries=1, started_at=long_ago)
    end_abandoned_uploads()
    r = client.get(f"/api/v1/uploads/{up.pk}?wait=5", headers=bearer)
    assert r.status_code == 500 and r.json()["status"] == "failed"
    assert "task ended" in r.json()["error"]
