"""Scoring as tasks: one task per run a new corpus key applies to, and the sweep of runs left
unscored.

A key stored by an upload queues one `score_run_task` per run of its digest, in the key's own
transaction (a worker sees the key and its tasks together or neither). Each task scores its run
against the newest key of its digest, so runs end scored against the newest key whatever order
workers take them in, and a task run twice (or after a page scored the run) stores nothing
twice. Scoring waits behind uploads (a lower priority): a CI job waiting on its upload is not
held up by a re-scoring of old runs.

The sweep picks up runs whose key is stored but that have no scoring (a killed ingest): a
worker's heartbeat queues it every SWEEP_SECONDS while any such run exists, at the lowest
priority (so it runs when the worker is otherwise idle), and it scores at most SWEEP_RUNS runs
before queueing itself again.
"""

from __future__ import annotations

import time
from typing import Any

from django.db.models import Count, IntegerField, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.tasks import task
from django_tasks_db.models import DBTaskResult

from records.models import CorpusKey, Run, Scoring
from records.scorer.score import SCORER_VERSION
from records.scoring.run import (
    score_pending_runs,
    score_run,
)

SCORE_TASK = "records.tasks.scoring.score_run_task"
SWEEP_TASK = "records.tasks.scoring.sweep_unscored_runs"
SCORE_PRIORITY = -10
SWEEP_PRIORITY = -50
SWEEP_SECONDS = 60
SWEEP_RUNS = 20

STATES = ("queued", "running", "scored", "failed")


def failed(scoring: Scoring) -> bool:
    """A scoring that stored no verdict and says why (a refused key, a scorer error)."""
    return not scoring.verdict_count and bool(scoring.error)


@task(priority=SCORE_PRIORITY)
def score_run_task(run_pk: int, key: int | None = None, rebuild: bool = False) -> dict[str, Any]:
    """Score one stored run against the newest key of its digest (`key` names the key whose
    arrival queued it, for that key's progress); what it did, as {"state", "key", "scoring"}.
    A run already scored against that key by this scorer is left as it is, unless `rebuild`
    asks for its verdicts, rows and statistics to be made again."""
    run = Run.objects.filter(pk=run_pk).first()
    newest = run.key() if run is not None else None
    if run is None or newest is None:
        return {"state": "skipped", "key": None, "scoring": None}
    scoring = run.latest_scoring()
    if rebuild or not (
        scoring is not None
        and scoring.key_id == newest.pk
        and scoring.scorer_version == SCORER_VERSION
    ):
        scoring = score_run(run, newest)
    return {
        "state": "failed" if failed(scoring) else "scored",
        "key": newest.pk,
        "scoring": scoring.pk,
    }


def enqueue_rescoring(key: CorpusKey) -> list[int]:
    """Queue one scoring task per stored run of the key's digest; their run ids. Call it in the
    transaction that stores the key."""
    runs = Run.objects.filter(corpus_digest=key.digest).order_by("pk")
    ids = list(runs.values_list("pk", flat=True))
    for pk in ids:
        score_run_task.enqueue(pk, key=key.pk)
    return ids


def rescoring_tasks(key: CorpusKey) -> QuerySet[DBTaskResult]:
    """The scoring tasks the key's arrival queued (one per run)."""
    return DBTaskResult.objects.filter(task_path=SCORE_TASK, args_kwargs__kwargs__key=key.pk)


def rescoring_progress(key: CorpusKey) -> dict[str, int]:
    """How far the key's re-scoring is, counted in the database: runs queued, running, scored
    (against the newest key of the digest) and failed; {} when its arrival queued none."""
    counts = dict.fromkeys(STATES, 0)
    rows = (
        rescoring_tasks(key)
        .annotate(state=KT("return_value__state"))
        .values_list("status", "state")
        .annotate(n=Count("id"))
        .order_by()
    )
    total = 0
    for status, state, n in rows:
        total += n
        if status == "READY":
            counts["queued"] += n
        elif status == "RUNNING":
            counts["running"] += n
        elif status == "FAILED" or state == "failed":
            counts["failed"] += n
        else:
            counts["scored"] += n
    return counts if total else {}


def run_states(key: CorpusKey, runs: list[Run]) -> dict[int, str]:
    """Each run's re-scoring state by run id: queued, running or failed (its task), else what its
    latest scoring says: scored (against this key), failed, newer (against a newer key),
    other (against another key) or unscored. Two queries, whatever the number of runs."""
    pks = [r.pk for r in runs]
    waiting = {
        int(pk): status
        for pk, status in rescoring_tasks(key)
        .filter(status__in=["READY", "RUNNING", "FAILED"])
        .annotate(run=Cast(KT("args_kwargs__args__0"), IntegerField()))
        .filter(run__in=pks)
        .values_list("run", "status")
    }
    latest: dict[int, Scoring] = {}
    for s in (
        Scoring.objects.filter(run__in=pks)
        .defer("key__document")
        .order_by("run", "-created_at", "-id")
    ):
        latest.setdefault(s.run_id, s)
    states = {}
    for run in runs:
        scoring = latest.get(run.pk)
        if run.pk in waiting:
            states[run.pk] = {"READY": "queued", "RUNNING": "running"}.get(
                waiting[run.pk], "failed"
            )
        elif scoring is None:
            states[run.pk] = "unscored"
        elif scoring.key_id == key.pk:
            states[run.pk] = "failed" if failed(scoring) else "scored"
        elif scoring.key_id > key.pk:
            states[run.pk] = "newer"
        else:
            states[run.pk] = "other"
    return states


@task(priority=SWEEP_PRIORITY)
def sweep_unscored_runs() -> int:
    """Score up to SWEEP_RUNS runs left unscored; queued again while more remain."""
    made = score_pending_runs(limit=SWEEP_RUNS)
    if len(made) >= SWEEP_RUNS and Run.objects.pending().exists():
        sweep_unscored_runs.enqueue()
    return len(made)


class Sweeper:
    """When a worker queues its next sweep: at its first beat, then every SWEEP_SECONDS, only
    while some run waits for one and no sweep is already queued or running."""

    def __init__(self) -> None:
        self.last = float("-inf")

    def maybe_enqueue(self) -> bool:
        now = time.monotonic()
        if now - self.last < SWEEP_SECONDS:
            return False
        self.last = now
        busy = DBTaskResult.objects.filter(task_path=SWEEP_TASK, status__in=["READY", "RUNNING"])
        if busy.exists() or not Run.objects.pending().exists():
            return False
        sweep_unscored_runs.enqueue()
        return True
