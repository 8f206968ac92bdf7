"""The upload page and API parse each file of the body into the uploads storage's own directory as
the bytes arrive (no database write meanwhile), and the storage takes it by a rename (no second
copy): what is kept reads back byte for byte through the storage, and a body that fails or ends
early keeps no file and no row and queues nothing. Nothing here is timed."""

from __future__ import annotations

import io
import os
import uuid

import pytest
from django.db import connection

from evaldash.uploads import IncomingFileUploadHandler
from records.models import ApiToken, Run, Upload
from records.tasks import pending
from tests.conftest import files_under
from tests.test_tasks import DUMMY, GOOD, task_shard

pytestmark = pytest.mark.django_db


def _body(*parts: tuple[str, str, bytes], close: bool = True) -> tuple[bytes, str]:
    """A multipart body of (field, filename, bytes) parts, its last boundary left off unless
    `close`."""
    boundary = uuid.uuid4().hex
    out = b""
    for field, name, data in parts:
        out += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
                f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            + data
            + b"\r\n"
        )
    if close:
        out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


class _Input(io.RawIOBase):
    """A request body read by the server: it calls `after(bytes read)` on each read, and, given
    `fail_at`, breaks off there as a socket does when the client goes away."""

    def __init__(self, data: bytes, after=None, fail_at: int | None = None) -> None:
        self.data, self.pos, self.after, self.fail_at = data, 0, after, fail_at

    def read(self, size: int = -1) -> bytes:
        if self.fail_at is not None and self.pos >= self.fail_at:
            raise OSError("connection reset by peer")
        end = len(self.data) if size is None or size < 0 else self.pos + size
        if self.fail_at is not None:
            end = min(end, self.fail_at)
        piece = self.data[self.pos : end]
        self.pos += len(piece)
        if self.after:
            self.after(self.pos)
        return piece

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


def _send(client, raw: str, body: bytes, kind: str, **wsgi):
    return client.generic(
        "POST",
        "/api/v1/uploads",
        body,
        content_type=kind,
        headers={"Authorization": f"Bearer {raw}"},
        **wsgi,
    )


def _read_back(upload: Upload) -> dict[str, bytes]:
    out = {}
    for item in pending.pending_inputs(upload):
        with item.open() as fh:
            out[item.name] = fh.read()
    return out


@pytest.fixture
def queued_only(settings):
    settings.TASKS = DUMMY  # nothing ingests: the kept bytes stay to be read


def test_files_kept_in_the_storage_read_back_byte_identical(client, upload_dir, queued_only):
    one, two, empty = task_shard(1), GOOD, b""
    _, raw = ApiToken.issue("ci")
    body, kind = _body(
        ("file", "modeleval-1.jsonl", one),
        ("files", "modeleval-2.jsonl", two),
        ("file", "empty.jsonl", empty),
    )
    r = _send(client, raw, body, kind)
    assert r.status_code == 202, r.content
    up = Upload.objects.get(pk=r.json()["upload"])
    assert up.status == "queued" and up.progress["bytes_total"] == len(one + two)
    assert _read_back(up) == {
        "modeleval-1.jsonl": one,
        "modeleval-2.jsonl": two,
        "empty.jsonl": b"",
    }
    # The row names the stored files; the storage holds them and nothing else (no part left in
    # its incoming directory).
    assert [f["size"] for f in up.files] == [len(one), 0, len(two)]  # "file", then "files"
    assert files_under(upload_dir) == sorted(f["stored"] for f in up.files)


def test_the_body_is_parsed_into_the_storage_and_moved_into_place_not_copied(
    client, monkeypatch, upload_dir, queued_only
):
    monkeypatch.setattr(IncomingFileUploadHandler, "chunk_size", 32 * 1024)  # reads of the body
    data = task_shard(3, attempts=200)
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-3.jsonl", data))
    incoming = upload_dir / pending.INCOMING
    seen: list[tuple[int, list[str], int]] = []  # (bytes read, files being written, rows)

    outer = len(connection.atomic_blocks)  # the test's own transaction

    def watch(pos: int) -> None:
        names = os.listdir(incoming) if incoming.exists() else []
        # No transaction of the request's is open while its body arrives (on SQLite one would
        # hold the write lock against every other writer for as long as a slow client sends).
        assert len(connection.atomic_blocks) == outer
        seen.append((pos, names, Upload.objects.count()))

    inodes = {}
    real = pending.keep_files

    def keep(files):
        inodes.update({f.name: os.stat(f.temporary_file_path()).st_ino for _, f in files})
        return real(files)

    monkeypatch.setattr("records.views.uploads.keep_files", keep)
    r = _send(client, raw, body, kind, **{"wsgi.input": _Input(body, after=watch)})
    assert r.status_code == 202, r.content
    # Half way through the body its file is being written in the storage's own directory, and
    # nothing is in the database yet.
    half = [(names, rows) for pos, names, rows in seen if pos <= len(body) // 2]
    assert half and len(half[-1][0]) == 1 and half[-1][1] == 0
    up = Upload.objects.get(pk=r.json()["upload"])
    (kept,) = up.files
    # The stored file is the very file the body was parsed into: renamed, not copied.
    assert os.stat(upload_dir / kept["stored"]).st_ino == inodes["modeleval-3.jsonl"]
    assert _read_back(up) == {"modeleval-3.jsonl": data}
    assert os.listdir(incoming) == []


def test_a_client_gone_mid_body_leaves_nothing_and_queues_nothing(client, monkeypatch, upload_dir):
    enqueued = []
    monkeypatch.setattr("records.tasks.enqueue_upload", enqueued.append)
    _, raw = ApiToken.issue("ci")
    body, kind = _body(
        ("file", "modeleval-1.jsonl", task_shard(1)), ("file", "b.jsonl", task_shard(2))
    )
    stream = _Input(body, fail_at=len(body) * 3 // 4)  # in the second file, the first one whole
    with pytest.raises(OSError):
        _send(client, raw, body, kind, **{"wsgi.input": stream})
    assert not Upload.objects.exists() and files_under(upload_dir) == []
    assert enqueued == []


def test_a_body_that_ends_before_its_last_boundary_keeps_not_even_its_whole_files(
    client, monkeypatch, upload_dir
):
    enqueued = []
    monkeypatch.setattr("records.tasks.enqueue_upload", enqueued.append)
    _, raw = ApiToken.issue("ci")
    whole, _ = _body(("file", "a.jsonl", task_shard(1)))
    body, kind = _body(
        ("file", "a.jsonl", task_shard(1)), ("file", "b.jsonl", task_shard(2)), close=False
    )
    cut = body[: len(body) - 5000]
    r = _send(client, raw, cut, kind)
    assert r.status_code == 400 and "file" in r.json()["error"]
    assert not Upload.objects.exists() and files_under(upload_dir) == []
    assert enqueued == [] and len(whole) < len(cut)  # the first file had arrived whole


def test_a_failure_after_the_files_are_moved_deletes_them_and_keeps_no_row(
    client, monkeypatch, upload_dir
):
    moved = []
    real = pending.keep_files

    def keep(files):
        moved.extend(real(files))
        return moved

    def broken(self, *args, **kwargs):
        raise RuntimeError("the database is unavailable")

    monkeypatch.setattr("records.views.uploads.keep_files", keep)
    monkeypatch.setattr(Upload, "save", broken)
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-1.jsonl", task_shard(1)), ("file", "b.jsonl", GOOD))
    with pytest.raises(RuntimeError):
        _send(client, raw, body, kind)
    assert len(moved) == 2  # both were in the storage before the row failed
    assert not Upload.objects.exists() and files_under(upload_dir) == []


def test_a_failure_moving_the_second_file_deletes_the_first(client, monkeypatch, upload_dir):
    storage = pending.upload_storage()
    real, saved = type(storage).save, []

    def save(self, name, content, *args, **kwargs):
        if saved:
            raise OSError("no space left on device")
        saved.append(real(self, name, content, *args, **kwargs))
        return saved[-1]

    monkeypatch.setattr(type(storage), "save", save)
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-1.jsonl", task_shard(1)), ("file", "b.jsonl", GOOD))
    with pytest.raises(OSError):
        _send(client, raw, body, kind)
    assert len(saved) == 1 and not Upload.objects.exists() and files_under(upload_dir) == []


def test_files_under_other_field_names_are_skipped_unread(client, upload_dir, queued_only):
    _, raw = ApiToken.issue("ci")
    body, kind = _body(
        ("attachment", "notes.txt", b"x" * 10_000),
        ("file", "a.jsonl", GOOD),
        ("attachment", "more.txt", b"y" * 10_000),
    )
    r = _send(client, raw, body, kind)
    assert r.status_code == 202
    up = Upload.objects.get(pk=r.json()["upload"])
    assert _read_back(up) == {"a.jsonl": GOOD}
    assert files_under(upload_dir) == [up.files[0]["stored"]]
    body, kind = _body(("attachment", "notes.txt", GOOD))
    r = _send(client, raw, body, kind)
    assert r.status_code == 400 and Upload.objects.count() == 1


def test_an_upload_is_ingested_from_the_storage_and_its_files_deleted(client, upload_dir):
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-1.jsonl", task_shard(1)))
    r = _send(client, raw, body, kind)  # the test backend has ingested it on return
    assert r.status_code == 200 and r["Location"] == f"/api/v1/uploads/{r.json()['upload']}"
    r = client.get(r["Location"], headers={"Authorization": f"Bearer {raw}"})
    assert r.json()["status"] == "done" and r.json()["stored"][0]["run_id"] == "task-1"
    assert files_under(upload_dir) == []


def test_the_upload_page_takes_the_same_path(client, uploader, monkeypatch, upload_dir):
    from django.core.files.uploadedfile import SimpleUploadedFile

    seen = []
    real = pending.keep_files

    def keep(files):
        seen.extend(os.path.dirname(f.temporary_file_path()) for _, f in files)
        return real(files)

    monkeypatch.setattr("records.views.uploads.keep_files", keep)
    r = client.post("/upload/", {"file": SimpleUploadedFile("modeleval-a.jsonl", GOOD)})
    assert r.status_code == 200 and Run.objects.count() == 1
    assert seen == [str(upload_dir / pending.INCOMING)]
    assert files_under(upload_dir) == []


def test_the_upload_page_with_its_csrf_check_enforced_takes_the_same_path(uploader, upload_dir):
    # As a browser sends it: the CSRF check reads the body, so the page sets its handler first.
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(uploader)
    strict.get("/upload/")
    token = strict.cookies["csrftoken"].value
    r = strict.post(
        "/upload/",
        {"file": SimpleUploadedFile("modeleval-a.jsonl", GOOD), "csrfmiddlewaretoken": token},
    )
    assert r.status_code == 200 and Run.objects.count() == 1
    up = Upload.objects.get()
    assert up.source == "web" and up.files[0]["name"] == "modeleval-a.jsonl"
    assert files_under(upload_dir) == []


def test_the_upload_page_still_checks_csrf_and_keeps_nothing_without_it(
    uploader, upload_dir, django_user_model
):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(uploader)
    r = strict.post("/upload/", {"file": SimpleUploadedFile("modeleval-a.jsonl", GOOD)})
    assert r.status_code == 403 and not Run.objects.exists()
    assert files_under(upload_dir) == []


def test_a_part_a_killed_server_left_in_the_incoming_directory_is_swept(upload_dir):
    incoming = upload_dir / pending.INCOMING
    incoming.mkdir()
    old, fresh = incoming / "tmpold.upload", incoming / "tmpfresh.upload"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    long_ago = os.stat(old).st_mtime - pending.STALE_INCOMING_SECONDS - 10
    os.utime(old, (long_ago, long_ago))
    assert pending.sweep_incoming() == 1
    assert os.listdir(incoming) == ["tmpfresh.upload"]  # one still being written stays


def test_files_no_unfinished_upload_names_are_swept_once_stale(upload_dir):
    # A process killed between moving an upload's files into place and committing it leaves
    # them named by no row; a queued upload's files stay however old they are.
    queued = Upload.objects.create(source="api", status="queued")
    queued.files = pending.keep_files([("a.jsonl", io.BytesIO(GOOD))])
    queued.save()
    lost = pending.keep_files([("b.jsonl", io.BytesIO(GOOD)), ("c.jsonl", io.BytesIO(b"x"))])
    fresh = pending.keep_files([("d.jsonl", io.BytesIO(GOOD))])
    later = os.stat(upload_dir / lost[0]["stored"]).st_mtime + pending.STALE_INCOMING_SECONDS + 10
    for kept in (lost, queued.files):
        where = upload_dir / kept[0]["stored"].partition("/")[0]
        old = later - pending.STALE_INCOMING_SECONDS - 20
        os.utime(where, (old, old))
    fresh_dir = upload_dir / fresh[0]["stored"].partition("/")[0]
    os.utime(fresh_dir, (later, later))
    assert pending.sweep_storage(now=later) == 2
    assert files_under(upload_dir) == sorted(f["stored"] for f in queued.files + fresh)
