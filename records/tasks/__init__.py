"""Heavy work as tasks of Django's Tasks framework: an upload's ingest and a run's scoring.

Each task is safe to run twice (a worker killed after its work but before marking it done, or a
claim taken to be stale): an upload is claimed by a conditional update of its status and an
already done one is left alone, and a shard is stored once by its sha256, so a repeated ingest
stores nothing twice and reports what the first try stored as stored by this upload.
Failures are retried a few times (EVALDASH_TASK_MAX_TRIES) and then shown as failed with their
error. The command line calls the same functions directly.
"""

from __future__ import annotations

import logging
import threading
from typing import IO, Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Sum
from django.tasks import task
from django.urls import reverse
from django.utils import timezone

from records.ingest import ingest
from records.models import Run, ShardFile, Upload
from records.tasks.pending import discard, keep_inputs, pending_inputs

log = logging.getLogger(__name__)

__all__ = ["enqueue_upload", "ingest_upload", "queue_upload", "run_upload", "score_run_task"]


def queue_upload(
    upload: Upload, files: list[tuple[str, IO[bytes]]], *, allow_digest_mismatch: bool
) -> Upload:
    """Keep an upload's bytes and queue its ingest, all in one transaction: a worker sees the
    upload whole or not at all. With the immediate backend the ingest has run on return."""
    with transaction.atomic():
        upload.status = Upload.Status.QUEUED
        upload.allow_digest_mismatch = allow_digest_mismatch
        upload.save()
        keep_inputs(upload, files)
        upload.progress = {"bytes_total": _total(upload)}
        upload.save(update_fields=["progress"])
        enqueue_upload(upload)
    upload.refresh_from_db()
    return upload


def _total(upload: Upload) -> int:
    return sum(i.size or 0 for i in pending_inputs(upload))


def enqueue_upload(upload: Upload) -> None:
    ingest_upload.enqueue(upload.pk)


@task()
def ingest_upload(upload_id: int) -> str:
    return run_upload(upload_id)


def run_upload(upload_id: int) -> str:
    """Ingest a queued upload from its kept bytes; the status it ends in."""
    claimed = Upload.objects.filter(
        pk=upload_id, status__in=[Upload.Status.QUEUED, Upload.Status.RUNNING]
    ).update(status=Upload.Status.RUNNING, started_at=timezone.now(), tries=F("tries") + 1)
    upload = Upload.objects.get(pk=upload_id)
    if not claimed:
        return upload.status  # done already (a repeated task) or given up
    if upload.tries > settings.EVALDASH_TASK_MAX_TRIES:
        give_up(upload, upload.error or "its worker stopped before it was done")
        return upload.status
    reporter = ProgressReporter(upload)
    try:
        with reporter:
            report = ingest(
                pending_inputs(upload),
                upload,
                reporter.progress,
                allow_digest_mismatch=upload.allow_digest_mismatch,
            )
    except Exception as exc:
        log.exception("upload %s: try %s failed", upload_id, upload.tries)
        message = f"{type(exc).__name__}: {exc}"
        if upload.tries >= settings.EVALDASH_TASK_MAX_TRIES:
            give_up(upload, message)
            return upload.status
        Upload.objects.filter(pk=upload_id).update(status=Upload.Status.QUEUED, error=message)
        enqueue_upload(upload)
        return Upload.Status.QUEUED
    summary = settle(report.as_dict(), upload)
    with transaction.atomic():
        Upload.objects.filter(pk=upload_id).update(
            summary=summary,
            status=Upload.Status.DONE,
            finished_at=timezone.now(),
            error="",
            progress=reporter.final(),
        )
        discard(upload)
    return Upload.Status.DONE


def give_up(upload: Upload, error: str) -> None:
    """An upload that failed too often: failed, with its error, its bytes removed."""
    with transaction.atomic():
        Upload.objects.filter(pk=upload.pk).update(
            status=Upload.Status.FAILED, error=error[:4000], finished_at=timezone.now()
        )
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
    from records.scores.run import latest_scoring, score_if_key

    scoring = latest_scoring(run) or score_if_key(run)
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
        "gate": reverse("records:api-gate", args=[run_id]),
    }


class ProgressReporter:
    """Writes an upload's progress from a thread of its own (its own connection), so it is seen
    while a shard's transaction is open. On SQLite the write waits for that transaction's
    commit (one writer at a time), so there the figures move shard by shard."""

    INTERVAL = 0.5

    def __init__(self, upload: Upload) -> None:
        self.upload = upload
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
            while not self._stop.wait(self.INTERVAL):
                try:
                    Upload.objects.filter(pk=self.upload.pk, status=Upload.Status.RUNNING).update(
                        progress=self.snapshot()
                    )
                except Exception:  # noqa: BLE001 (progress is a courtesy; the ingest goes on)
                    log.warning("upload %s: progress not written", self.upload.pk, exc_info=True)
                    close_old_connections()
        finally:
            connection.close()


@task()
def score_run_task(run_pk: int) -> str | None:
    """Score one stored run against the key for its digest (if one is stored)."""
    from records.scores.run import score_if_key

    run = Run.objects.filter(pk=run_pk).first()
    if run is None:
        return None
    scoring = score_if_key(run)
    return scoring.key.digest if scoring else None
