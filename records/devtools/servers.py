"""The dashboard's own processes (a web server, a task worker) started on a loopback port and
stopped again: what the screenshots and the tests that drive a real server share. Standard
library only, so a script can use it before Django is set up."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(database_url: str, **settings: str) -> dict[str, str]:
    """The environment of a process serving `database_url`: this one's, less the test runner's
    permit for the ORM inside an event loop, with a development key and production's DEBUG,
    then `settings` on top."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        DATABASE_URL=database_url,
        EVALDASH_INSECURE_DEV_KEY="1",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
    )
    env.update(settings)
    return env


def manage(*args: str) -> list[str]:
    """The command line of `manage.py args...` under this interpreter."""
    return [sys.executable, str(ROOT / "manage.py"), *args]


def worker_command(interval: float, *extra: str) -> list[str]:
    """A task worker that polls every `interval` seconds, starts at once and logs nothing."""
    flags = ["--no-startup-delay", "--no-reload", "--verbosity", "0"]
    return manage("db_worker", "--interval", str(interval), *flags, *extra)


def wait_until_answering(
    url: str, proc: subprocess.Popen | None = None, seconds: float = 60, log: Path | None = None
) -> None:
    """Return once `url` answers (any HTTP status is an answer). Raise, with the server's log
    when there is one, if `proc` ends first or `seconds` pass: a bound, not a timed claim."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()  # noqa: S310 (our own server)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            ended = proc is not None and proc.poll() is not None
            if ended or time.monotonic() > deadline:
                why = "ended" if ended else f"did not answer in {seconds:g} s"
                told = log.read_text() if log is not None and log.exists() else ""
                raise RuntimeError(f"the server at {url} {why}\n{told}") from None
            time.sleep(0.2)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, seconds: float = 20) -> None:
    """Ask `proc` to end with `sig`, and kill it if it has not ended within `seconds`."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
