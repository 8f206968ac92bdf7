"""What a task worker adds to django-tasks-db's: a heartbeat, and the re-queueing of tasks whose
worker stopped beating (killed with `kill -9`, out of memory, its machine gone).

Every worker beats every few seconds and, on the same beat, looks for running tasks whose worker
has not beaten for EVALDASH_TASK_STALE_SECONDS: each is put back in the queue (a conditional
update on its claim, so of several workers only one does it) or, once its workers have died
EVALDASH_TASK_MAX_TRIES times, marked failed with that said. The claim itself is
django-tasks-db's: `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL, an exclusive transaction on
SQLite, so no two workers take one task.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import IntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from records.models.intake import Upload, WorkerBeat
from records.tasks.indexing import queue_unindexed_runs
from records.tasks.liveness import alive_workers
from records.tasks.pending import sweep_storage
from records.tasks.scoring import Sweeper

log = logging.getLogger(__name__)

ORPHANED = "records.tasks.workers.WorkerStopped"
UPLOAD_TASK = "records.tasks.ingest_upload"


def beat(worker_id: str) -> None:
    WorkerBeat.objects.update_or_create(
        worker_id=worker_id,
        defaults={
            "beat_at": timezone.now(),
            "host": socket.gethostname()[:200],
            "pid": os.getpid(),
        },
    )


def requeue_orphans(now=None) -> list[str]:
    """Put back (or give up) the running tasks whose worker stopped beating; their ids."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EVALDASH_TASK_STALE_SECONDS)
    alive = alive_workers(now)
    done = []
    for result in DBTaskResult.objects.running().filter(started_at__lt=stale):
        if result.worker_ids and result.worker_ids[-1] in alive:
            continue
        tries = len(result.worker_ids)
        same_claim = DBTaskResult.objects.filter(
            pk=result.pk, status="RUNNING", started_at=result.started_at
        )
        if tries >= settings.EVALDASH_TASK_MAX_TRIES:
            message = f"its worker stopped before it was done, {tries} times; given up"
            if same_claim.update(
                status="FAILED",
                finished_at=now,
                exception_class_path=ORPHANED,
                traceback=message,
            ):
                _given_up(result, message)
                done.append(str(result.pk))
        elif same_claim.update(status="READY", started_at=None):
            log.warning("task %s: its worker stopped; queued again", result.pk)
            done.append(str(result.pk))
    return done


def uploads_named_by_tasks():
    """The ids of the uploads a queued or running ingest task names, as a subquery."""
    return (
        DBTaskResult.objects.filter(task_path=UPLOAD_TASK, status__in=["READY", "RUNNING"])
        .annotate(upload=Cast(KT("args_kwargs__args__0"), IntegerField()))
        .values("upload")
    )


def queue_unqueued_uploads(now=None) -> list[int]:
    """Queue the ingest of queued uploads that no task names (the process that stored one died
    between its commit and the enqueue its commit triggers); their ids. Only uploads older than
    EVALDASH_TASK_STALE_SECONDS are looked at, so an enqueue about to happen is not doubled (a
    doubled one would do nothing: the claim is conditional)."""
    from records.tasks import enqueue_upload

    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EVALDASH_TASK_STALE_SECONDS)
    named = uploads_named_by_tasks()
    lost = Upload.objects.filter(status=Upload.Status.QUEUED, created_at__lt=stale).exclude(
        pk__in=named
    )
    ids = []
    for upload in lost.order_by("pk")[:100]:
        log.warning("upload %s: queued with no task; its task is written now", upload.pk)
        enqueue_upload(upload)
        ids.append(upload.pk)
    return ids


def end_abandoned_uploads(now=None) -> list[int]:
    """End the running uploads no live task names (their task ended, failed or was deleted
    without ending them: a fault after the shards' commit that not even the upload's own
    ending survived): each is queued again for the try its bytes still allow, whose claim ends
    it as failed once its tries are spent, so none stays "running" for good; their ids. Only
    uploads started before EVALDASH_TASK_STALE_SECONDS are looked at, and the change is
    conditional on the try that holds it, so a try that is about to end itself is not
    disturbed."""
    from records.tasks import enqueue_upload, give_up

    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EVALDASH_TASK_STALE_SECONDS)
    named = uploads_named_by_tasks()
    abandoned = Upload.objects.filter(status=Upload.Status.RUNNING, started_at__lt=stale).exclude(
        pk__in=named
    )
    ids = []
    for upload in abandoned.order_by("pk")[:100]:
        reason = upload.error or "its task ended without ending it"
        if upload.tries >= settings.EVALDASH_TASK_MAX_TRIES:
            log.warning("upload %s: its task is gone and its tries are spent; failed", upload.pk)
            give_up(upload, reason, upload.tries)
        elif Upload.objects.filter(
            pk=upload.pk, status=Upload.Status.RUNNING, tries=upload.tries
        ).update(status=Upload.Status.QUEUED, error=reason):
            log.warning("upload %s: its task is gone; queued again", upload.pk)
            enqueue_upload(upload)
        else:
            continue
        ids.append(upload.pk)
    return ids


def _given_up(result: DBTaskResult, message: str) -> None:
    if result.task_path.endswith("ingest_upload") and result.args_kwargs.get("args"):
        from records.tasks import give_up

        upload = Upload.objects.filter(pk=result.args_kwargs["args"][0]).first()
        if upload is not None and not upload.finished:
            give_up(upload, message)


class Heart:
    """The beating thread of one worker process (its own database connection); on its beats it
    also queues the sweep of unscored runs when one is due (`records.tasks.scoring`) and the
    index of runs whose index task was lost (`records.tasks.indexing`)."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.every = max(1.0, settings.EVALDASH_TASK_STALE_SECONDS / 4)
        self.sweeper = Sweeper()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heart", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while True:
            try:
                beat(self.worker_id)
                requeue_orphans()
                queue_unqueued_uploads()
                end_abandoned_uploads()
                queue_unindexed_runs()
                sweep_storage()
                self.sweeper.maybe_enqueue()
            except Exception:  # noqa: BLE001 (a missed beat is retried on the next one)
                log.warning("worker %s: heartbeat failed", self.worker_id, exc_info=True)
                close_old_connections()
            if self._stop.wait(self.every):
                break
        connection.close()
