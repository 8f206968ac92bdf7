"""Waiting requests do not starve pages: docs/production.md's gunicorn command, run as written
(gthread) on a loopback port, holds four `?wait=` uploads (no worker yet, so they wait) and
still answers pages; a task worker started then lets all four answer done. Bounded in count and
time; nothing here asserts a duration."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.db import connection

from records.models import ApiToken, Upload
from tests.builders import synth_run

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.load, pytest.mark.django_db(transaction=True)]
WAITERS = 4


def production_command() -> list[str]:
    text = (ROOT / "docs" / "production.md").read_text()
    found = re.search(r"```sh\n(gunicorn [^`]+?)\n(?=python manage.py db_worker)", text)
    assert found, "docs/production.md shows no gunicorn command beside its worker"
    return found.group(1).replace("\\\n", " ").split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}"


def _multipart(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_four_waiting_uploads_leave_the_production_server_answering_pages(tmp_path):
    args = production_command()
    port = _free_port()
    args[args.index("--bind") + 1] = f"127.0.0.1:{port}"
    assert "gthread" in args
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DATABASE_URL": _database_url(),
        "EVALDASH_TASK_BACKEND": "database",
        "EVALDASH_INSECURE_DEV_KEY": "1",
        "EVALDASH_PUBLIC_READ": "1",
        "EVALDASH_SECURE_COOKIES": "0",
        "EVALDASH_API_WAITERS": str(WAITERS),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    _, raw = ApiToken.issue("load")
    base = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / args[0]), *args[1:]],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    worker = None
    answers: dict[int, tuple[int, dict]] = {}

    def upload(i: int) -> None:
        body, kind = _multipart(
            f"modeleval-{i}.jsonl", synth_run(f"load-{i}", seed=i, max_attempts=60)
        )
        request = urllib.request.Request(
            f"{base}/api/v1/uploads?wait=120",
            data=body,
            headers={"Authorization": f"Bearer {raw}", "Content-Type": kind},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=180) as r:
                answers[i] = (r.status, json.load(r))
        except urllib.error.HTTPError as exc:
            answers[i] = (exc.code, json.load(exc))

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/login/", timeout=5).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "no server"
                time.sleep(0.2)
        clients = [threading.Thread(target=upload, args=(i,)) for i in range(WAITERS)]
        for c in clients:
            c.start()
        # Every upload is kept and queued, and no worker runs: all four requests are waiting.
        deadline = time.monotonic() + 120
        while Upload.objects.filter(status="queued").count() < WAITERS:
            assert time.monotonic() < deadline, "the uploads were not all queued"
            time.sleep(0.1)
        for path in ["/", "/keys/", "/login/", "/api/v1/uploads/1"]:
            try:
                with urllib.request.urlopen(base + path, timeout=30) as r:
                    status = r.status
            except urllib.error.HTTPError as exc:
                status = exc.code  # the API's 401 (no token) is an answer too
            assert status in (200, 401), path
        assert all(c.is_alive() for c in clients) and answers == {}  # still held
        worker = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "db_worker", "--interval", "0.2"]
            + ["--no-startup-delay", "--no-reload", "--verbosity", "0"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for c in clients:
            c.join(timeout=180)
        assert sorted(answers) == list(range(WAITERS))
        for status, body in answers.values():
            assert status == 200 and body["status"] == "done", body
            assert body["stored"][0]["run_id"].startswith("load-")
    finally:
        for proc in (worker, server):
            if proc is not None:
                _stop(proc)
        log.close()
