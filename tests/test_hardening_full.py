"""A full disk is an operational failure, not a refusal (issue 45, B24 and B25): a full uploads
disk is a 507 in JSON with nothing left behind; a full database keeps the upload's bytes, tries
it again later, and tells the waiter 503 "waiting: database full"."""

from __future__ import annotations

import errno

import pytest
from django.core.files.storage import FileSystemStorage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django_tasks_db.models import DBTaskResult

from evaldash.uploads import IncomingFileUploadHandler
from records.ingest.inputs import disk_full
from records.models import ApiToken, Run, Upload
from records.tasks import run_upload
from tests.builders import shard
from tests.conftest import files_under

pytestmark = pytest.mark.django_db
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def bearer(db):
    _, raw = ApiToken.issue("ci")
    return {"Authorization": f"Bearer {raw}"}


def _post(client, headers, query: str = "", path: str = "/api/v1/uploads"):
    files = [SimpleUploadedFile("modeleval-1.jsonl", shard())]
    return client.post(path + query, {"file": files}, headers=headers)


def _no_room(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


class _PostgresDiskFull(Exception):
    sqlstate = "53100"


def _database_full(kind: str) -> Exception:
    if kind == "sqlite":
        return OperationalError("database or disk is full")
    try:
        raise _PostgresDiskFull('could not extend file "base/16384/16385": No space left')
    except _PostgresDiskFull as cause:
        error = OperationalError("could not extend file")
        error.__cause__ = cause
        return error


@pytest.mark.parametrize("where", ["storage", "parse"])
def test_a_full_uploads_disk_is_a_507_in_json_with_nothing_left(
    client, bearer, upload_dir, monkeypatch, where
):
    if where == "storage":
        monkeypatch.setattr(FileSystemStorage, "_save", _no_room)
    else:
        monkeypatch.setattr(IncomingFileUploadHandler, "receive_data_chunk", _no_room)
    r = _post(client, bearer, "?wait=5")
    assert r.status_code == 507 and r["Content-Type"] == "application/json"
    assert "uploads storage is full: nothing of this upload was kept" in r.json()["error"]
    assert r["Retry-After"]
    assert not Upload.objects.exists() and files_under(upload_dir) == []


def test_the_upload_page_says_the_uploads_disk_is_full_with_a_507(
    client, uploader, upload_dir, monkeypatch
):
    monkeypatch.setattr(FileSystemStorage, "_save", _no_room)
    r = _post(client, {}, path="/upload/")
    assert r.status_code == 507 and b"uploads storage is full" in r.content
    assert not Upload.objects.exists() and files_under(upload_dir) == []


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_full_database_keeps_the_bytes_and_tells_the_waiter_503_then_the_retry_stores_it(
    client, bearer, upload_dir, monkeypatch, kind
):
    def full(*args, **kwargs):
        raise _database_full(kind)

    with monkeypatch.context() as full_database:
        full_database.setattr("records.ingest.pipeline.ingest_shard", full)
        r = _post(client, bearer, "?wait=30")
        assert r.status_code == 503 and r["Retry-After"]
        body = r.json()
        assert (body["status"], body["error"]) == ("queued", "waiting: database full")
        assert "refused" not in body
        up = Upload.objects.get()
        assert up.tries == 0 and files_under(upload_dir) != [] and not Run.objects.exists()
        again = client.get(f"/api/v1/uploads/{up.pk}?wait=30", headers=bearer)
        assert again.status_code == 503 and again.json()["error"] == "waiting: database full"
    # Room again: the later try stores it and the bytes go.
    assert run_upload(up.pk) == "done"
    assert Run.objects.count() == 1 and files_under(upload_dir) == []
    r = client.get(f"/api/v1/uploads/{up.pk}", headers=bearer)
    assert r.status_code == 200 and r.json()["status"] == "done"


def test_a_full_database_queues_the_task_to_run_later(settings, monkeypatch, upload_dir):
    from io import BytesIO

    from records.tasks import queue_upload

    settings.TASKS = DATABASE
    settings.EVALDASH_FULL_RETRY_SECONDS = 120
    up = queue_upload(
        Upload(source="api"), [("modeleval-1.jsonl", BytesIO(shard()))], allow_digest_mismatch=False
    )
    DBTaskResult.objects.all().delete()

    def full(*args, **kwargs):
        raise _database_full("sqlite")

    monkeypatch.setattr("records.ingest.pipeline.ingest_shard", full)
    assert run_upload(up.pk) == "queued"
    (later,) = DBTaskResult.objects.filter(status="READY")
    assert later.args_kwargs["args"] == [up.pk]
    assert (later.run_after - later.enqueued_at).total_seconds() >= 119


def test_a_full_database_when_the_upload_is_saved_is_a_503_with_nothing_kept(
    client, bearer, upload_dir, monkeypatch
):
    def full(*args, **kwargs):
        raise _database_full("sqlite")

    monkeypatch.setattr(Upload, "save", full)
    r = _post(client, bearer)
    assert r.status_code == 503 and "database is full" in r.json()["error"]
    assert files_under(upload_dir) == []


def test_a_full_disk_is_told_apart_from_a_bad_file():
    assert disk_full(OSError(errno.ENOSPC, "full")) == "disk"
    assert disk_full(_database_full("sqlite")) == "database"
    assert disk_full(_database_full("postgresql")) == "database"
    assert disk_full(OperationalError("no such table: x")) is None
    assert disk_full(ValueError("line 3 is not JSON")) is None


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_database_that_fills_inside_the_shards_transaction_waits_and_keeps_the_bytes(
    client, bearer, upload_dir, monkeypatch, kind
):
    # Not a stand-in for the whole ingest: the shard is read and its rows written, and the
    # store fills as its outbox row is written, inside its transaction.
    def full(run):
        raise _database_full(kind)

    with monkeypatch.context() as full_database:
        full_database.setattr("records.ingest.shards.queue_index", full)
        r = _post(client, bearer, "?wait=30")
        assert r.status_code == 503, r.content
        assert r.json()["error"] == "waiting: database full" and "refused" not in r.json()
        up = Upload.objects.get()
        assert files_under(upload_dir) != [] and not Run.objects.exists()
    assert run_upload(up.pk) == "done"
    assert Run.objects.count() == 1 and files_under(upload_dir) == []


def test_a_full_disk_while_an_archive_is_copied_out_is_not_a_damaged_archive(monkeypatch):
    import io
    import zipfile

    from records.ingest.archives import expand_archive
    from records.ingest.inputs import IngestReport, Input

    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as z:
        z.writestr("modeleval-1.jsonl", shard())

    def no_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tempfile.SpooledTemporaryFile.write", no_room)
    item = Input("artifact.zip", lambda: io.BytesIO(data.getvalue()))
    with pytest.raises(OSError) as info:
        list(expand_archive(item, "zip", IngestReport()))
    assert disk_full(info.value) == "disk"
