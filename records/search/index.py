"""Keeping the index with the runs: written after a shard is stored, removed with its run,
rebuilt for runs stored before it existed.

The shard's transaction writes the run's outbox row (`queue_index`, a `PendingIndex`); once it
has committed, the run is indexed by a follow-up (`index_pending`, in a transaction of its own)
in the same process: at the end of the ingest that stored it (the command line, the demo), or,
in a worker, once the upload's task has marked the upload done (`inline_indexing`). A follow-up
that fails, or is lost with its process (killed between the commit and the index), is queued
as a task of its own by a worker's sweep (`records.tasks.indexing`): the row outlives both.
The follow-up is idempotent: it indexes a run only while its row exists and deletes the row in the transaction
that writes the run's documents, so a second try, a sweep of a lost one and a rebuild never
write a document twice. Until then the search names the run as still being indexed
(`not_yet_indexed`). Scores, the gate and the other pages read the stored rows, never the index,
and never wait for it."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from records.bulk.apart import reader
from records.bulk.tables import analyze_if_large
from records.bulk.threads import threaded
from records.models import Run
from records.search import engine
from records.search.models import PendingIndex, SearchCall, SearchEntry

log = logging.getLogger(__name__)

# The runs whose shards have committed and whose index is written when the outermost
# `inline_indexing` block ends; None outside one.
_waiting: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "index_waiting", default=None
)


# The task worker whose upload's task stores the runs, "" outside one (`indexed_by`).
_worker: contextvars.ContextVar[str] = contextvars.ContextVar("index_worker", default="")


@contextmanager
def indexed_by(worker: str) -> Iterator[None]:
    """Within this block, the runs stored are to be indexed by this task worker (named on
    their outbox rows, so a sweep leaves them to it while it is alive)."""
    token = _worker.set(worker)
    try:
        yield
    finally:
        _worker.reset(token)


def queue_index(run: Run) -> None:
    """Write the run's outbox row, in the caller's transaction (the shard's)."""
    PendingIndex.objects.create(run=run, worker=_worker.get())


def after_commit(run_pk: int) -> None:
    """The shard of this run has committed: its index is written when the outermost
    `inline_indexing` block ends (outside one, now)."""
    waiting = _waiting.get()
    if waiting is None:
        follow_up(run_pk)
    else:
        waiting.append(run_pk)


def adopt(run_pk: int) -> None:
    """A run stored by an earlier, killed process and not yet indexed: this one indexes it, as
    `after_commit` would its own, and its outbox row names this process's task worker, so a
    worker's sweep leaves it to this one while it lives rather than queue a second follow-up."""
    PendingIndex.objects.filter(run=run_pk).update(worker=_worker.get())
    after_commit(run_pk)


@contextmanager
def inline_indexing() -> Iterator[None]:
    """Within this block, the runs stored are indexed when it ends (after their shards, their
    scorings and whatever else the block does), each in its own transaction. An ingest is one
    such block; an upload's task is another around it, which ends once the upload is marked
    done. Nested, the outermost decides. A block left by an exception indexes nothing: its
    runs' outbox rows wait for a worker's sweep (`records.tasks.indexing`), or for
    `manage.py search_index`."""
    if _waiting.get() is not None:
        yield
        return
    waiting: list[int] = []
    token = _waiting.set(waiting)
    try:
        yield
    except BaseException:
        release(waiting)
        raise
    finally:
        _waiting.reset(token)
    # Every run not settled here, whatever stops the loop, is handed to the sweep: its row
    # naming this live worker, the sweep would leave it to this process for as long as it lives.
    # On PostgreSQL the runs of a zip are indexed side by side, each on a connection of its own
    # (`records.bulk.threads`): the server does most of an index's work, on both cores. Two
    # runs side by side do their work in opposite orders (`engine.index_new_run`).
    unsettled: list[int] = []
    done = 0
    try:
        for pk, settled in zip(waiting, threaded(follow_up, waiting), strict=True):
            if not settled:
                unsettled.append(pk)
            done += 1
    finally:
        release(unsettled + waiting[done:])


def release(runs: list[int]) -> None:
    """These runs are no longer this process's to index, though it may live on: their outbox
    rows name no worker, so the sweep queues their index. Never raises: on a failure (the
    database connection lost, say) it tries once more on a new connection where no
    transaction is open, and logs what it could not do."""
    if not runs:
        return
    try:
        PendingIndex.objects.filter(run__in=runs).update(worker="")
        return
    except Exception:  # noqa: BLE001 (tried again below, or logged)
        log.warning("runs %s: not handed to the sweep; trying again", runs, exc_info=True)
    if connection.in_atomic_block:
        log.error("runs %s: not handed to the sweep while this worker lives", runs)
        return
    try:
        connection.close_if_unusable_or_obsolete()
        PendingIndex.objects.filter(run__in=runs).update(worker="")
    except Exception:  # noqa: BLE001 (logged)
        log.exception("runs %s: not handed to the sweep while this worker lives", runs)


def follow_up(run_pk: int) -> bool:
    """`index_pending`, its try counted on the run's outbox row first (`start_try`); if it
    fails, the error is written on the row, and a worker's sweep queues the run's index task to
    try again (up to EVALDASH_TASK_MAX_TRIES tries). Whether the run is settled: indexed (or
    nothing to index), or its row handed to the sweep; not if even the failure could not be
    written (the connection lost, say), which is logged, not raised."""
    try:
        start_try(run_pk)
        index_pending(run_pk)
        return True
    except Exception as exc:  # noqa: BLE001 (the row stays, the error on it)
        log.warning("run %s: not indexed", run_pk, exc_info=True)
        try:
            failed_try(run_pk, exc)
        except Exception:  # noqa: BLE001 (the row stays; the caller hands it to the sweep)
            log.warning("run %s: its failed try not written", run_pk, exc_info=True)
            return False
        return True


# The tables whose statistics a large index write refreshes: the calls' filtered columns, and the
# documents, whose words' frequencies PostgreSQL plans a text query on (without them it took a
# common word for a rare one and read 343,000 calls by key to list `q=the`'s attempts: 1.7 s,
# against 0.6 s joined; ANALYZE of 600,000 documents, 3,000 sampled, takes 40 ms).
INDEX_TABLES = (SearchCall, SearchEntry)


def index_pending(run_pk: int) -> bool:
    """Index a run whose outbox row exists, and delete the row, in one transaction; whether it
    did (False: indexed already, or the run is gone). Safe to run twice or at once: on
    PostgreSQL the second waits for the row and then finds it gone; SQLite has one writer."""
    reach = reader(connection)  # before the transaction: whether the run's rows are committed
    with transaction.atomic():
        if not PendingIndex.objects.select_for_update().filter(run=run_pk).exists():
            return False
        engine.forget_run(run_pk)  # what an earlier, interrupted rebuild may have left
        calls = engine.index_new_run(run_pk, reach)
        PendingIndex.objects.filter(run=run_pk).delete()
    analyze_if_large(calls, INDEX_TABLES)
    return True


def start_try(run_pk: int, most: int | None = None) -> int | None:
    """Count a try of the run's index on its outbox row before the try starts, in a transaction
    of its own: a try lost with its process (kill -9, out of memory), which never reaches
    `failed_try`, is counted as well, so the sweep stops queueing a run whose index kills its
    worker once it has been tried EVALDASH_TASK_MAX_TRIES times. The row's tries now; None when
    there is nothing to try: no row (indexed, or its run deleted) or, `most` given, as many
    tries counted already (logged: left to `manage.py search_index`). On PostgreSQL a try under
    way elsewhere is waited for, and then has left no row."""
    with transaction.atomic():
        row = PendingIndex.objects.select_for_update().filter(run=run_pk).first()
        if row is None:
            return None
        if most is not None and row.tries >= most:
            log.error(
                "run %s: its index was tried %s times and not written (%s); not tried again"
                " until `manage.py search_index`",
                run_pk,
                row.tries,
                row.error,
            )
            return None
        row.tries += 1
        # What the row says if this try never ends it: a try that fails writes its error, one
        # that succeeds deletes the row.
        row.error = (
            f"try {row.tries} started and did not end (still running, or lost with its"
            " process: killed, out of memory)"
        )
        row.save(update_fields=["tries", "error"])
    if most is not None and row.tries == most:
        log.warning("run %s: index try %s, the last a task makes", run_pk, row.tries)
    return row.tries


def failed_try(run_pk: int, exc: BaseException) -> int:
    """Write a failed try's error on the run's outbox row (the try was counted as it started,
    `start_try`) and hand the row to the sweep; its tries."""
    row = PendingIndex.objects.filter(run=run_pk).first()
    if row is None:
        return 0
    row.error = f"{type(exc).__name__}: {exc}"[:4000]
    row.worker = ""  # no longer any worker's own: the sweep queues it again
    row.save(update_fields=["error", "worker"])
    return row.tries


def not_yet_indexed(runs: Any = None) -> Any:
    """Those of `runs` (a queryset of runs, or every run) that are stored but not yet indexed,
    as a queryset."""
    queryset = Run.objects.all() if runs is None else runs
    return queryset.filter(pending_index__isnull=False)


def indexing(run: Run) -> bool:
    """Whether this run is stored but not yet indexed; a run read with its outbox row
    (`select_related("pending_index")`) answers without a query."""
    return hasattr(run, "pending_index")


@receiver(pre_delete, sender=Run, dispatch_uid="records.search.forget_run")
def forget_run(sender: Any, instance: Run, **kwargs: Any) -> None:
    """A run's documents go with it, however it is deleted: its rows still exist here."""
    if connection.features.has_select_for_update:
        # A follow-up indexing the run holds its outbox row locked (`index_pending`) until its
        # documents have committed, which this transaction could not see to delete: they would
        # outlive the run. Locking the row waits for that follow-up to end, and then the
        # statements below (each with a new snapshot, READ COMMITTED) delete what it wrote;
        # one starting later waits for this delete and then finds no row. Django's delete
        # sends this signal inside its transaction. (SQLite has one writer at a time.)
        PendingIndex.objects.select_for_update().filter(run=instance.pk).exists()
    engine.forget_run(instance.pk)


def rebuild(runs: Any = None) -> int:
    """Index again every run (or those of `runs`), one transaction each, as a run just stored
    is indexed (`engine.index_new_run`); how many. After a large rebuild the calls' statistics
    are refreshed, as after a large ingest, so the search's plans fit what is now indexed rather
    than wait for autovacuum (or go without, where none runs)."""
    queryset = Run.objects.all() if runs is None else runs
    count = calls = 0
    for pk in queryset.order_by("pk").values_list("pk", flat=True):
        reach = reader(connection)  # before the transaction, as `index_pending` takes it
        with transaction.atomic():
            engine.forget_run(pk)
            calls += engine.index_new_run(pk, reach)
            PendingIndex.objects.filter(run=pk).delete()
        count += 1
    analyze_if_large(calls, INDEX_TABLES)
    return count
