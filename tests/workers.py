"""Real `db_worker` processes for tests: one started on the test database, a condition waited
for with a bound, and a worker stopped as its supervisor would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}"


def start_worker(*extra: str) -> subprocess.Popen:
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DATABASE_URL": database_url(),
        "EVALDASH_TASK_BACKEND": "database",
        "EVALDASH_TASK_STALE_SECONDS": "2",
        "EVALDASH_INSECURE_DEV_KEY": "1",
        "DEBUG": "0",
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "db_worker", "--interval", "0.1"]
        + ["--no-startup-delay", "--no-reload", "--verbosity", "0", *extra],
        env=env,
    )


def until(condition, what: str, seconds: float = 60) -> None:
    """Poll until `condition()` holds; a bound that only ends a hung test, not a timed claim."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
