"""The upload API streams each file of its body into the upload's chunk rows as the bytes arrive
(no temporary file, no second copy), in one transaction: what is kept reads back byte for byte,
and a body that fails or ends early keeps nothing and queues nothing. Nothing here is timed."""

from __future__ import annotations

import io
import uuid

import pytest

from evaldash.uploads import ChunkRowsUploadHandler
from records.models import ApiToken, Upload
from records.models.intake import PendingChunk
from records.tasks import pending
from tests.test_tasks import DUMMY, GOOD, _shard

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


def test_files_kept_in_many_chunks_read_back_byte_identical(client, monkeypatch, queued_only):
    monkeypatch.setattr(pending, "CHUNK_BYTES", 4096)
    one, two, exact = _shard(1), GOOD, _shard(2)[: 4096 * 3]  # the last fills its chunks exactly
    _, raw = ApiToken.issue("ci")
    body, kind = _body(
        ("file", "modeleval-1.jsonl", one),
        ("files", "modeleval-2.jsonl", two),
        ("file", "modeleval-3.jsonl", exact),
        ("file", "empty.jsonl", b""),
    )
    r = _send(client, raw, body, kind)
    assert r.status_code == 202, r.content
    up = Upload.objects.get(pk=r.json()["upload"])
    assert up.status == "queued" and up.progress["bytes_total"] == len(one + two + exact)
    assert _read_back(up) == {
        "modeleval-1.jsonl": one,
        "modeleval-2.jsonl": two,
        "modeleval-3.jsonl": exact,
        "empty.jsonl": b"",
    }
    sizes = {}
    for name, size in PendingChunk.objects.values_list("name", "data"):
        sizes.setdefault(name, []).append(len(size))
    # Every chunk is whole but a file's last, and a file that fills its chunks has no empty tail.
    assert sizes["modeleval-3.jsonl"] == [4096, 4096, 4096]
    assert sizes["empty.jsonl"] == [0]
    assert all(n == 4096 for n in sizes["modeleval-1.jsonl"][:-1])
    assert len(sizes["modeleval-1.jsonl"]) == -(-len(one) // 4096)


def test_the_body_goes_into_chunk_rows_while_it_arrives_and_never_to_a_temporary_file(
    client, monkeypatch, queued_only
):
    monkeypatch.setattr(pending, "CHUNK_BYTES", 64 * 1024)
    monkeypatch.setattr(ChunkRowsUploadHandler, "chunk_size", 32 * 1024)  # reads of the body

    def no_spooling(*args, **kwargs):
        raise AssertionError("the upload was spooled to a temporary file")

    monkeypatch.setattr("evaldash.uploads.tempfile.TemporaryFile", no_spooling)
    data = _shard(3, attempts=200)
    assert len(data) > 8 * 64 * 1024
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-3.jsonl", data))
    seen: list[tuple[int, int]] = []  # (bytes read of the body, chunk rows written by then)
    stream = _Input(body, after=lambda pos: seen.append((pos, PendingChunk.objects.count())))
    r = _send(client, raw, body, kind, **{"wsgi.input": stream})
    assert r.status_code == 202, r.content
    # Half way through the body, chunks are already written: nothing waits for the whole body.
    half = [rows for pos, rows in seen if pos <= len(body) // 2]
    assert half and half[-1] >= 2
    up = Upload.objects.get(pk=r.json()["upload"])
    assert _read_back(up) == {"modeleval-3.jsonl": data}


def test_a_client_gone_mid_body_leaves_nothing_and_queues_nothing(client, monkeypatch, settings):
    monkeypatch.setattr(pending, "CHUNK_BYTES", 4096)
    enqueued = []
    monkeypatch.setattr("records.tasks.enqueue_upload", enqueued.append)
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-1.jsonl", _shard(1)), ("file", "b.jsonl", _shard(2)))
    stream = _Input(body, fail_at=len(body) * 3 // 4)  # in the second file, many chunks in
    with pytest.raises(OSError):
        _send(client, raw, body, kind, **{"wsgi.input": stream})
    assert not Upload.objects.exists() and not PendingChunk.objects.exists()
    assert enqueued == []


def test_a_body_that_ends_before_its_last_boundary_keeps_not_even_its_whole_files(
    client, monkeypatch
):
    monkeypatch.setattr(pending, "CHUNK_BYTES", 4096)
    enqueued = []
    monkeypatch.setattr("records.tasks.enqueue_upload", enqueued.append)
    _, raw = ApiToken.issue("ci")
    whole, _ = _body(("file", "a.jsonl", _shard(1)))
    body, kind = _body(("file", "a.jsonl", _shard(1)), ("file", "b.jsonl", _shard(2)), close=False)
    cut = body[: len(body) - 5000]
    r = _send(client, raw, cut, kind)
    assert r.status_code == 400 and "file" in r.json()["error"]
    assert not Upload.objects.exists() and not PendingChunk.objects.exists()
    assert enqueued == [] and len(whole) < len(cut)  # the first file had arrived whole


def test_a_failure_after_the_bytes_are_written_keeps_nothing(client, monkeypatch):
    monkeypatch.setattr(pending, "CHUNK_BYTES", 4096)

    def broken(*args, **kwargs):
        raise RuntimeError("the queue is unavailable")

    monkeypatch.setattr("records.views.uploads.queue_kept", broken)
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-1.jsonl", _shard(1)))
    with pytest.raises(RuntimeError):
        _send(client, raw, body, kind)
    assert not Upload.objects.exists() and not PendingChunk.objects.exists()


def test_files_under_other_field_names_are_skipped_unread(client, queued_only):
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("attachment", "notes.txt", b"x" * 10_000), ("file", "a.jsonl", GOOD))
    r = _send(client, raw, body, kind)
    assert r.status_code == 202
    up = Upload.objects.get(pk=r.json()["upload"])
    assert _read_back(up) == {"a.jsonl": GOOD}
    body, kind = _body(("attachment", "notes.txt", GOOD))
    r = _send(client, raw, body, kind)
    assert r.status_code == 400 and Upload.objects.count() == 1


def test_a_streamed_upload_is_ingested_as_before(client):
    _, raw = ApiToken.issue("ci")
    body, kind = _body(("file", "modeleval-1.jsonl", _shard(1)))
    r = _send(client, raw, body, kind)  # the test backend has ingested it on return
    assert r.status_code == 200 and r["Location"] == f"/api/v1/uploads/{r.json()['upload']}"
    r = client.get(r["Location"], headers={"Authorization": f"Bearer {raw}"})
    assert r.json()["status"] == "done" and r.json()["stored"][0]["run_id"] == "task-1"
    assert not PendingChunk.objects.exists()
