"""Every hostile input is ingested in bounded memory (issue 45: "memory per request and per task
stays under 300 MB for every one of them"): each file of the hostile corpus, one attempt of a
large text (B21) and a .json document of millions of `{}` (B23), each by a `manage.py ingest`
process of its own on this test's database, whose process tree (the ingest, its forkserver, its
parser and scorer processes) is sampled for each process's peak resident set (VmHWM).

Run with `-s` to see the figures (docs/benchmark.md, "Hostile inputs and memory")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from records.devtools.bench import tree_memory_kb
from records.devtools.servers import child_env, manage
from records.models import PendingIndex, Run
from tests.builders import encode, line
from tests.servers import database_url

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
EXPECTED = json.loads((HOSTILE / "expected.json").read_text())
CORPUS = sorted(p.name for p in HOSTILE.iterdir() if p.name != "expected.json")
BOUND_MB = 300
MiB = 1024 * 1024

# B21: one attempt of 48 turns of a megabyte of text each (under the line cap of 1 MiB), about
# 49 MB, to keep this module fast; the issue's 200 MB attempt is docs/benchmark.md's ("The
# index after the shard").
B21 = "modeleval-b21-one-attempt.jsonl"
B21_TURNS = 48
# B23: a .json document of 5.6 million `{}`, 16 MiB (the was 64 MiB): read whole, then
# refused by counting its objects before any is built, so it costs about its own size.
B23 = "b23-many-objects.json"

pytestmark = [
    # A process of its own reads and writes this test's database: the test's rows are committed,
    # and the database is emptied after each test. Both databases: the suite runs once per
    # DATABASE_URL, and nothing here depends on which.
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM needs Linux's /proc"),
]

FIGURES: dict[str, tuple[float, float, int, float]] = {}  # input -> its figures, as printed


@pytest.fixture(scope="module", autouse=True)
def table():
    """The figures of every input once the module is done (`-s` shows them)."""
    yield
    if FIGURES:
        print(f"\npeak resident set (VmHWM) of `manage.py ingest` per input, {connection.vendor}:")
        print(f"  {'input':38} {'largest MB':>10} {'summed MB':>9} {'procs':>5} {'s':>5}")
        for name, (largest, summed, count, seconds) in FIGURES.items():
            print(f"  {name:38} {largest:10.0f} {summed:9.0f} {count:5} {seconds:5.1f}")


def ingest_peaks(path: Path, log: Path) -> tuple[int, str, dict[int, int], float]:
    """Ingest `path` in a `manage.py ingest` process of its own on this test's database; its
    exit code, what it wrote to stderr, each process's peak resident set in kB (the ingest
    process and every descendant seen alive), and its wall time.

    Sampled every 10 ms: a process's peak is read while it lives (VmHWM is gone with it, and
    the kernel's max RSS of the ingest process would start from this test process's size,
    carried across exec), so a rise within the last sample before a process ends is missed."""
    env = child_env(database_url(), EVALDASH_TASK_BACKEND="immediate")
    with open(log, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            manage("ingest", "--quiet", str(path)),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        peaks: dict[int, int] = {}
        while proc.poll() is None:
            tree = tree_memory_kb(proc.pid)
            for pid, kb in (tree[1] if tree else {}).items():
                peaks[pid] = max(peaks.get(pid, 0), kb)
            time.sleep(0.01)
        seconds = time.perf_counter() - t0
    return proc.returncode, log.read_text(errors="replace"), peaks, seconds


def over_the_bound(name: str, peaks: dict[int, int], seconds: float) -> list[str]:
    """What of `name`'s ingest exceeded the bound (nothing, if it held); its figures kept.
    Each process of the ingest (the one a worker's task or a request runs it in, and the ones
    it starts) stays under the bound, and so does the sum of their peaks (which counts the
    pages they share more than once, and peaks that were not simultaneous)."""
    if not peaks:
        return [f"{name}: no process of its ingest was sampled"]
    largest, summed = max(peaks.values()) / 1024, sum(peaks.values()) / 1024
    FIGURES[name] = (largest, summed, len(peaks), seconds)
    print(
        f"{name}: largest process {largest:.0f} MB, {len(peaks)} processes' peaks {summed:.0f} MB"
    )
    over = []
    if largest >= BOUND_MB:
        over.append(f"{name}: a process peaked at {largest:.0f} MB")
    if summed >= BOUND_MB:
        over.append(f"{name}: its processes' peaks sum to {summed:.0f} MB")
    return over


def test_each_file_of_the_hostile_corpus_is_ingested_in_bounded_memory(tmp_path):
    # Two ingests at a time (this machine's two cores; a process's own peak does not depend on
    # its neighbour), each input in a process of its own: a figure per input.
    def one(name: str) -> tuple[int, str, dict[int, int], float]:
        return ingest_peaks(HOSTILE / name, tmp_path / f"{name}.stderr")

    with ThreadPoolExecutor(2) as pool:
        ingested = dict(zip(CORPUS, pool.map(one, CORPUS), strict=True))
    failed = []
    for name, (code, err, peaks, seconds) in ingested.items():
        failed += over_the_bound(name, peaks, seconds)
        want = EXPECTED.get(name, {})
        if want and not want.get("accepted"):
            if code != 1 or want["message"] not in err:
                failed.append(f"{name}: not refused with {want['message']!r}: {err}")
        elif code not in ((0,) if want else (0, 1)):  # accepted; or refused or not, unsaid
            failed.append(f"{name}: the ingest ended with {code}: {err}")
    assert not failed, "\n".join(failed)


def test_one_attempt_of_a_large_text_is_stored_and_indexed_in_bounded_memory(tmp_path):
    # B21: on SQLite the index joined the attempt's text whole before cutting it to its head.
    text = "lorem " * 170_000
    path = tmp_path / B21
    with open(path, "wb") as fh:
        fh.write(encode([line("attempt")]))
        for n in range(B21_TURNS):
            turn = line("turn", index=n + 1, blocks=[{"kind": "text", "text": f"t{n} {text}"}])
            fh.write(encode([turn]))
        fh.write(encode([line("call"), line("verify"), line("session"), line("run")]))
    assert path.stat().st_size > B21_TURNS * 1_000_000
    code, err, peaks, seconds = ingest_peaks(path, tmp_path / "stderr")
    assert not over_the_bound(B21, peaks, seconds)
    assert code == 0, err
    assert Run.objects.get().run_id == "run-1" and not PendingIndex.objects.exists()


def test_a_document_of_millions_of_empty_objects_is_refused_in_bounded_memory(tmp_path):
    # B23: it drove the worker to 2.1 GB and was answered 200 storing nothing.
    path = tmp_path / B23
    path.write_bytes(b"[" + b"{}," * (16 * MiB // 3 - 1) + b"{}]")
    code, err, peaks, seconds = ingest_peaks(path, tmp_path / "stderr")
    assert not over_the_bound(B23, peaks, seconds)
    assert code == 1 and "a document holds at most" in err, err


# Four threads each allocating from malloc at once, then glibc's count of its arenas.
ARENAS = """
import ctypes, sys, threading
if sys.argv[1] == "app":
    import django
    django.setup()
together = threading.Barrier(4)
def work():
    blocks = [bytearray(50_000) for _ in range(20)]
    together.wait()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()
"""


def test_a_process_of_the_app_keeps_one_malloc_arena_however_many_threads_allocate():
    import ctypes

    if not hasattr(ctypes.CDLL(None), "malloc_stats"):
        pytest.skip("not glibc: its malloc keeps no arena a thread")

    def arenas(kind: str, **env: str) -> int:
        base = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
        out = subprocess.run(
            [sys.executable, "-c", ARENAS, kind],
            env={
                **base,
                "DJANGO_SETTINGS_MODULE": "evaldash.settings",
                "EVALDASH_INSECURE_DEV_KEY": "1",
                **env,
            },
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return sum(line.startswith("Arena ") for line in out.stderr.splitlines())

    assert arenas("plain") > 1  # without it, a thread allocating beside others takes its own
    assert arenas("app") == 1
    assert arenas("app", MALLOC_ARENA_MAX="4") > 1  # the operator's word stands
