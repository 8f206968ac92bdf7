"""Keeping the index with the runs: written after a shard is stored, removed with its run,
rebuilt for runs stored before it existed.

The shard's transaction writes the run's outbox row (`queue_index`, a `PendingIndex`); once it
has committed, the run is indexed by a follow-up (`index_pending`, in a transaction of its own):
inline, at the end of the ingest that stored it (the command line, the demo), or as a task a
worker runs, where the ingest is itself a task (`indexing_queued_by`). The follow-up is
idempotent: it indexes a run only while its row exists and deletes the row in the transaction
that writes the run's documents, so a second try, a sweep of a lost one and a rebuild never
write a document twice. Until then the search names the run as still being indexed
(`not_yet_indexed`). Scores, the gate and the other pages read the stored rows, never the index,
and never wait for it."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from records.bulk.tables import analyze_if_large
from records.models import Run
from records.search import engine
from records.search.models import PendingIndex, SearchCall

log = logging.getLogger(__name__)

# How a committed shard's run reaches its index: None, inline once the ingest is done (the
# runs waiting are collected by `inline_indexing`); else the callable queueing its task.
_queue_indexing: contextvars.ContextVar[Callable[[int], None] | None] = contextvars.ContextVar(
    "queue_indexing", default=None
)
_waiting: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "index_waiting", default=None
)


@contextmanager
def indexing_queued_by(queue: Callable[[int], None]) -> Iterator[None]:
    """Within this block, a stored run's index is queued by `queue` (its pk), not written
    inline at the end of the ingest."""
    token = _queue_indexing.set(queue)
    try:
        yield
    finally:
        _queue_indexing.reset(token)


def queue_index(run: Run) -> None:
    """Write the run's outbox row, in the caller's transaction (the shard's)."""
    PendingIndex.objects.create(run=run)


def after_commit(run_pk: int) -> None:
    """The shard of this run has committed: queue its index, or keep it for `inline_indexing`
    (outside one, index it now)."""
    queue = _queue_indexing.get()
    if queue is not None:
        try:
            queue(run_pk)
        except Exception:  # noqa: BLE001 (its row stays: a worker's sweep queues it again)
            log.warning("run %s: its index was not queued", run_pk, exc_info=True)
        return
    waiting = _waiting.get()
    if waiting is None:
        index_pending(run_pk)
    else:
        waiting.append(run_pk)


@contextmanager
def inline_indexing() -> Iterator[None]:
    """Within this block, the runs stored for an inline index are indexed when it ends (after
    their shards, their scorings and the rest of the ingest), each in its own transaction. A
    failure leaves that run's outbox row for a worker's sweep or `manage.py search_index`."""
    waiting: list[int] = []
    token = _waiting.set(waiting)
    try:
        yield
    finally:
        _waiting.reset(token)
    for pk in waiting:
        try:
            index_pending(pk)
        except Exception as exc:  # noqa: BLE001 (the row stays, the error on it)
            log.warning("run %s: not indexed", pk, exc_info=True)
            failed_try(pk, exc)


def index_pending(run_pk: int) -> bool:
    """Index a run whose outbox row exists, and delete the row, in one transaction; whether it
    did (False: indexed already, or the run is gone). Safe to run twice or at once: on
    PostgreSQL the second waits for the row and then finds it gone; SQLite has one writer."""
    with transaction.atomic():
        if not PendingIndex.objects.select_for_update().filter(run=run_pk).exists():
            return False
        engine.forget_run(run_pk)  # what an earlier, interrupted rebuild may have left
        calls = engine.index_run(run_pk)
        PendingIndex.objects.filter(run=run_pk).delete()
    analyze_if_large(calls, (SearchCall,))
    return True


def failed_try(run_pk: int, exc: BaseException) -> int:
    """Count a failed follow-up on the run's outbox row, with its error; its tries now."""
    row = PendingIndex.objects.filter(run=run_pk).first()
    if row is None:
        return 0
    row.tries += 1
    row.error = f"{type(exc).__name__}: {exc}"[:4000]
    row.save(update_fields=["tries", "error"])
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


def index_run(
    run: Run | int, calls_left: list[int] | None = None, attempts_left: list[int] | None = None
) -> None:
    """Index a run just stored, in the caller's transaction (the shard's); `calls_left` and
    `attempts_left` as `engine.index_run` takes them."""
    engine.index_run(run if isinstance(run, int) else run.pk, calls_left, attempts_left)


def index_calls(call_ids: list[int], *, run: int, documents: bool) -> None:
    """Index calls of the run `run` (its pk) just written, in the caller's transaction, as
    `engine.index_calls` does."""
    engine.index_calls(call_ids, run=run, documents=documents)


@receiver(pre_delete, sender=Run, dispatch_uid="records.search.forget_run")
def forget_run(sender: Any, instance: Run, **kwargs: Any) -> None:
    """A run's documents go with it, however it is deleted: its rows still exist here."""
    engine.forget_run(instance.pk)


def rebuild(runs: Any = None) -> int:
    """Index again every run (or those of `runs`), one transaction each; how many. After a
    large rebuild the calls' statistics are refreshed, as after a large ingest, so the search's
    plans fit what is now indexed rather than wait for autovacuum (or go without, where none
    runs)."""
    queryset = Run.objects.all() if runs is None else runs
    count = calls = 0
    for pk in queryset.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            engine.forget_run(pk)
            calls += engine.index_run(pk)
            PendingIndex.objects.filter(run=pk).delete()
        count += 1
    analyze_if_large(calls, (SearchCall,))
    return count
