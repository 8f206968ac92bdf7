"""The project's benchmark: ingest against a floor, peak memory, scoring, and page times.

Everything is measured in one process run on a fresh database (a throwaway copy made the way the
test runner makes one), on whichever database the settings name. Nothing here is a timed test.
"""

from __future__ import annotations

import csv
import gc
import io
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
from django.conf import settings
from django.db import DatabaseError, connection, reset_queries
from django.db.models import Sum
from django.test import Client
from django.test.utils import CaptureQueriesContext

from records.bulk.sqlite import checkpoints
from records.devtools.synth import MODELS, ModelSpec, load_demo_key, widen_key, write_run
from records.formats.corpus_key import key_to_json
from records.ingest import ingest, inputs_from_paths
from records.models import Attempt, Call, Run, Scoring, Upload
from records.scoring.run import score_run, store_key

CORPUS_CASES = 258  # the size of upstream's corpus (modelrecord.md B.2)


def bench_models(attempts: int) -> tuple[ModelSpec, ...]:
    """More models for bigger runs (variants of the four priced ones), as teams compare more."""
    n = 4 if attempts <= 20_000 else 12
    out = []
    for i in range(n):
        base = MODELS[i % len(MODELS)]
        suffix = "" if i < len(MODELS) else f"-v{i // len(MODELS) + 1}"
        out.append(replace(base, spec=base.spec + suffix))
    return tuple(out)


def generate(directory: Path, attempts: int, *, run_id: str, seed: int) -> tuple[Path, Any, int]:
    """One shard of `attempts` attempts over a corpus of upstream's size: runs grow through
    models, surfaces and repeats, as real evaluation programs do, not through the corpus."""
    key = widen_key(load_demo_key(), CORPUS_CASES)
    models = bench_models(attempts)
    repeat = max(1, -(-attempts // (CORPUS_CASES * 3 * len(models))))
    path = directory / f"modeleval-{seed:06d}.jsonl"
    with open(path, "wb") as fh:
        lines = write_run(
            fh,
            key,
            run_id=run_id,
            commit=f"{seed:040x}",
            started_at=datetime(2026, 11, 1 + seed % 27, 9),
            seed=seed,
            repeat=repeat,
            models=models,
            max_attempts=attempts,
        )
    return path, key, lines


def floor(paths: list[Path], db_path: Path) -> dict[str, float]:
    """Parse each line with orjson and insert one row per line into a fresh SQLite file (its
    CPU time this process's own: it writes to no database server)."""
    cpu0 = _tree_cpu_seconds(os.getpid())
    t0 = time.perf_counter()
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE line (file TEXT, n INTEGER, type TEXT, payload TEXT)")
    lines = size = 0
    with db:
        for path in paths:
            rows = []
            with open(path, "rb") as fh:
                for n, raw in enumerate(fh, 1):
                    size += len(raw)
                    if not raw.strip():
                        continue
                    doc = orjson.loads(raw)
                    typ = doc["type"]
                    rows.append((path.name, n, typ, orjson.dumps(doc[typ]).decode()))
                    if len(rows) >= 5000:
                        db.executemany("INSERT INTO line VALUES (?, ?, ?, ?)", rows)
                        lines += len(rows)
                        rows = []
            db.executemany("INSERT INTO line VALUES (?, ?, ?, ?)", rows)
            lines += len(rows)
    db.close()
    seconds = time.perf_counter() - t0
    cpu = _tree_cpu_seconds(os.getpid()) - cpu0
    return {**_throughput(seconds, lines, size), "cpu_seconds": cpu}


def _throughput(seconds: float, lines: int, size: int) -> dict[str, float]:
    return {
        "seconds": seconds,
        "lines": lines,
        "bytes": size,
        "lines_per_s": lines / seconds,
        "mb_per_s": size / 1e6 / seconds,
    }


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def ingest_paths(paths: list[Path]) -> dict[str, Any]:
    """One ingest call of `paths`, timed until its shards are stored (and scored, where their
    key is stored): its search index is written after them, in the same call, and timed on
    its own (`index_seconds`; `index_done_seconds`, the call's whole time)."""
    from unittest import mock

    from records.search import index

    size = sum(p.stat().st_size for p in paths)
    indexing: list[tuple[float, float]] = []  # each follow-up's start and end
    follow_up = index.follow_up

    def timed(run_pk: int) -> bool:
        started = time.perf_counter()
        settled = follow_up(run_pk)
        indexing.append((started, time.perf_counter()))
        return settled

    cpu0 = _cpu_seconds()
    with mock.patch("records.search.index.follow_up", timed):
        whole, report = _timed(
            lambda: ingest(inputs_from_paths(paths), Upload.objects.create(source="cli"))
        )
    cpu = _cpu_seconds() - cpu0
    assert report.ok, report.refused
    lines = sum(s["lines"] for s in report.stored)
    # The index follows the last shard, in this call: from the first follow-up's start to the
    # last one's end (on PostgreSQL the runs are indexed side by side).
    span = max(e for _, e in indexing) - min(s for s, _ in indexing) if indexing else 0.0
    seconds = whole - span
    return {
        **_throughput(seconds, lines, size),
        "index_seconds": span,
        "index_done_seconds": whole,
        "cpu_seconds": cpu,
        "runs": [s["run"] for s in report.stored],
        "shard_seconds": [s["seconds"] for s in report.stored],
        "shard_lines": [s["lines"] for s in report.stored],
    }


def _stored(key: Any) -> Any:
    """The bench's corpus key, stored as an upload would store it."""
    stored, _ = store_key(
        orjson.dumps(key_to_json(key)), "bench-key.json", Upload.objects.create(source="cli")
    )
    return stored


def _quiet() -> None:
    """Before a measurement: the kernel writes back what came before (GBs after a large
    load) now, not while the measured work shares the CPU with it; so does PostgreSQL its
    changed pages (a checkpoint, which a large load otherwise starts beside what follows)."""
    if connection.vendor == "postgresql":
        try:
            with connection.cursor() as cur:
                cur.execute("CHECKPOINT")
        except DatabaseError:  # a role without the right to: its checkpoints come as they come
            pass
    if hasattr(os, "sync"):
        os.sync()
    gc.collect()


def page_times(client: Any, urls: dict[str, str], repeat: int = 9) -> dict[str, dict[str, float]]:
    """The median of `repeat` requests per page, after one that warms caches (not counted)."""
    _quiet()
    out = {}
    for name, url in urls.items():
        times = []
        queries = 0
        client.get(url)
        for i in range(repeat):
            reset_queries()
            with CaptureQueriesContext(connection) as q:
                t0 = time.perf_counter()
                r = client.get(url)
                if getattr(r, "streaming", False):
                    b"".join(r.streaming_content)
                times.append(time.perf_counter() - t0)
            assert r.status_code == 200, (url, r.status_code)
            if i == 0:
                queries = len(q)
        out[name] = {"median_ms": statistics.median(times) * 1000, "queries": queries}
    return out


def _pages(client: Any, run_id: int, baseline_id: int) -> dict[str, dict[str, float]]:

    attempt = Attempt.objects.filter(run_id=run_id, call_count__gt=2).order_by("pk").first()
    run = Run.objects.get(pk=run_id)
    model = run.models_seen[0] if run.models_seen else ""
    urls = {
        "runs list": "/",
        "run overview (ranked boards)": f"/runs/{run_id}/",
        "run scores tab": f"/runs/{run_id}/scores/",
        "run attempts tab, drilled": f"/runs/{run_id}/attempts/?outcome=failed&sort=-turns",
        "scores comparison of two runs": f"/compare/?kind=runs&baseline={baseline_id}&candidate={run_id}",
        "models side by side": f"/compare/?kind=models&run={run_id}",
        "row history": (
            f"/history/?digest={run.corpus_digest}&model={model}&surface=dynamic&column=Clean"
        ),
        "case matrix": f"/runs/{run_id}/matrix/?surface=dynamic",
        "attempt trace": f"/attempts/{attempt.pk}/",
    }
    return page_times(client, urls)


def _runs(
    tmp: Path, attempts: int, seed: int, say: Callable[[str], None], *, count: int = 2
) -> tuple[list[Path], Any]:
    say(f"generating {count} runs of {attempts:,} attempts")
    paths, key = [], None
    for i in range(count):
        path, key, _ = generate(tmp, attempts, run_id=f"bench-{attempts}-{'abc'[i]}", seed=seed + i)
        paths.append(path)
    return paths, key


def _against_floor(shards: int, floor: dict[str, Any], figs: dict[str, Any]) -> dict[str, Any]:
    """An ingest's figures beside the floor measured around it, and their ratios. Its CPU time
    (every process it started, and a PostgreSQL server on this machine) sets how high the
    ratio could go: `ratio_bound`, were that time spread over every core with none idle."""
    cpu = figs["cpu_seconds"]
    return {
        "shards": shards,
        "floor": floor,
        "evaldash": {k: v for k, v in figs.items() if k != "runs"},
        "ratio_lines": figs["lines_per_s"] / floor["lines_per_s"],
        "ratio_mb": figs["mb_per_s"] / floor["mb_per_s"],
        "cpu_over_floor": cpu / floor["cpu_seconds"] if cpu and floor["cpu_seconds"] else None,
        "cores": CORES,
        "ratio_bound": CORES * floor["seconds"] / cpu if cpu else None,  # None: no /proc here
        # Stored and scored, then indexed: the whole call's time against the floor's.
        "index_done_over_floor_time": figs["index_done_seconds"] / floor["seconds"],
        # The index alone, from the shards' last commit to its end, against the floor's time.
        "index_after_over_floor_time": figs["index_seconds"] / floor["seconds"],
    }


def _floored(paths: list[Path], tmp: Path, measured: Callable[[], dict]) -> tuple[dict, dict]:
    """`measured()` (an ingest of `paths`) between two runs of the floor over the same shards,
    the floor counting with the mean of its two times, so a machine that speeds up or slows
    down meanwhile does not tilt the ratio; the floor's figures and the measured ones."""
    _quiet()
    before = floor(paths, tmp / f"floor-{paths[0].stem}-before.sqlite3")
    figs = measured()
    _quiet()
    after = floor(paths, tmp / f"floor-{paths[0].stem}-after.sqlite3")
    floor_figs = {
        **_throughput((before["seconds"] + after["seconds"]) / 2, before["lines"], before["bytes"]),
        "seconds_before_and_after": [before["seconds"], after["seconds"]],
        "cpu_seconds": (before["cpu_seconds"] + after["cpu_seconds"]) / 2,
    }
    return floor_figs, figs


# How many times the first large run is re-scored: the median is the figure (one re-score's
# time moved by a fifth from run to run on a shared machine), each one's time kept beside it.
RESCORES = 3


def _score_stored(figs: dict, key: Any, times: int = 1) -> tuple[list[Any], dict]:
    """Store the key (if it is not yet) and re-score the ingested runs, the first one timed
    `times` times, each a scoring of its own, as a re-score after a new key is. The scorings
    of all but the last go after their timing, so the pages measured next read tables the size
    one re-score leaves."""
    stored_key = _stored(key)
    runs = [Run.objects.get(pk=pk) for pk in figs["runs"]]
    timed, made = [], []
    for _ in range(times):
        _quiet()
        cpu0 = _cpu_seconds()
        seconds, scoring = _timed(lambda: score_run(runs[0], stored_key))
        # Timed apart: SQLite's checkpoint of the log the verdicts filled, which runs beside
        # what follows the commit (here nothing: it is waited for), its CPU time counted with
        # the scoring's.
        checkpoint, _ = _timed(checkpoints.finish)
        timed.append((seconds, checkpoint, _cpu_seconds() - cpu0))
        made.append(scoring.pk)
    Scoring.objects.filter(pk__in=made[:-1]).delete()
    for run in runs[1:]:
        score_run(run, stored_key)
    seconds, figs["score_checkpoint_seconds"], figs["score_cpu_seconds"] = sorted(timed)[
        len(timed) // 2
    ]
    figs["score_seconds"] = seconds
    figs["score_seconds_each"] = [t[0] for t in timed]
    figs["scored_attempts"] = scoring.verdict_count
    figs["first_ingest_seconds"] = figs["shard_seconds"][0]
    return runs, figs


def keyed(*, large: int, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """The ingest with the key stored alone, as `run` measures it (two shards of `large`
    attempts, the same seeds, between two runs of its floor), on the cores this process may
    use: what `scaling` times on one core and on all."""
    report: dict[str, Any] = {
        "database": connection.vendor,
        "cores": CORES,
        "processes": settings.EVALDASH_INGEST_PROCESSES,
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        paths, key = _runs(tmp, large, 11, say)
        _stored(key)
        keyed_floor, figs = _floored(paths, tmp, lambda: ingest_paths(paths))
        report["ingest_with_key"] = _against_floor(len(paths), keyed_floor, figs)
    out.write_text(json.dumps(report, indent=2))
    return report


def _one_core() -> None:
    """In a child about to run the benchmark: this machine's first allowed core only."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def scaling(*, large: int, db_name: str, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """The ingest with the key stored (`keyed`) in a fresh benchmark process on one core, then
    on every core, each on a fresh database: how many times faster the cores make it. Each
    runs as many parser processes as it has cores (`EVALDASH_INGEST_PROCESSES` unset)."""
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError("measuring on one core needs os.sched_setaffinity (Linux)")
    env = {k: v for k, v in os.environ.items() if k != "EVALDASH_INGEST_PROCESSES"}
    manage = Path(settings.BASE_DIR) / "manage.py"
    report: dict[str, Any] = {"database": connection.vendor, "large_attempts": large}
    with tempfile.TemporaryDirectory() as tmp_name:
        for name, pin in (("one_core", _one_core), ("all_cores", None)):
            say(f"the ingest with the key stored, {name.replace('_', ' ')}")
            part = Path(tmp_name) / f"{name}.json"
            command = [sys.executable, str(manage), "bench", "--keyed-only", "--large", str(large)]
            command += ["--out", str(part), "--db-name", db_name]
            # On one core, a PostgreSQL server here is held to that core too: its work is the
            # ingest's, and on the other core it would flatter one core.
            one = {min(os.sched_getaffinity(0))}
            with _server_held(one) if pin else nullcontext(False) as held:
                subprocess.run(command, env=env, preexec_fn=pin, check=True)  # noqa: PLW1509, S603
            measured = json.loads(part.read_text())
            figs = measured["ingest_with_key"]
            report[name] = {
                "cores": measured["cores"],
                "processes": measured["processes"],
                "server_held": held,
                "seconds": figs["evaldash"]["seconds"],
                "cpu_seconds": figs["evaldash"]["cpu_seconds"],
                "floor_seconds": figs["floor"]["seconds"],
                "ratio": figs["ratio_lines"],
            }
    one, every = report["one_core"], report["all_cores"]
    # Against each one's own floor (one process either way), so the machine's drift between
    # the two runs does not count as the cores' gain.
    report["speedup"] = every["ratio"] / one["ratio"]
    report["speedup_seconds"] = one["seconds"] / every["seconds"]
    out.write_text(json.dumps(report, indent=2))
    return report


def peak_memory(artifact: Path, database_url: str) -> dict[str, Any]:
    """Memory of a separate `manage.py ingest` process ingesting the artifact.

    Sampled every 20 ms where /proc offers it: each process's own peak resident set (VmHWM) in
    the ingest's process tree (the ingest process, its parser and scorer processes), and the
    peak of the whole tree's proportional set size (PSS: pages two processes share are split
    between them). The kernel's max RSS for the ingest process is reported too, but Linux carries
    a process's high-water mark across exec, so that figure starts from the resident size of
    this (large, by now) benchmark process that started it."""
    env = {**os.environ, "DATABASE_URL": database_url, "EVALDASH_INSECURE_DEV_KEY": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(settings.BASE_DIR) / "manage.py"),
            "ingest",
            "--quiet",
            str(artifact),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    t0 = time.perf_counter()
    peak_pss = 0
    hwm: dict[int, int] = {}  # pid -> its peak resident set, kB
    sampling = True
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if sampling else 0)
        if pid:
            break
        tree = tree_memory_kb(proc.pid)
        if tree is None:
            sampling = False  # no /proc here: just wait
        else:
            pss, peaks = tree
            peak_pss = max(peak_pss, pss)
            hwm.update(peaks)
            time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        raise RuntimeError(f"ingest of the artifact failed: {out} {err}")
    ingest_kb = hwm.pop(proc.pid, 0)
    return {
        # Where /proc cannot tell, the kernel's figure (an overestimate, see above).
        "max_rss_mb": max([ingest_kb, *hwm.values()] if ingest_kb else [usage.ru_maxrss]) / 1024,
        "ingest_process_max_rss_mb": ingest_kb / 1024 if ingest_kb else None,
        "worker_max_rss_mb": max(hwm.values()) / 1024 if hwm else None,
        "peak_tree_pss_mb": peak_pss / 1024 if peak_pss else None,
        "kernel_max_rss_mb": usage.ru_maxrss / 1024,
        "seconds": seconds,
        "summary": out.strip(),
    }


def tree_memory_kb(root: int) -> tuple[int, dict[int, int]] | None:
    """The summed PSS of a process and its descendants, and each one's peak resident set
    (VmHWM), both in kB, or None where /proc cannot tell (the root is gone, or no /proc).

    One look, not a watch: sample it while the process runs (every 20 ms here) and keep the
    largest figures, since a descendant's peak is lost once it has ended. The tests of hostile
    inputs' memory (`tests/test_hardening_memory.py`) use it too."""
    total = 0
    peaks: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += next(int(ln.split()[1]) for ln in fh if ln.startswith("Pss:"))
            with open(f"/proc/{pid}/status") as fh:
                peaks[pid] = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:"))
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, StopIteration, ValueError):
            if pid == root:
                return None
    return total, peaks


def run(
    *, small: int, large: int, artifact_mb: float, out: Path, say: Callable[[str], None]
) -> dict[str, Any]:

    report: dict[str, Any] = {
        "database": connection.vendor,
        "sizes": {"small_attempts": small, "large_attempts": large, "artifact_mb": artifact_mb},
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "method": {
            "pages": "server time through the test client: the median of 9 requests to each "
            "page after one warm-up request",
            "quiet": "before the floor, each ingest, the scoring and the pages, pending writes "
            "are flushed to disk (os.sync) and garbage is collected",
            "floor": "run before and after the ingest of the same shards; its figures come from "
            "the mean of the two times",
        },
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # The floor and the ingest read the same three shard files (one ingest call into the
        # fresh database): a few seconds each, so one measurement is not one moment's noise.
        paths, key = _runs(tmp, small, 1, say, count=3)
        # No key is stored yet: this ingest stores without scoring.
        floor_figs, ingest_figs = _floored(paths, tmp, lambda: ingest_paths(paths))
        (base_small, run_small, _), ingest_figs = _score_stored(ingest_figs, key)
        say(
            f"floor: {floor_figs['lines_per_s']:,.0f} lines/s, {floor_figs['mb_per_s']:.1f} MB/s; "
            f"ingest: {ingest_figs['lines_per_s']:,.0f} lines/s, {ingest_figs['mb_per_s']:.1f} MB/s"
        )
        report["ingest"] = _against_floor(len(paths), floor_figs, ingest_figs)
        seconds = ingest_figs["score_seconds"]
        report["scoring"] = {
            "attempts": ingest_figs["scored_attempts"],
            "seconds": seconds,
            "attempts_per_s": ingest_figs["scored_attempts"] / seconds,
            "ingest_seconds": ingest_figs["first_ingest_seconds"],
            "rescore_over_ingest": seconds / ingest_figs["first_ingest_seconds"],
        }
        say(
            f"scoring: {report['scoring']['attempts_per_s']:,.0f} attempts/s, "
            f"re-score / ingest = {report['scoring']['rescore_over_ingest']:.2f}"
        )
        client = Client()
        settings.EVALDASH_PUBLIC_READ = True
        settings.ALLOWED_HOSTS = ["*"]
        report["pages_small"] = _pages(client, run_small.pk, base_small.pk)
        say(f"pages at {small:,}: " + json.dumps(report["pages_small"]))

        # The key of the small runs scores the large ones too: this ingest stores and scores
        # each shard on arrival, as a shard whose key came first is ingested.
        large_paths, _ = _runs(tmp, large, 11, say)
        keyed_floor, keyed = _floored(large_paths, tmp, lambda: ingest_paths(large_paths))
        (base_large, run_large), large_figs = _score_stored(keyed, key, RESCORES)
        report["ingest_with_key"] = _against_floor(len(large_paths), keyed_floor, keyed)
        say(
            f"ingest with the key stored: {keyed['lines_per_s']:,.0f} lines/s = "
            f"{report['ingest_with_key']['ratio_lines']:.2f}x the floor; indexed after "
            f"{keyed['index_done_seconds']:.2f} s = "
            f"{report['ingest_with_key']['index_done_over_floor_time']:.2f}x the floor's time"
        )
        report["scoring_large"] = {
            "attempts": large_figs["scored_attempts"],
            "seconds": large_figs["score_seconds"],  # the median of `seconds_each`
            "seconds_each": large_figs["score_seconds_each"],
            "checkpoint_seconds": large_figs["score_checkpoint_seconds"],
            "attempts_per_s": large_figs["scored_attempts"] / large_figs["score_seconds"],
            # The first shard's own time: once the small runs' key is stored, a large run is
            # also scored on arrival, which the ingest call's total would include.
            "ingest_seconds": large_figs["first_ingest_seconds"],
            "ingest_lines_per_s": large_figs["shard_lines"][0] / large_figs["first_ingest_seconds"],
            "rescore_over_ingest": large_figs["score_seconds"] / large_figs["first_ingest_seconds"],
            "cpu_seconds": large_figs["score_cpu_seconds"],
            # The time the scoring's CPU time sets were it spread over every core, none idle.
            "seconds_bound": large_figs["score_cpu_seconds"] / CORES,
        }
        report["ratios"] = {
            # The figures the ingest is held to, each against the floor of the same run; and
            # beside each, the highest its CPU time allows on this machine's cores.
            "ingest_with_key_over_floor": report["ingest_with_key"]["ratio_lines"],
            "ingest_with_key_bound": report["ingest_with_key"]["ratio_bound"],
            "ingest_without_scoring_over_floor": report["ingest"]["ratio_lines"],
            "ingest_without_scoring_bound": report["ingest"]["ratio_bound"],
            "index_done_over_floor_time": report["ingest_with_key"]["index_done_over_floor_time"],
            "index_after_over_floor_time": report["ingest_with_key"]["index_after_over_floor_time"],
            "index_seconds_with_key": report["ingest_with_key"]["evaldash"]["index_seconds"],
            "rescore_attempts": report["scoring_large"]["attempts"],
            "rescore_seconds": report["scoring_large"]["seconds"],
            "rescore_checkpoint_seconds": report["scoring_large"]["checkpoint_seconds"],
            "rescore_seconds_bound": report["scoring_large"]["seconds_bound"],
            "rescore_attempts_per_s": report["scoring_large"]["attempts_per_s"],
            "cores": CORES,
        }
        report["pages_large"] = _pages(client, run_large.pk, base_large.pk)
        say(f"pages at {large:,}: " + json.dumps(report["pages_large"]))
        report["page_growth"] = {
            name: {
                "time_ratio": report["pages_large"][name]["median_ms"]
                / report["pages_small"][name]["median_ms"],
                "queries_small": report["pages_small"][name]["queries"],
                "queries_large": report["pages_large"][name]["queries"],
            }
            for name in report["pages_small"]
        }

        say(f"building an artifact of {artifact_mb:g} MB of shards")
        shards = tmp / "artifact"
        shards.mkdir()
        total, seed = 0, 100
        while total < artifact_mb * 1e6:
            p, _, _ = generate(shards, 5000, run_id=f"bench-artifact-{seed}", seed=seed)
            total += p.stat().st_size
            seed += 1
        artifact = tmp / "artifact.zip"
        with zipfile.ZipFile(artifact, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
            for p in sorted(shards.iterdir()):
                z.write(p, f"ce/{p.name}")
        url = _database_url()
        mem = peak_memory(artifact, url)
        mem.update(uncompressed_mb=total / 1e6, artifact_file_mb=artifact.stat().st_size / 1e6)
        report["peak_memory"] = mem
        pss = mem["peak_tree_pss_mb"]
        say(
            f"peak memory: max RSS {mem['max_rss_mb']:.0f} MB"
            + (f", process tree PSS {pss:.0f} MB" if pss else "")
            + f" for {total / 1e6:.0f} MB of shards"
        )
    out.write_text(json.dumps(report, indent=2))
    return report


def corpus_store(tmp: Path, runs: int, attempts: int, say: Callable[[str], None]) -> Run:
    """`runs` scored runs of `attempts` attempts each over a corpus of upstream's size, for the
    corpus and case pages. One run is generated, ingested and scored for real; the others are
    its copies (run, shard record and scoring), each given per-case figures of its own drawn
    as the generator draws outcomes, and stored as a scoring stores them: the pages read
    nothing else, and 50 real ingests would take an hour. Returns the newest run."""
    import random
    from datetime import timedelta

    from records.models import CaseFigure, FailureCount, Scoring, ShardFile

    say(f"building {runs} runs of {attempts:,} attempts for the corpus pages")
    path, key, _ = generate(tmp, 2000, run_id="bench-corpus-0", seed=500)
    figs = ingest_paths([path])
    first = Run.objects.get(pk=figs["runs"][0])
    stored_key = _stored(key)
    scoring = score_run(first, stored_key)
    models = [m.spec for m in bench_models(attempts)]
    surfaces = ("dynamic", "meta", "individual")
    repeat = max(1, -(-attempts // (CORPUS_CASES * len(surfaces) * len(models))))
    quality = {m.spec: m.quality for m in bench_models(attempts)}
    cases = [c.id for c in key.cases]
    rng = random.Random(500)
    CaseFigure.objects.filter(scoring=scoring).delete()
    # The failure modes the real scoring met, by how many attempts fail in each: each copy's
    # failed attempts are spread over them in those proportions.
    real = dict(
        FailureCount.objects.filter(scoring=scoring)
        .values("mode")
        .annotate(n=Sum("attempts"))
        .values_list("mode", "n")
    )
    modes, weights = list(real), list(real.values())
    FailureCount.objects.filter(scoring=scoring).delete()
    newest = first
    for n in range(runs):
        if n:
            shard = ShardFile.objects.get(pk=first.shard_id)
            shard.pk, shard.sha256 = None, f"{n:064x}"
            shard.save()
            run = Run.objects.get(pk=first.pk)
            run.pk, run.shard = None, shard
            run.run_id = f"bench-corpus-{n}"
            run.started_at = first.started_at + timedelta(days=n)
            run.attempt_count = attempts
            run.save()
            scoring = Scoring.objects.create(
                run=run,
                key=stored_key,
                scorer_version=scoring.scorer_version,
                verdict_count=1,
                signed=True,
            )
            newest = run
        figures = []
        failures: list[FailureCount] = []
        for case in cases:
            for model in models:
                for surface in surfaces:
                    marks = "".join(
                        "1" if rng.random() < quality[model] else "0" for _ in range(repeat)
                    )
                    failed: dict[str, int] = {}
                    for mode in rng.choices(modes, weights, k=marks.count("0")) if modes else ():
                        failed[mode] = failed.get(mode, 0) + 1
                    failures += [
                        FailureCount(
                            scoring=scoring,
                            mode=mode,
                            model=model,
                            surface=surface,
                            case=case,
                            attempts=n,
                        )
                        for mode, n in failed.items()
                    ]
                    figures.append(
                        CaseFigure(
                            scoring=scoring,
                            case=case,
                            row_key=f"model={model} surface={surface}",
                            model=model,
                            surface=surface,
                            clean=marks.count("1"),
                            counted=repeat,
                            total=repeat,
                            marks=marks,
                        )
                    )
        CaseFigure.objects.bulk_create(figures, batch_size=2000)
        FailureCount.objects.bulk_create(failures, batch_size=2000)
    if connection.vendor == "postgresql":
        # What autovacuum does within a minute of a load: statistics to plan on, and a
        # visibility map, so the pages read their figures from the index alone.
        with connection.cursor() as cursor:
            for table in (CaseFigure, FailureCount):
                cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(table._meta.db_table)}")
    return newest


def corpus_pages(
    client: Any, runs: int = 50, attempts: int = 20_000, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """The corpus page, a case's page and the failure modes over `runs` runs of `attempts`
    attempts, against their targets (500 ms, 200 ms and 500 ms), with their query counts."""
    with tempfile.TemporaryDirectory() as tmp_name:
        newest = corpus_store(Path(tmp_name), runs, attempts, say)
    digest = newest.corpus_digest
    from records.models import CaseFigure, FailureCount

    case = CaseFigure.objects.filter(scoring__run=newest).values_list("case", flat=True).first()
    urls = {
        "corpus page": f"/cases/?digest={digest}",
        "case page": "/cases/case/?" + urlencode({"digest": digest, "case": case}),
        "failure modes": f"/failures/?digest={digest}",
    }
    times = page_times(client, urls)
    for name, cpu_ms in cpu_times(client, urls).items():
        times[name]["cpu_ms"] = cpu_ms
    times["corpus page"]["target_ms"] = 500
    times["case page"]["target_ms"] = 200
    times["failure modes"]["target_ms"] = 500
    return {
        "runs": runs,
        "attempts_per_run": attempts,
        "case_figures": CaseFigure.objects.count(),
        "failure_counts": FailureCount.objects.count(),
        "pages": times,
    }


def cpu_times(client: Any, urls: dict[str, str], repeat: int = 9) -> dict[str, float]:
    """The least CPU time this process spent answering each page over `repeat` requests (the
    database server's own time apart, on PostgreSQL): on a shared machine the wall clock also
    counts the turns of every other process, the CPU time only the page's own work."""
    out = {}
    for name, url in urls.items():
        spent = []
        for _ in range(repeat):
            start = time.process_time()
            assert client.get(url).status_code == 200, url
            spent.append(time.process_time() - start)
        out[name] = min(spent) * 1000
    return out


def corpus_only(
    *, runs: int, attempts: int, out: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    """The corpus pages alone (`manage.py bench --corpus-only`), on a fresh database."""
    settings.EVALDASH_PUBLIC_READ = True
    settings.ALLOWED_HOSTS = ["*"]
    report = {
        "database": connection.vendor,
        "corpus_pages": corpus_pages(Client(), runs, attempts, say),
    }
    out.write_text(json.dumps(report, indent=2))
    return report


def _database_url() -> str:
    db = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


# The search's targets: a store of `runs` runs, a facet-only query and a text query, across the
# store and narrowed to one run, measured once the first two runs are in and again once all are.
# The facet-only query asks what users ask first (the attempts behind the refused calls of a
# tool) and finds some 6 % of the calls.
SEARCH_QUERIES = {
    "facets only": "tool=gitlab_execute_action&outcome=refused&ended_by=completed",
    "text": "q=default+branch&surface=dynamic",
}


def _store_size() -> dict[str, int | None]:
    """The store's size on disk, the index's share, and the size without it."""
    from records.search import engine

    index = engine.size_bytes()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_database_size(current_database())")
            total = int(cursor.fetchone()[0])
        else:
            cursor.execute(
                "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
            )
            total = int(cursor.fetchone()[0])
    return {
        "bytes": total,
        "index_bytes": index,
        "bytes_without_index": total - index if index is not None else None,
    }


def _search_times(client: Any, runs: list[Run]) -> dict[str, dict[str, float]]:
    one = f"&run={runs[0].run_id}"
    urls = {}
    for name, query in SEARCH_QUERIES.items():
        urls[f"{name}, whole store"] = f"/search/?{query}"
        urls[f"{name}, one run"] = f"/search/?{query}{one}"
        urls[f"{name}, a run's Attempts tab"] = f"/runs/{runs[0].pk}/attempts/?" + query.replace(
            "outcome=", "call_outcome="
        )
    return page_times(client, urls, repeat=5)


# The search's exports over the whole store, streamed whole: every attempt (a row each, no call
# asked for), every call whose dispatch was observed (a row a call: nearly every call), and
# what a common word finds (a row a matching call).
EXPORT_QUERIES = {"every attempt": "", "observed calls": "observed=yes", "text 'the'": "q=the"}


def export_rates(client: Any) -> dict[str, dict[str, float]]:
    """Each whole-store `/search.csv` streamed to its end: its rows, seconds and rows a second
    (the header line not counted)."""
    rates = {}
    for name, query in EXPORT_QUERIES.items():
        started = time.perf_counter()
        answer = client.get(f"/search.csv?{query}")
        body = b"".join(answer.streaming_content)
        seconds = time.perf_counter() - started
        rows = (
            sum(1 for _ in csv.reader(io.StringIO(body.decode()))) - 1
        )  # a field may hold a line end
        rates[name] = {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds}
    rates["store"] = {
        "attempts": Attempt.objects.count(),
        "calls": Call.objects.count(),
        "observed_calls": Call.objects.filter(dispatch_observed=True).count(),
    }
    return rates


def search(*, runs: int, attempts: int, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Ingest `runs` runs of `attempts` attempts with the index maintained (against the floor),
    time the search's queries on the first two runs and on all of them, and size the store."""
    report: dict[str, Any] = {
        "database": connection.vendor,
        "sizes": {"runs": runs, "attempts_per_run": attempts},
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "method": {
            "pages": "server time through the test client: the median of 5 requests to each "
            "page (count, facets and a page of results) after one warm-up request",
            "floor": "orjson and one row per line into SQLite, over the same shards",
        },
        "queries": SEARCH_QUERIES,
    }
    client = Client()
    settings.EVALDASH_PUBLIC_READ = True
    settings.ALLOWED_HOSTS = ["*"]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        say(f"generating {runs} runs of {attempts:,} attempts")
        paths = []
        for i in range(runs):
            path, _, _ = generate(tmp, attempts, run_id=f"bench-search-{i:02d}", seed=200 + i)
            paths.append(path)
        _quiet()
        floor_figs = floor(paths, tmp / "floor.sqlite3")
        stages = {"first two runs": paths[:2], "every run": paths[2:]}
        ingested: list[dict[str, Any]] = []
        for stage, some in stages.items():
            _quiet()
            # The index is written after the shards' transactions, timed by `ingest_paths`.
            figs = ingest_paths(some)
            ingested.append(figs)
            stored = list(Run.objects.order_by("pk"))
            report[f"search, {stage}"] = _search_times(client, stored)
            report[f"size, {stage}"] = _store_size()
            say(f"{stage} ({len(stored)} runs): " + json.dumps(report[f"search, {stage}"]))
        _quiet()
        report["exports"] = export_rates(client)
        say("exports: " + json.dumps(report["exports"]))
        lines = sum(f["lines"] for f in ingested)
        # With the index: until each call's last run is indexed.
        seconds = sum(f["index_done_seconds"] for f in ingested)
        indexing = sum(f["index_seconds"] for f in ingested)
        cpu = sum(f["cpu_seconds"] for f in ingested)
        report["ingest"] = {
            "floor": floor_figs,
            "evaldash": {
                "lines": lines,
                "seconds": seconds,
                "lines_per_s": lines / seconds,
                "cpu_seconds": cpu,
            },
            "ratio_lines": lines / seconds / floor_figs["lines_per_s"],
            # The highest ratio the ingest's CPU time allows on this machine's cores.
            "cores": CORES,
            "ratio_bound": CORES * floor_figs["seconds"] / cpu if cpu else None,
            # The same ingest less the time its index took: what the index costs, measured in
            # the one pass rather than in a second ingest on a machine whose load moves.
            "index_seconds": indexing,
            "ratio_lines_without_index": lines / (seconds - indexing) / floor_figs["lines_per_s"],
        }
        first, every = report["search, first two runs"], report["search, every run"]
        report["growth"] = {
            name: {
                "time_ratio": every[name]["median_ms"] / first[name]["median_ms"],
                "queries_two_runs": first[name]["queries"],
                "queries_every_run": every[name]["queries"],
            }
            for name in first
        }
    out.write_text(json.dumps(report, indent=2))
    return report


# How many slow clients the production command survives: each holds a gthread thread while it
# dribbles its headers, so once they outnumber a process's threads its queued requests wait.
SLOW_CLIENT_COUNTS = (4, 8, 12, 15, 16, 24)
SLOW_CLIENT_TRIES = 3


def slow_clients(*, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """docs/production.md's gunicorn command on a loopback port, nothing in front: for each
    count in SLOW_CLIENT_COUNTS, that many connections send a request line and half a header and
    then a byte a second later (never finishing), and one more client asks for the login page
    with a 10 s limit, SLOW_CLIENT_TRIES times; how many of its tries were answered. Every loop
    is bounded and every connection is closed before the next count."""
    import socket
    import urllib.request

    report: dict[str, Any] = {
        "database": connection.vendor,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "method": {
            "slow": "a connection that sent 'GET /login/ HTTP/1.1', its Host and half a header",
            "answered": "a fresh GET /login/ answered 200 within 10 s while they hang",
        },
        "counts": {},
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        server, port, log = _serve(Path(tmp_name))
        try:
            for count in SLOW_CLIENT_COUNTS:
                answered = 0
                for _ in range(SLOW_CLIENT_TRIES):
                    answered += _answered_beside_slow_clients(port, count, socket, urllib.request)
                report["counts"][str(count)] = {"answered": answered, "tries": SLOW_CLIENT_TRIES}
                say(
                    f"{count} slow clients: {answered} of {SLOW_CLIENT_TRIES} fresh requests answered"
                )
        finally:
            _stop_process(server)
            log.close()
    # The most slow clients every count up to which had every fresh request answered.
    report["survives_up_to"] = 0
    for count, r in report["counts"].items():
        if r["answered"] < r["tries"]:
            break
        report["survives_up_to"] = int(count)
    out.write_text(json.dumps(report, indent=2))
    return report


def _answered_beside_slow_clients(port: int, count: int, socket: Any, request: Any) -> bool:
    slow = []
    try:
        for _ in range(count):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(c)
        time.sleep(1.0)
        for c in slow:
            c.sendall(b"x")
        try:
            with request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as r:
                return r.status == 200
        except OSError:
            return False
    finally:
        for c in slow:
            c.close()
        time.sleep(0.5)  # the threads they held are free again before the next try


# The upload API's own target: a large POST answers (202) within a second, and the upload is
# done within its ingest time plus the worker's pick-up delay.
def upload(*, mb: float, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """One shard of about `mb` MB sent to `POST /api/v1/uploads` of the production server
    (docs/production.md's gunicorn command, on a loopback port, no worker running): the time
    until its 202 against the time to write the same bytes to a file in the uploads storage's
    directory (fsync'd), the server workers' peak resident set meanwhile; then a task worker is
    started and the upload is timed until done (its pick-up delay and its ingest apart), beside
    an inline ingest of a second shard of the same size. The storage is a directory of its own
    beside the database, removed at the end."""
    from records.models import ApiToken

    report: dict[str, Any] = {
        "database": connection.vendor,
        "sizes": {"upload_mb": mb},
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "method": {
            "answer": "wall time from the first byte sent to the 202's body read, over loopback",
            "disk_write": "the same bytes written to a new file beside the database and fsync'd",
            "memory": "VmHWM of each gunicorn worker process, sampled every 20 ms",
            "server_cpu": "user and system CPU time the server's processes had during the POST",
        },
    }
    attempts = max(50, int(mb * 1e6 / 6470))  # a generated attempt is about 6.5 KB of shard
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        say(f"generating two shards of about {mb:g} MB")
        sent, _, _ = generate(tmp, attempts, run_id="bench-upload", seed=300)
        inline, _, _ = generate(tmp, attempts, run_id="bench-upload-inline", seed=301)
        size = sent.stat().st_size
        _quiet()
        store = Path(tempfile.mkdtemp(prefix="bench-uploads-", dir=_database_dir(tmp)))
        os.environ["EVALDASH_UPLOAD_DIR"] = str(store)  # for the server and the worker
        report["disk_write"] = _disk_write(sent, store)
        _, raw = ApiToken.issue("bench")
        server, port, log = _serve(tmp)
        try:
            _quiet()
            answer = _post_file(port, raw, sent, server.pid)
            up = Upload.objects.get(pk=answer["body"]["upload"])
            report["answer"] = {
                "status": answer["status"],
                "seconds": answer["seconds"],
                "bytes": size,
                "server_worker_max_rss_mb": answer["max_rss_kb"] / 1024,
                "server_cpu_seconds": answer["server_cpu_seconds"],
                "load_average": answer["load_average"],
                "over_disk_write": answer["seconds"] / report["disk_write"]["seconds"],
                "queued": up.status,
            }
            say(
                f"upload of {size / 1e6:.0f} MB: {answer['status']} in {answer['seconds']:.2f} s "
                f"= {report['answer']['over_disk_write']:.2f}x the disk write "
                f"({report['disk_write']['seconds']:.2f} s); server worker peak "
                f"{answer['max_rss_kb'] / 1024:.0f} MB, server CPU "
                f"{answer['server_cpu_seconds']:.2f} s, load average {answer['load_average']}"
            )
            report["answer"]["kept"] = _kept_files(store)
            report["done"] = _work_off(up, tmp, log)
            report["done"]["left_in_storage"] = _kept_files(store)
            say("upload done: " + json.dumps(report["done"]))
        finally:
            _stop_process(server)
            log.close()
            shutil.rmtree(store, ignore_errors=True)
            os.environ.pop("EVALDASH_UPLOAD_DIR", None)
        _quiet()
        report["inline_ingest"] = {
            k: v for k, v in ingest_paths([inline]).items() if k not in ("runs", "shard_seconds")
        }
        ingest_s = report["inline_ingest"]["seconds"]
        done = report["done"]
        report["done"]["over_inline_ingest_plus_pickup"] = done["seconds_after_answer"] / (
            ingest_s + done["pickup_seconds"]
        )
        say(f"inline ingest of the same size: {ingest_s:.1f} s")
    out.write_text(json.dumps(report, indent=2))
    return report


def _database_dir(tmp: Path) -> Path:
    """Beside the SQLite database, else in the checkout's var/ (where uploads wait by default):
    on this machine's disk either way, not a memory-backed temporary directory."""
    if connection.vendor == "sqlite":
        return Path(settings.DATABASES["default"]["NAME"]).parent
    return Path(settings.BASE_DIR) / "var"


def _kept_files(store: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(store))


def _disk_write(path: Path, directory: Path) -> dict[str, float]:
    data = path.read_bytes()
    target = directory / "bench-disk-write.bin"
    t0 = time.perf_counter()
    with open(target, "wb") as fh:
        for i in range(0, len(data), 8 * 1024 * 1024):
            fh.write(data[i : i + 8 * 1024 * 1024])
        fh.flush()
        os.fsync(fh.fileno())
    seconds = time.perf_counter() - t0
    target.unlink()
    return {"seconds": seconds, "bytes": len(data), "mb_per_s": len(data) / 1e6 / seconds}


def _serve(tmp: Path) -> tuple[subprocess.Popen, int, Any]:
    import re
    import socket
    import urllib.request

    text = (Path(settings.BASE_DIR) / "docs" / "production.md").read_text()
    found = re.search(r"```sh\n(gunicorn [^`]+?)\n(?=python manage.py db_worker)", text)
    if not found:
        raise RuntimeError("docs/production.md shows no gunicorn command")
    args = found.group(1).replace("\\\n", " ").split()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args[args.index("--bind") + 1] = f"127.0.0.1:{port}"
    log = open(tmp / "server.log", "w")  # noqa: SIM115
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / args[0]), *args[1:]],
        cwd=settings.BASE_DIR,
        env=_server_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5).close()
            return server, port, log
        except OSError as exc:
            if server.poll() is not None or time.monotonic() > deadline:
                log_text = (tmp / "server.log").read_text()
                raise RuntimeError(f"the server did not start: {log_text}") from exc
            time.sleep(0.2)


def _server_env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DATABASE_URL": _database_url(),
        "EVALDASH_TASK_BACKEND": "database",
        "EVALDASH_INSECURE_DEV_KEY": "1",
        "EVALDASH_SECURE_COOKIES": "0",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
    }


def _post_file(port: int, token: str, path: Path, server_pid: int) -> dict[str, Any]:
    """POST one file as multipart field `file`, streamed from disk, sampling the server's
    worker processes' peak resident set meanwhile."""
    import http.client
    import threading
    import uuid

    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{path.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    length = len(head) + path.stat().st_size + len(tail)

    def body():
        yield head
        with open(path, "rb") as fh:
            while piece := fh.read(1024 * 1024):
                yield piece
        yield tail

    peaks: dict[int, int] = {}
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.02):
            tree = tree_memory_kb(server_pid)
            if tree:
                peaks.update(tree[1])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    cpu_before = _tree_cpu_seconds(server_pid)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    t0 = time.perf_counter()
    conn.request(
        "POST",
        "/api/v1/uploads",
        body=body(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(length),
        },
    )
    response = conn.getresponse()
    payload = response.read()
    seconds = time.perf_counter() - t0
    cpu = _tree_cpu_seconds(server_pid) - cpu_before
    sampling.set()
    sampler.join()
    conn.close()
    if response.status != 202:
        raise RuntimeError(f"the upload answered {response.status}: {payload[:500]!r}")
    peaks.pop(server_pid, None)  # the master only forks the workers
    return {
        "status": response.status,
        "seconds": seconds,
        "body": json.loads(payload),
        "max_rss_kb": max(peaks.values(), default=0),
        "server_cpu_seconds": cpu,
        "load_average": load,
    }


def _tree_cpu_seconds(root: int) -> float:
    """The CPU time (user and system) a process and its descendants have had so far, those
    that ended counted too (the kernel adds a child's time to its parent's when it is reaped):
    what the work cost, whatever else shares the machine's cores meanwhile. 0 without /proc."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0.0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
            total += sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            continue
    return total


def process_tree(root: int) -> list[int]:
    """A process and its descendants alive now, the process first; [] without /proc."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            children = []
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    children += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
        found.append(pid)
        todo += children
    return found


@contextmanager
def _server_held(cores: set[int]) -> Iterator[bool]:
    """A PostgreSQL server on this machine held to `cores` for the block: its main process (so
    the backends it starts meanwhile, the benchmark's, inherit them) and every process it has.
    After it, each is given back its own cores, and one started meanwhile its main process's.
    True where the server was held; False for SQLite, a server elsewhere, or one this user may
    not change (another user's, without the rights)."""
    server = database_server_pid()
    if server is None or not hasattr(os, "sched_setaffinity"):
        yield False
        return
    own: dict[int, set[int]] = {}
    try:
        for pid in process_tree(server):
            try:
                own[pid] = os.sched_getaffinity(pid)
                os.sched_setaffinity(pid, cores)
            except OSError:
                own.pop(pid, None)
        yield server in own
    finally:
        every = own.get(server)
        for pid in process_tree(server) if every is not None else own:
            try:
                os.sched_setaffinity(pid, own.get(pid, every))
            except OSError:
                continue


def _cores() -> int:
    """The cores this process may keep busy: those it may run on, fewer where its control
    group's CPU quota (`cpu.max`, a container's `--cpus`) allows less."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
    except (OSError, ValueError):
        return cores
    if quota == "max":
        return cores
    return max(1, min(cores, math.ceil(int(quota) / int(period))))


# How many cores a perfectly parallel ingest would keep busy.
CORES = _cores()


def database_server_pid() -> int | None:
    """The main process of a PostgreSQL server on this machine (its backends' time is part of
    an ingest's), None for SQLite or a server elsewhere."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        backend = cur.fetchone()[0]
    try:
        with open(f"/proc/{backend}/comm") as fh:
            if not fh.read().startswith("postgres"):
                return None  # a process of this machine's that shares a remote backend's id
        with open(f"/proc/{backend}/stat") as fh:
            return int(fh.read().rpartition(")")[2].split()[1])  # its parent: the postmaster
    except (OSError, ValueError, IndexError):
        return None


def _cpu_seconds() -> float:
    """CPU time so far of this process, everything it started, and the database server where
    it runs here (all of it: every client's backends, its own background processes), so
    differences of two readings are what the work between them cost on a server of its own."""
    server = database_server_pid()
    return _tree_cpu_seconds(os.getpid()) + (_tree_cpu_seconds(server) if server else 0.0)


def _work_off(up: Upload, tmp: Path, log: Any) -> dict[str, Any]:
    """Start a task worker and wait for the upload to be done."""
    answered = time.perf_counter()
    worker = subprocess.Popen(
        [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "db_worker"]
        + ["--no-startup-delay", "--no-reload", "--verbosity", "0"],
        cwd=settings.BASE_DIR,
        env=_server_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        while not up.finished:
            if worker.poll() is not None:
                raise RuntimeError("the task worker stopped")
            time.sleep(0.1)
            up.refresh_from_db()
    finally:
        _stop_process(worker)
    seconds = time.perf_counter() - answered
    if up.status != Upload.Status.DONE:
        raise RuntimeError(f"the upload failed: {up.error}")
    worked = (up.finished_at - up.started_at).total_seconds()
    return {
        "seconds_after_answer": seconds,
        "worker_seconds": worked,
        "pickup_seconds": seconds - worked,
        "stored": len(up.summary.get("stored", [])),
    }


def _stop_process(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
