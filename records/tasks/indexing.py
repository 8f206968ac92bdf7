"""The search index as a task: a run's index tried again, and the sweep of runs whose
follow-up was lost.

A shard writes its run's outbox row (`PendingIndex`) in the shard's transaction; the process
that stored it indexes the run once the upload or ingest is done
(`records.search.index.inline_indexing`). Each try is counted on the row as it starts,
and one that fails writes its error there; one lost with its process (killed between the commit
and the index, or while it indexes) leaves the row naming no task: a worker's heartbeat queues
`index_run_task` for each such row (`queue_unindexed_runs`), so a failed or lost try is tried
again, up to EVALDASH_TASK_MAX_TRIES tries, like an upload. A run whose index kills its worker
each time (out of memory) is thus not tried for good. The task is idempotent
(`records.search.index.index_pending`).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import IntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.tasks import task
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from records.models import Upload
from records.search.index import failed_try, index_pending, start_try
from records.search.models import PendingIndex
from records.tasks.liveness import alive_workers

log = logging.getLogger(__name__)

INDEX_TASK = "records.tasks.indexing.index_run_task"
# Behind an upload's ingest (a CI job waits on that), ahead of re-scoring old runs: a search
# waits on this one.
INDEX_PRIORITY = -5


@task(priority=INDEX_PRIORITY)
def index_run_task(run_pk: int) -> bool:
    """Write the index of a stored run, unless it is written already or has been tried
    EVALDASH_TASK_MAX_TRIES times; whether this did. The try is counted before it starts
    (`start_try`), so one whose worker is killed counts too."""
    tries = start_try(run_pk, settings.EVALDASH_TASK_MAX_TRIES)
    if tries is None:
        return False
    try:
        return index_pending(run_pk)
    except Exception as exc:
        failed_try(run_pk, exc)
        log.exception("run %s: index try %s failed; the sweep queues it again", run_pk, tries)
        raise


def enqueue_index(run_pk: int) -> None:
    index_run_task.enqueue(run_pk)


def queue_unindexed_runs(now=None) -> list[int]:
    """Queue the index of stored runs that wait for it with no task queued or running (lost on
    the way); their pks. Only rows older than EVALDASH_TASK_STALE_SECONDS are looked at, so an
    enqueue about to happen is not doubled (a doubled one would do nothing), only those that
    failed fewer than EVALDASH_TASK_MAX_TRIES times, and none whose upload is still at work."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EVALDASH_TASK_STALE_SECONDS)
    named = (
        DBTaskResult.objects.filter(task_path=INDEX_TASK, status__in=["READY", "RUNNING"])
        .annotate(run=Cast(KT("args_kwargs__args__0"), IntegerField()))
        .values("run")
    )
    # A run whose upload is still queued or running is indexed by that upload's task, once it
    # is done (also a run an earlier, killed try stored: `settle`).
    working = [Upload.Status.QUEUED, Upload.Status.RUNNING]
    # And one a live worker is indexing, or will once its upload is done.
    lost = (
        PendingIndex.objects.filter(queued_at__lt=stale, tries__lt=settings.EVALDASH_TASK_MAX_TRIES)
        .exclude(run__in=named)
        .exclude(run__shard__upload__status__in=working)
        .exclude(worker__in=[w for w in alive_workers(now) if w])
    )
    pks = []
    for pk in lost.order_by("run").values_list("run", flat=True)[:100]:
        log.warning("run %s: waiting for its index with no task; its task is written now", pk)
        enqueue_index(pk)
        pks.append(pk)
    return pks
