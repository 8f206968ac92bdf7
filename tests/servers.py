"""What the tests that start real processes (gunicorn, runserver, `db_worker`) share: the test
database's address for a child process, a task worker on it, a multipart upload body, and
polling with a bound. Starting and stopping is `records.devtools.servers`, which the screenshots
use too."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable
from typing import IO

from django.db import connection

from records.devtools.servers import child_env, worker_command


def database_url() -> str:
    """The address of the database this test runs on, for a process of its own."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}"


def task_env(**settings: str) -> dict[str, str]:
    """A child's environment on this test's database, its tasks queued in that database."""
    return child_env(database_url(), EVALDASH_TASK_BACKEND="database", **settings)


def start_worker(
    env: dict[str, str], *extra: str, interval: float = 0.1, log: IO | None = None
) -> subprocess.Popen:
    """A `db_worker` process on `env`; its output goes to `log` when given."""
    output = {"stdout": log, "stderr": subprocess.STDOUT} if log is not None else {}
    return subprocess.Popen(worker_command(interval, *extra), env=env, **output)


def real_worker(*extra: str) -> subprocess.Popen:
    """A `db_worker` on this test's database, quick to call a silent worker's task stale."""
    return start_worker(task_env(EVALDASH_TASK_STALE_SECONDS="2"), *extra)


def until(condition: Callable[[], object], what: str, seconds: float = 60) -> None:
    """Poll until `condition()` holds; a bound that only ends a hung test, not a timed claim."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def multipart(name: str, data: bytes) -> tuple[bytes, str]:
    """A form body carrying `data` as the file field `file` named `name`, and its content type."""
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    )
    body = head.encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"
