"""Which task workers are alive, by their heartbeats (`records.tasks.workers` writes them) and,
on SQLite, by their processes: what re-queueing an orphaned task and taking over a running upload
both rest on."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.utils import timezone

from records.models.intake import WorkerBeat


def alive_workers(now=None) -> set[str]:
    """The ids of the workers taken to be alive: those that beat within
    EVALDASH_TASK_STALE_SECONDS and, on SQLite, also those whose process still exists. On SQLite
    every worker is on this machine (the database is a file here), and a beat waits for the one
    write lock behind any long transaction (a big shard, a scoring): a worker whose beat is late
    for that reason is alive, and its task must not be given to another."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EVALDASH_TASK_STALE_SECONDS)
    beats = WorkerBeat.objects.values_list("worker_id", "beat_at", "host", "pid")
    here = socket.gethostname()[:200]
    local = connection.vendor == "sqlite"
    return {
        worker
        for worker, beat_at, host, pid in beats
        if beat_at >= stale or (local and host == here and process_exists(pid))
    }


def process_exists(pid: int) -> bool:
    """Whether a worker process of this machine with this pid is running."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, as another user's
    try:
        return b"db_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc to tell a reused pid apart: taken to be the worker


def earlier_try_stopped(worker_ids: list[str]) -> bool:
    """Whether the worker of a task's earlier try is gone, so a running upload that try claimed
    may be taken over: the task was put back by `requeue_orphans` (it names an earlier worker)
    and that worker is not alive now. The same id as this worker's means an earlier process under
    that id, which is gone (a worker runs one task at a time)."""
    if len(worker_ids) < 2:
        return False
    earlier, current = worker_ids[-2], worker_ids[-1]
    return earlier == current or earlier not in alive_workers()
