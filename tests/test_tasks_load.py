"""Waiting requests do not starve pages: docs/production.md's gunicorn command, run as written
(gthread) on a loopback port, holds four `?wait=` uploads (no worker yet, so they wait) and
still answers pages; a task worker started then lets all four answer done. Bounded in count and
time; nothing here asserts a duration."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from records.devtools.servers import ROOT, free_port, stop, wait_until_answering
from records.models import ApiToken, Upload
from tests.builders import synth_run
from tests.servers import multipart, start_worker, task_env, until

pytestmark = [pytest.mark.load, pytest.mark.django_db(transaction=True)]
WAITERS = 4


def production_command() -> list[str]:
    text = (ROOT / "docs" / "production.md").read_text()
    found = re.search(r"```sh\n(gunicorn [^`]+?)\n(?=python manage.py db_worker)", text)
    assert found, "docs/production.md shows no gunicorn command beside its worker"
    return found.group(1).replace("\\\n", " ").split()


def test_four_waiting_uploads_leave_the_production_server_answering_pages(tmp_path):
    args = production_command()
    port = free_port()
    args[args.index("--bind") + 1] = f"127.0.0.1:{port}"
    assert "gthread" in args
    env = task_env(
        EVALDASH_PUBLIC_READ="1", EVALDASH_SECURE_COOKIES="0", EVALDASH_API_WAITERS=str(WAITERS)
    )
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
        body, kind = multipart(
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
        wait_until_answering(base + "/login/", server, log=tmp_path / "server.log")
        clients = [threading.Thread(target=upload, args=(i,)) for i in range(WAITERS)]
        for c in clients:
            c.start()
        # Every upload is kept and queued, and no worker runs: all four requests are waiting.
        until(
            lambda: Upload.objects.filter(status="queued").count() >= WAITERS,
            "every upload queued",
            seconds=120,
        )
        for path in ["/", "/keys/", "/login/", "/api/v1/uploads/1"]:
            try:
                with urllib.request.urlopen(base + path, timeout=30) as r:
                    status = r.status
            except urllib.error.HTTPError as exc:
                status = exc.code  # the API's 401 (no token) is an answer too
            assert status in (200, 401), path
        assert all(c.is_alive() for c in clients) and answers == {}  # still held
        worker = start_worker(env, interval=0.2, log=log)
        for c in clients:
            c.join(timeout=180)
        assert sorted(answers) == list(range(WAITERS))
        for status, body in answers.values():
            assert status == 200 and body["status"] == "done", body
            assert body["stored"][0]["run_id"].startswith("load-")
    finally:
        for proc in (worker, server):
            if proc is not None:
                stop(proc, seconds=30)
        log.close()
