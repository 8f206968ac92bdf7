"""How long a large upload takes through the API: the POST (the bytes kept in the database and
the ingest queued), the worker's pick-up delay, and the ingest, beside the same shard ingested
inline by `manage.py ingest` (the code `manage.py bench` times).

    .venv/bin/python scripts/upload_timing.py [--mb 200]

Everything runs in a temporary directory on a fresh SQLite database (or, with DATABASE_URL,
that PostgreSQL database, which must be empty and migrated), gunicorn as docs/production.md
runs it on a loopback port, and one `manage.py db_worker`. It prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
# Attempts per MB of generated shard, roughly (bench's corpus and models).
ATTEMPTS_PER_MB = 156


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200, help="size of the shard to upload")
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evaldash-upload-"))
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{tmp / 'db.sqlite3'}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "EVALDASH_INSECURE_DEV_KEY": "1",
        "EVALDASH_TASK_BACKEND": "database",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "EVALDASH_SECURE_COOKIES": "0",
    }
    sys.path.insert(0, str(ROOT))
    os.environ.update(env)
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evaldash.settings")
    django.setup()
    from records.devtools.bench import generate

    def manage(*args: str) -> str:
        out = subprocess.run([PY, str(ROOT / "manage.py"), *args], env=env, capture_output=True)
        assert out.returncode == 0, out.stderr.decode()
        return out.stdout.decode()

    attempts = int(opts.mb * ATTEMPTS_PER_MB)
    t = time.perf_counter()
    path, _, _ = generate(tmp, attempts, run_id="upload-timing", seed=5)
    size = path.stat().st_size
    figures: dict[str, float | int | str] = {
        "shard_bytes": size,
        "attempts": attempts,
        "generate_s": round(time.perf_counter() - t, 1),
    }

    # The same shard ingested inline, in a database of its own.
    inline_env = {**env, "DATABASE_URL": f"sqlite:///{tmp / 'inline.sqlite3'}"}
    subprocess.run([PY, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=inline_env, check=True)
    t = time.perf_counter()
    subprocess.run(
        [PY, "manage.py", "ingest", "--quiet", str(path)], cwd=ROOT, env=inline_env, check=True
    )
    figures["inline_ingest_s"] = round(time.perf_counter() - t, 1)

    manage("migrate", "-v", "0")
    token = manage("create_token", "timing").split()[-1]
    port = _port()
    log = open(tmp / "server.log", "w")  # noqa: SIM115
    server = subprocess.Popen(
        [str(Path(PY).parent / "gunicorn"), "evaldash.wsgi", "--worker-class", "gthread"]
        + ["--workers", "2", "--threads", "8", "--timeout", "120"]
        + ["--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [PY, str(ROOT / "manage.py"), "db_worker", "--no-reload", "--verbosity", "0"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/login/", timeout=2).close()
                break
            except OSError:
                time.sleep(0.2)
        t = time.perf_counter()
        out = subprocess.run(
            ["curl", "-sS", "-H", f"Authorization: Bearer {token}", "-F", f"file=@{path}"]
            + ["-w", "\n%{http_code} %{time_total}", f"{base}/api/v1/uploads"],
            capture_output=True,
            text=True,
            check=True,
        )
        body, _, tail = out.stdout.rpartition("\n")
        code, seconds = tail.split()
        answered = time.perf_counter() - t
        upload = json.loads(body)
        figures |= {"post_status": int(code), "post_s": round(float(seconds), 2)}
        status_url = upload["url"]
        while True:
            req = urllib.request.Request(status_url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=30) as r:
                state = json.load(r)
            if state["status"] in ("done", "failed"):
                break
            time.sleep(0.2)
        figures["done_after_post_s"] = round(time.perf_counter() - t - answered, 1)
        figures["status"] = state["status"]
        from records.models import Upload

        up = Upload.objects.get(pk=upload["upload"])
        figures["pickup_s"] = round((up.started_at - up.created_at).total_seconds(), 2)
        figures["worker_ingest_s"] = round((up.finished_at - up.started_at).total_seconds(), 1)
    finally:
        for proc in (worker, server):
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        log.close()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
