"""Heavy work as tasks of Django's Tasks framework: an upload's ingest here, a run's scoring and
the sweep of unscored runs in `records.tasks.scoring`, a run's search index and the sweep of
runs not yet indexed in `records.tasks.indexing`.

Each task is safe to run twice (a worker killed after its work but before marking it done, or a
claim taken to be stale): an upload is claimed by a conditional update of its status and tries,
every later update names that try (so a superseded try changes nothing and a done upload is never
reopened), and a shard is stored once by its sha256, so a repeated ingest
stores nothing twice and reports what the first try stored as stored by this upload.
Failures are retried a few times (EVALDASH_TASK_MAX_TRIES) and then shown as failed with their
error. The command line calls the same functions directly.
"""

from __future__ import annotations

import functools
import logging
import threading
from datetime import timedelta
from typing import IO, Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Sum
from django.tasks import TaskContext, task
from django.tasks.exceptions import InvalidTask
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from records.ingest import ingest
from records.ingest.documents import rescoring_queued_by
from records.ingest.inputs import disk_full
from records.models import Run, ShardFile, Upload
from records.search.index import adopt, indexed_by, inline_indexing, not_yet_indexed
from records.tasks.indexing import index_run_task
from records.tasks.liveness import earlier_try_stopped
from records.tasks.pending import discard, forget, keep_files, pending_inputs
from records.tasks.scoring import enqueue_rescoring, score_run_task

log = logging.getLogger(__name__)

__all__ = [
    "enqueue_upload",
    "index_run_task",
    "ingest_upload",
    "queue_kept",
    "queue_upload",
    "run_upload",
    "score_run_task",
]


def queue_upload(
    upload: Upload, files: list[tuple[str, IO[bytes]]], *, allow_digest_mismatch: bool
) -> Upload:
    """Keep an upload's files in the uploads storage and queue its ingest (`queue_kept`)."""
    return queue_kept(upload, keep_files(files), allow_digest_mismatch=allow_digest_mismatch)


def queue_kept(
    upload: Upload, kept: list[dict[str, Any]], *, allow_digest_mismatch: bool
) -> Upload:
    """Save an upload naming its files already in the storage (`keep_files`) and queue its
    ingest once that commits: a worker sees the upload whole or not at all, and the ingest never
    runs inside the caller's transaction (with the immediate backend it has run on return). If
    the row is not committed, the kept files are deleted again, so nothing of the upload
    remains. Called outside any transaction. An upload whose task was never written (the process
    died between the commit and the enqueue) is queued by a worker's heartbeat
    (`records.tasks.workers`)."""
    committed: list[bool] = []
    try:
        with transaction.atomic():
            upload.status = Upload.Status.QUEUED
            upload.allow_digest_mismatch = allow_digest_mismatch
            upload.files = kept
            upload.progress = {"bytes_total": sum(int(f["size"]) for f in kept)}
            upload.save()
            transaction.on_commit(functools.partial(committed.append, True))
            transaction.on_commit(functools.partial(enqueue_upload, upload))
    except BaseException:
        if not committed:
            forget(kept)
        raise
    upload.refresh_from_db()
    return upload


def enqueue_upload(upload: Upload) -> None:
    ingest_upload.enqueue(upload.pk)


@task(takes_context=True)
def ingest_upload(context: TaskContext, upload_id: int) -> str:
    workers = context.task_result.worker_ids
    return run_upload(
        upload_id, reclaim=earlier_try_stopped(workers), worker=workers[-1] if workers else ""
    )


def run_upload(upload_id: int, *, reclaim: bool = False, worker: str = "") -> str:
    """Ingest a queued upload from its kept bytes (`claim_and_ingest`); the status it ends in.
    The runs it stores are indexed once it has ended (`inline_indexing`), by this process
    (`worker` names its task worker): a job waiting on the upload never waits on the index."""
    with inline_indexing(), indexed_by(worker):
        return claim_and_ingest(upload_id, reclaim=reclaim)


def claim_and_ingest(upload_id: int, *, reclaim: bool = False) -> str:
    """Claim a queued upload and ingest it; the status it ends in.

    The claim takes a queued upload, or a running one only when `reclaim` says the try that
    claimed it stopped (its task was put back by `requeue_orphans` and its worker is judged
    gone, by the heartbeat). Every later update names this try (`status=running, tries=N`), so a
    try another one superseded (judged gone while it was only slow) changes nothing when it
    finishes or fails: it neither reopens a done upload nor discards bytes the newer try reads."""
    upload = Upload.objects.filter(pk=upload_id).first()
    if upload is None:
        return Upload.Status.FAILED
    claimable = [Upload.Status.QUEUED] + ([Upload.Status.RUNNING] if reclaim else [])
    if upload.status not in claimable:
        return upload.status  # done already (a repeated task), given up, or another try's
    this_try = upload.tries + 1
    claimed = Upload.objects.filter(pk=upload_id, status=upload.status, tries=upload.tries).update(
        status=Upload.Status.RUNNING, started_at=timezone.now(), tries=this_try
    )
    if not claimed:
        return Upload.objects.get(pk=upload_id).status  # another try claimed it first
    upload.refresh_from_db()
    mine = Upload.objects.filter(pk=upload_id, status=Upload.Status.RUNNING, tries=this_try)
    if this_try > settings.EVALDASH_TASK_MAX_TRIES:
        give_up(upload, upload.error or "its worker stopped before it was done", this_try)
        return upload.status
    reporter = ProgressReporter(upload, this_try)
    try:
        # A key this upload brings queues its runs' scoring (one task per run) rather than
        # scoring every run of its digest here.
        with reporter, rescoring_queued_by(enqueue_rescoring):
            report = ingest(
                pending_inputs(upload),
                upload,
                reporter.progress,
                allow_digest_mismatch=upload.allow_digest_mismatch,
            )
    except Exception as exc:
        if full := disk_full(exc):
            return wait_for_room(upload, mine, this_try, full)
        log.exception("upload %s: try %s failed", upload_id, this_try)
        message = f"{type(exc).__name__}: {exc}"
        if this_try >= settings.EVALDASH_TASK_MAX_TRIES:
            give_up(upload, message, this_try)
            return upload.status
        if not mine.update(status=Upload.Status.QUEUED, error=message):
            return Upload.objects.get(pk=upload_id).status  # superseded: the newer try goes on
        enqueue_upload(upload)
        return Upload.Status.QUEUED
    return finish(upload, mine, report.as_dict(), reporter)


def wait_for_room(upload: Upload, mine: Any, this_try: int, full: str) -> str:
    """An ingest stopped by a full store (no fault of the upload's files): queued again with
    its bytes kept, this try not counted, and its task written to run after
    EVALDASH_FULL_RETRY_SECONDS; the waiter is told "waiting: database full". Where the backend
    runs tasks at once, the task is left to a worker's heartbeat (`queue_unqueued_uploads`)."""
    log.warning("upload %s: the %s is full; tried again later", upload.pk, full)
    if not mine.update(
        status=Upload.Status.QUEUED, tries=this_try - 1, error=f"{Upload.WAITING}{full} full"
    ):
        return Upload.objects.get(pk=upload.pk).status
    later = timezone.now() + timedelta(seconds=settings.EVALDASH_FULL_RETRY_SECONDS)
    try:
        ingest_upload.using(run_after=later).enqueue(upload.pk)
    except InvalidTask:
        pass  # the immediate backend defers nothing
    return Upload.Status.QUEUED


def finish(upload: Upload, mine: Any, summary: dict[str, Any], reporter: ProgressReporter) -> str:
    """End an upload whose shards are committed: done with its summary (each run named by
    `settle`). Whatever fails on the way ends it all the same: done with the summary as the
    ingest reported it (what was stored is stored), or, when not even that can be written,
    failed with the reason; only when the database takes no write at all does the error go on,
    and the heartbeat's sweep (`records.tasks.workers.end_abandoned_uploads`) ends it later."""
    try:
        linked = settle(dict(summary), upload)
    except Exception:
        log.exception("upload %s: its stored runs were not named in its summary", upload.pk)
        linked = summary
    try:
        figures = reporter.final()
    except Exception:  # noqa: BLE001 (the progress is a courtesy)
        figures = dict(upload.progress or {})
    try:
        return _mark_done(upload, mine, linked, figures)
    except Exception as exc:
        log.exception("upload %s: not marked done", upload.pk)
        reason = f"its shards were stored but it was not marked done: {type(exc).__name__}: {exc}"
    try:
        return _mark_done(upload, mine, summary, figures, error=reason)
    except Exception:
        log.exception("upload %s: not marked done with its plain summary", upload.pk)
    give_up(upload, reason, upload.tries)
    return upload.status


def _mark_done(
    upload: Upload,
    mine: Any,
    summary: dict[str, Any],
    figures: dict[str, Any],
    *,
    error: str = "",
) -> str:
    with transaction.atomic():
        done = mine.update(
            summary=summary,
            status=Upload.Status.DONE,
            finished_at=timezone.now(),
            error=error[:4000],
            progress=figures,
        )
        if done:
            discard(upload)
    return Upload.Status.DONE if done else Upload.objects.get(pk=upload.pk).status


def give_up(upload: Upload, error: str, this_try: int | None = None) -> None:
    """An upload that failed too often: failed, with its error, its bytes removed. Only an
    unfinished upload (and, given `this_try`, only while that try holds it) is changed."""
    claim = Upload.objects.filter(
        pk=upload.pk, status__in=[Upload.Status.QUEUED, Upload.Status.RUNNING]
    )
    if this_try is not None:
        claim = claim.filter(status=Upload.Status.RUNNING, tries=this_try)
    with transaction.atomic():
        if claim.update(
            status=Upload.Status.FAILED, error=error[:4000], finished_at=timezone.now()
        ):
            discard(upload)
    upload.refresh_from_db()


def settle(summary: dict[str, Any], upload: Upload) -> dict[str, Any]:
    """The summary with each stored and present shard's run named (run_id, page, gate), and
    shards that an earlier try of this same upload stored reported as stored, so a repeated
    ingest answers as the first one would have."""
    stored, present = list(summary["stored"]), []
    for entry in summary["already_present"]:
        shard = ShardFile.objects.filter(sha256=entry.get("sha256")).select_related("run").first()
        run = getattr(shard, "run", None) if shard else None
        if shard is not None and shard.upload_id == upload.pk and run is not None:
            stored.append(_restored(entry, shard, run))
        else:
            present.append({**entry, **_run_links(run)} if run else entry)
    summary["stored"] = [{**s, **_run_links(s)} for s in stored]
    summary["already_present"] = present
    return summary


def _restored(entry: dict[str, Any], shard: ShardFile, run: Run) -> dict[str, Any]:
    """A shard an earlier try of the upload stored, as this try reports it; its run scored
    and indexed now if that try's process died first (the index once this try is done)."""
    from records.scoring.run import score_if_unscored

    scoring = run.latest_scoring() or score_if_unscored(run)
    if not_yet_indexed(Run.objects.filter(pk=run.pk)).exists():
        adopt(run.pk)
    return {
        "file": entry["file"],
        "sha256": shard.sha256,
        "run": run.pk,
        "run_id": run.run_id,
        "attempts": run.attempt_count,
        "lines": shard.lines,
        "warnings": shard.warning_count,
        "seconds": None,
        "scored_against": scoring.key.digest if scoring else None,
    }


def _run_links(run: Run | dict[str, Any]) -> dict[str, Any]:
    pk, run_id = (run["run"], run["run_id"]) if isinstance(run, dict) else (run.pk, run.run_id)
    return {
        "run": pk,
        "run_id": run_id,
        "url": reverse("records:run", args=[pk]),
        "gate": gate_address(run_id),
    }


def gate_address(run_id: str) -> str | None:
    """The CI gate's address of a run (any run_id: a slash, a space, a quote are escaped in
    it); None for a run_id no address can carry (the empty one)."""
    try:
        return reverse("records:api-gate", args=[run_id])
    except NoReverseMatch:
        return None


class ProgressReporter:
    """Writes an upload's progress from a thread of its own (its own connection), so it is seen
    while a shard's transaction is open, and only while this try holds the upload. On SQLite
    (one writer at a time) its write waits for the lock at most WAIT_SECONDS and is tried again
    on the next tick, so there the figures move between shards and the reporter never holds up
    the ingest it reports on (a transaction open around the ingest would hold it for good)."""

    INTERVAL = 0.5
    WAIT_SECONDS = 0.5

    def __init__(self, upload: Upload, this_try: int | None = None) -> None:
        self.upload = upload
        self.this_try = upload.tries if this_try is None else this_try
        self.total = int(upload.progress.get("bytes_total") or 0)
        # The shard in hand and its bytes read, of its own size (an archive's entries are
        # counted as they are read out of it).
        self.state: dict[str, Any] = {"bytes_total": self.total, "file": "", "shard_bytes": None}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="upload-progress", daemon=True)

    def progress(self, name: str, done: int, total: int) -> None:
        self.state["file"] = name
        self.state["shard_bytes"] = [done, total]

    def __enter__(self) -> ProgressReporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def snapshot(self) -> dict[str, Any]:
        runs = Run.objects.filter(shard__upload_id=self.upload.pk).exclude(run_id="")
        figures = runs.aggregate(attempts=Sum("attempt_count"))
        return {
            **self.state,
            "shards_done": runs.count(),
            "attempts_done": figures["attempts"] or 0,
        }

    def final(self) -> dict[str, Any]:
        return {**self.snapshot(), "file": "", "shard_bytes": None}

    def _run(self) -> None:
        try:
            short_lock_wait(self.WAIT_SECONDS)
            while not self._stop.wait(self.INTERVAL):
                try:
                    Upload.objects.filter(
                        pk=self.upload.pk, status=Upload.Status.RUNNING, tries=self.this_try
                    ).update(progress=self.snapshot())
                except Exception:  # noqa: BLE001 (progress is a courtesy; the ingest goes on)
                    log.info("upload %s: progress not written", self.upload.pk, exc_info=True)
                    close_old_connections()
                    short_lock_wait(self.WAIT_SECONDS)
        finally:
            connection.close()


def short_lock_wait(seconds: float) -> None:
    """On SQLite, make this thread's connection wait at most `seconds` for the write lock
    (instead of the settings' timeout) before its statement fails."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
