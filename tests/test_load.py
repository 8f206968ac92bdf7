"""Load and faults against a real server process, on loopback only, bounded in count and time.

Each test gets a fresh database of the kind DATABASE_URL names (SQLite when unset) and a
`manage.py runserver` process on a free 127.0.0.1 port. Figures are printed (run pytest -s to see
them); nothing here asserts a duration.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from records.devtools.servers import child_env, free_port, manage, stop, wait_until_answering
from records.devtools.synth import load_demo_key, widen_key, write_run
from tests.servers import multipart

pytestmark = pytest.mark.load


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        base = os.environ.get("DATABASE_URL", "")
        self.pg_admin = None
        if base.startswith("postgres"):
            parts = urllib.parse.urlsplit(base)
            self.db_name = f"evaldash_load_{uuid.uuid4().hex[:8]}"
            self.url = urllib.parse.urlunsplit(parts._replace(path="/" + self.db_name))
            self.pg_admin = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
            self._pg(f'CREATE DATABASE "{self.db_name}"')
        else:
            self.url = f"sqlite:///{tmp / 'load.sqlite3'}"
        self.env = child_env(self.url, EVALDASH_PUBLIC_READ="1", PYTHONUNBUFFERED="1")
        self.manage("migrate", "--verbosity", "0")

    def _pg(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.pg_admin, autocommit=True) as conn:
            conn.execute(sql)

    def manage(self, *args: str, timeout: int = 300) -> str:
        out = subprocess.run(
            manage(*args),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    def count(self, expr: str) -> int:
        code = f"from records.models import *; print({expr})"
        return int(
            self.manage("shell", "--no-imports", "-v", "0", "-c", code).strip().splitlines()[-1]
        )

    def close(self) -> None:
        if self.pg_admin:
            self._pg(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def server(env: Env) -> Iterator[tuple[str, str, subprocess.Popen]]:
    token = env.manage("create_token", "load").split()[-1]
    port = free_port()
    log = open(env.tmp / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        manage("runserver", f"127.0.0.1:{port}", "--noreload"),
        env=env.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(base + "/", proc, log=env.tmp / "server.log")
        yield base, token, proc
    finally:
        stop(proc, signal.SIGINT, seconds=10)
        log.close()


def _shard(seed: int, attempts: int = 40) -> bytes:
    buf = io.BytesIO()
    key = widen_key(load_demo_key(), attempts // 12 + 1)
    write_run(
        buf,
        key,
        run_id=f"load-{seed}",
        commit=f"{seed:040x}",
        started_at=datetime(2026, 11, 1, 9),
        seed=seed,
        repeat=1,
        max_attempts=attempts,
    )
    return buf.getvalue()


def _post(base: str, token: str, name: str, data: bytes) -> tuple[int, dict]:
    body, kind = multipart(name, data)
    req = urllib.request.Request(
        base + "/api/v1/uploads",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": kind},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode(errors="replace")}


def test_sixteen_concurrent_uploads_store_every_distinct_shard_exactly_once(server, env):
    base, token, _ = server
    shards = {f"modeleval-{i}.jsonl": _shard(i) for i in range(8)}
    jobs = [(name, data) for name, data in shards.items() for _ in range(2)]
    barrier = threading.Barrier(len(jobs))
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def go(name: str, data: bytes) -> None:
        barrier.wait(timeout=30)
        got = _post(base, token, name, data)
        with lock:
            results.append(got)

    threads = [threading.Thread(target=go, args=job) for job in jobs]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    elapsed = time.perf_counter() - t0
    statuses = [s for s, _ in results]
    assert len(results) == 16 and statuses == [200] * 16, results
    stored = sum(len(b["stored"]) for _, b in results)
    present = sum(len(b["already_present"]) for _, b in results)
    assert (stored, present) == (8, 8)
    assert env.count("ShardFile.objects.count()") == 8
    assert env.count("Run.objects.count()") == 8
    log = (env.tmp / "server.log").read_text()
    assert "database is locked" not in log and "Traceback" not in log
    print(
        f"\n[load] 16 concurrent uploads in {elapsed:.2f}s = {16 / elapsed:.1f} uploads/s, "
        f"errors: 0 ({env.url.split(':')[0]})"
    )


def _artifact(path: Path, shards: int, attempts: int) -> int:
    total = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for i in range(shards):
            data = _shard(100 + i, attempts)
            total += len(data)
            z.writestr(f"ce/modeleval-{i}.jsonl", data)
    return total


def _children(pid: int) -> list[int]:
    out: list[int] = []
    if not Path("/proc/self/task").exists():
        return out
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as fh:
            out += [int(c) for c in fh.read().split()]
    return out


def _alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_ingest_leaves_no_partial_shard_and_can_be_repeated(env):
    artifact = env.tmp / "artifact.zip"
    _artifact(artifact, shards=3, attempts=1500)
    proc = subprocess.Popen(
        manage("ingest", str(artifact)),
        env=env.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Kill it as soon as it reports progress inside the first shard.
    assert proc.stderr is not None
    workers: list[int] = []
    for line in proc.stderr:
        if "MB" in line:
            workers = _children(proc.pid)
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    # Its parser process sees its input end and ends too, rather than waiting forever.
    if Path("/proc/self/task").exists():
        assert workers, "the shard was parsed by no second process"
    deadline = time.monotonic() + 20
    while [w for w in workers if _alive(w)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)]
    # Whatever was committed is whole: every stored run has all its attempts and totals.
    stored = env.count("ShardFile.objects.count()")
    whole = env.count(
        "sum(1 for r in Run.objects.all() if r.attempt_count == r.attempts.count() "
        "and r.attempt_count > 0)"
    )
    assert stored == whole
    assert env.count("Attempt.objects.filter(run__isnull=True).count()") == 0
    out = env.manage("ingest", "--quiet", str(artifact))
    assert (
        f"{3 - stored} shard{'' if 3 - stored == 1 else 's'} stored" in out
        and f"{stored} already present" in out
    )
    print(f"\n[faults] killed mid-ingest: {stored} whole shard(s) kept, rest re-ingested")


def test_browsing_stays_responsive_while_an_artifact_ingests(server, env):
    base, _, _ = server
    artifact = env.tmp / "artifact.zip"
    size = _artifact(artifact, shards=4, attempts=1500)
    ingest = subprocess.Popen(
        manage("ingest", "--quiet", str(artifact)),
        env=env.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    times = []
    served = 0
    deadline = time.monotonic() + 120
    while ingest.poll() is None and time.monotonic() < deadline:
        t0 = time.perf_counter()
        with urllib.request.urlopen(base + "/", timeout=60) as r:
            assert r.status == 200
        times.append(time.perf_counter() - t0)
        served += 1
    ingest.wait(120)
    assert ingest.returncode == 0
    assert served >= 1
    print(
        f"\n[load] {served} page loads during a {size / 1e6:.0f} MB ingest, slowest "
        f"{max(times) * 1000:.0f} ms, median {sorted(times)[len(times) // 2] * 1000:.0f} ms"
    )
