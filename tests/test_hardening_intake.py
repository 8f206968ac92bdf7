"""Intake under hostile input: tar metadata read within bounds, every archive entry counted,
stored names cut short, every /api/ answer JSON (errors included), and slow clients that do not
hold the server."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from records.models import Run, ShardFile, Upload
from tests.builders import ingest_bytes

GOOD = (Path(__file__).parent / "fixtures" / "modelrecord" / "modeleval-dynamic.jsonl").read_bytes()
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
MAX_TAR_HEADER_BYTES = 64 * 1024  # records.ingest.archives.MAX_TAR_HEADER_BYTES
NAME_CHARS = 300  # records.ingest.inputs.NAME_CHARS


def _tar(*members: tuple[tarfile.TarInfo, bytes], **options) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=1, **options) as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _dir(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, b""


def _summary_chars() -> int:
    return len(json.dumps(Upload.objects.get().summary))


# --- Tar metadata is read within bounds ------------------------------------------------------


@pytest.mark.django_db
def test_it_refuses_a_pax_header_over_the_bound_unread_and_stores_nothing_of_the_archive():
    # A name of 8 MB travels in a pax extended header (tarfile writes one for a long name).
    long = "d" * (8 * 1024 * 1024) + "/modeleval-a.jsonl"
    data = _tar((tarfile.TarInfo(long), GOOD), format=tarfile.PAX_FORMAT)
    report = ingest_bytes(("artifact.tar.gz", data), ("modeleval-good.jsonl", GOOD))
    (refused,) = report.refused
    assert refused["file"] == "artifact.tar.gz"
    assert "a pax extended header of 8,388," in refused["message"]
    assert f"past {MAX_TAR_HEADER_BYTES:,} bytes" in refused["message"]
    assert [s["file"] for s in report.stored] == ["modeleval-good.jsonl"]
    assert not report.ignored
    assert _summary_chars() < 5_000


@pytest.mark.django_db
def test_it_refuses_a_gnu_long_name_over_the_bound_from_the_committed_fixture():
    data = (HOSTILE / "artifact-gnu-long-name.tar.gz").read_bytes()
    report = ingest_bytes(("artifact-gnu-long-name.tar.gz", data))
    (refused,) = report.refused
    assert "a GNU long name header of 1,048,576 bytes at byte 0" in refused["message"]
    assert not report.stored and not report.ignored and not Run.objects.exists()


@pytest.mark.django_db
def test_it_refuses_pax_global_headers_that_add_up_past_the_bound():
    comment = {"comment": "c" * (MAX_TAR_HEADER_BYTES + 1)}
    data = _tar((tarfile.TarInfo("modeleval-a.jsonl"), GOOD), format=tarfile.PAX_FORMAT,
                pax_headers=comment)  # fmt: skip
    report = ingest_bytes(("artifact.tar.gz", data))
    (refused,) = report.refused
    assert "a pax global header" in refused["message"] and not report.stored


@pytest.mark.django_db
def test_it_refuses_a_gnu_sparse_entry_whose_extension_blocks_it_would_read_without_end():
    info = tarfile.TarInfo("modeleval-a.jsonl")
    info.type = tarfile.GNUTYPE_SPARSE
    data = _tar((info, GOOD), format=tarfile.GNU_FORMAT)
    report = ingest_bytes(("artifact.tar.gz", data))
    (refused,) = report.refused
    assert "GNU sparse file" in refused["message"] and not report.stored


@pytest.mark.django_db
def test_metadata_within_the_bound_is_read_as_before():
    name = "d" * 2_000 + "/modeleval-a.jsonl"
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        Run.objects.all().delete()
        ShardFile.objects.all().delete()
        report = ingest_bytes(("a.tar.gz", _tar((tarfile.TarInfo(name), GOOD), format=fmt)))
        assert not report.refused and len(report.stored) == 1


# --- Every entry counts against the member limit ---------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_directory_entries_count_against_the_member_limit_in_tar_and_zip_alike(settings, kind):
    settings.EVALDASH_MAX_ARCHIVE_MEMBERS = 20
    dirs = [f"d{i}/" for i in range(25)]
    if kind == "tar":
        data = _tar(*[_dir(d) for d in dirs], (tarfile.TarInfo("modeleval-a.jsonl"), GOOD))
        name = "artifact.tar.gz"
    else:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for d in dirs:
                z.writestr(d, b"")
            z.writestr("modeleval-a.jsonl", GOOD)
        data, name = out.getvalue(), "artifact.zip"
    report = ingest_bytes((name, data))
    (refused,) = report.refused
    assert "at most 20 are read (EVALDASH_MAX_ARCHIVE_MEMBERS)" in refused["message"]
    assert not report.stored and not Run.objects.exists()


# --- Names are stored cut short ---------------------------------------------------------------


def _assert_cut(name: str) -> None:
    assert len(name) == NAME_CHARS and "\u2026" in name, name[:80]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_long_entry_names_are_stored_cut_with_an_ellipsis_in_summary_refusals_and_shards(kind):
    deep = "d" * 40_000
    names = [f"{deep}/modeleval-a.jsonl", f"{deep}/notes.txt", f"/{deep}/modeleval-b.jsonl"]
    if kind == "tar":
        data = _tar(*[(tarfile.TarInfo(n), GOOD) for n in names], format=tarfile.PAX_FORMAT)
        archive = "artifact.tar.gz"
    else:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for n in names:
                z.writestr(n, GOOD)
        data, archive = out.getvalue(), "artifact.zip"
    report = ingest_bytes((archive, data))
    (stored,), (ignored,), (refused,) = report.stored, report.ignored, report.refused
    for name in (stored["file"], ignored["file"], refused["file"]):
        _assert_cut(name)
        assert name.startswith(f"{archive}!")
    assert stored["file"].endswith("/modeleval-a.jsonl")
    assert ignored["file"].endswith("/notes.txt")
    assert "path is absolute" in refused["message"]
    _assert_cut(ShardFile.objects.get().name)
    assert _summary_chars() < 5_000


def test_a_short_name_is_kept_whole_and_a_long_one_keeps_its_start_and_end():
    from records.ingest.inputs import shown_name

    assert shown_name("modeleval-a.jsonl") == "modeleval-a.jsonl"
    cut = shown_name("a" * 1_000 + "modeleval-z.jsonl")
    assert cut.startswith("aaa") and cut.endswith("aaamodeleval-z.jsonl") and len(cut) == 300


# --- Every /api/ answer is JSON, errors included ------------------------------------------------

API_POSTS = ["/api/v1/uploads", "/api/v1/conformance"]


@pytest.fixture
def bearer(db):
    from records.models import ApiToken

    _, raw = ApiToken.issue("ci")
    return {"Authorization": f"Bearer {raw}"}


def _error(r, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.content[:200])
    assert r["Content-Type"] == "application/json", r["Content-Type"]
    return r.json()["error"]


@pytest.mark.parametrize("path", API_POSTS)
@pytest.mark.parametrize("debug", [False, True])
def test_a_multipart_body_without_a_boundary_is_answered_in_json(client, bearer, settings, path, debug):  # fmt: skip
    settings.DEBUG = debug
    r = client.generic("POST", path, b"--x\r\n", content_type="multipart/form-data", headers=bearer)
    assert "The multipart body cannot be read: Invalid boundary" in _error(r, 400)
    assert not Run.objects.exists()


@pytest.mark.parametrize("path", API_POSTS)
def test_more_files_than_the_limit_are_refused_in_json_by_the_setting_name(client, bearer, path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    files = [SimpleUploadedFile(f"modeleval-{i}.jsonl", b"") for i in range(201)]
    r = client.post(path, {"file": files, "output": files[:1]}, headers=bearer)
    message = _error(r, 400)
    assert "more than 200 files (DATA_UPLOAD_MAX_NUMBER_FILES)" in message
    assert not Upload.objects.filter(summary__has_key="stored").exists()


@pytest.mark.parametrize("path", API_POSTS)
def test_more_fields_than_the_limit_are_refused_in_json_by_the_setting_name(client, bearer, path):
    body = "&".join(f"f{i}=1" for i in range(1_001)).encode()
    r = client.generic(
        "POST", path, body, content_type="application/x-www-form-urlencoded", headers=bearer
    )
    assert "more than 1,000 fields (DATA_UPLOAD_MAX_NUMBER_FIELDS)" in _error(r, 400)


@pytest.mark.parametrize("path", API_POSTS)
def test_form_fields_over_the_memory_limit_are_answered_413_in_json(client, bearer, path):
    body = b"f=" + b"x" * (3 * 1024 * 1024)
    r = client.generic(
        "POST", path, body, content_type="application/x-www-form-urlencoded", headers=bearer
    )
    assert "(DATA_UPLOAD_MAX_MEMORY_SIZE)" in _error(r, 413)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("get", "/api/v1/uploads", "POST"),
        ("get", "/api/v1/conformance", "POST"),
        ("post", "/api/v1/runs/run-1/gate", "GET"),
        ("delete", "/api/v1/runs/run-1/gate", "GET"),
    ],
)
def test_a_method_an_address_does_not_take_is_answered_405_in_json(client, db, method, path, allowed):  # fmt: skip
    r = getattr(client, method)(path)
    assert allowed in _error(r, 405) and r["Allow"] == allowed


@pytest.mark.parametrize("path", ["/api/v1/nothing", "/api/v1/uploads/", "/api/", "/api/v1/runs/"])
def test_an_unknown_api_address_is_answered_404_in_json(client, db, path):
    assert f"No API address {path} exists." == _error(client.get(path), 404)


def test_a_permission_refused_inside_an_api_view_is_answered_403_in_json(client, bearer, monkeypatch):  # fmt: skip
    from django.core.exceptions import PermissionDenied

    from records.views import gate

    def refuse(*args):
        raise PermissionDenied("not this run")

    monkeypatch.setattr(gate, "resolve", refuse)
    assert _error(client.get("/api/v1/runs/run-1/gate", headers=bearer), 403) == "not this run"


@pytest.mark.parametrize("debug", [False, True])
def test_a_fault_inside_an_api_view_is_answered_500_in_json(bearer, monkeypatch, settings, debug):
    from django.test import Client

    from records.views import gate

    settings.DEBUG = debug

    def fail(*args):
        raise RuntimeError("injected")

    monkeypatch.setattr(gate, "resolve", fail)
    r = Client(raise_request_exception=False).get("/api/v1/runs/run-1/gate", headers=bearer)
    assert "the error is logged" in _error(r, 500)


@pytest.mark.parametrize("path", [*API_POSTS, "/api/v1/runs/run-1/gate"])
def test_a_body_over_the_limit_is_answered_413_in_json_on_every_api_address(client, db, settings, path):  # fmt: skip
    settings.EVALDASH_MAX_UPLOAD_BYTES = settings.EVALDASH_MAX_REQUEST_BYTES = 10
    method = client.get if path.endswith("gate") else client.post
    r = method(path, headers={"Content-Length": "11"})
    assert "Nothing was read." in _error(r, 413)


def test_pages_outside_the_api_keep_their_html_error_pages(client, db):
    r = client.get("/no-such-page/")
    assert r.status_code == 404 and r["Content-Type"].startswith("text/html")


# --- Slow clients do not hold the demo server -------------------------------------------------

ROOT = Path(__file__).parent.parent


def test_scripts_serve_refuses_to_bind_anything_but_loopback():
    import os
    import subprocess

    env = {**os.environ, "EVALDASH_ADDR": "0.0.0.0:8000"}
    done = subprocess.run(
        ["bash", "scripts/serve"], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 2
    assert b"EVALDASH_ADDR=0.0.0.0:8000 is refused" in done.stderr


def test_a_fourth_client_is_answered_while_three_slow_ones_dribble_at_the_demo_server(tmp_path):
    """The server command scripts/serve ends in, started as it starts it (DEBUG=1), with three
    clients sending their headers a byte at a time: a fourth still gets its page."""
    import os
    import re
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    script = (ROOT / "scripts" / "serve").read_text()
    command = re.search(
        r'^(?:exec )?\.venv/bin/python (manage\.py runserver) "\$addr"$', script, re.M
    )
    assert command, "scripts/serve no longer ends in the command this test starts"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "DEBUG": "1",
        "EVALDASH_PUBLIC_READ": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    args = [sys.executable, *command.group(1).split(), "--noreload", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    slow: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while True:  # the server is up once it answers
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "the server did not start in 60 s"
                time.sleep(0.3)
        for _ in range(3):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(c)
        for byte in b"dribbling":  # each slow client is still sending its headers
            for c in slow:
                c.sendall(bytes([byte]))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=20) as r:
            assert r.status == 200 and b"Log in" in r.read()
        for c in slow:  # and the slow ones, once they finish, are answered too
            c.sendall(b"\r\nConnection: close\r\n\r\n")
            assert c.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        for c in slow:
            c.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
