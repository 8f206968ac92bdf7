"""Where an upload's bytes wait for a worker: in the uploads storage (`STORAGES["uploads"]`).

The request only moves each file into the storage (a rename, when the body was parsed into the
storage's own directory) and records the stored names on its Upload row; the database stays
small and the request answers once the bytes are on disk, not copied a second time. A worker
reads the files through the storage (`storage.open`, so any storage Django names serves: a
directory, a shared volume, an object store), and they are deleted once the upload is done or
has failed for good. A worker on another machine needs the database, the settings and a storage
it sees too.

Whole or nothing: the files are moved into place before the Upload row is written, and if
anything fails before that row commits, what was moved is deleted again (`forget`).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Iterable
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.db import transaction

from records.ingest import Input
from records.models.intake import Upload

log = logging.getLogger(__name__)

# Parsed bodies are written here, inside the storage's directory (so the move into place is a
# rename on the same filesystem); a file left by a killed server is swept once it has not been
# written to for this long.
INCOMING = ".incoming"
STALE_INCOMING_SECONDS = 3600


def upload_storage() -> Storage:
    return storages["uploads"]


def incoming_dir() -> str | None:
    """The directory a request's files are parsed into: inside the uploads storage when that is
    a directory, so they are moved into place by a rename; else the temporary directory
    (FILE_UPLOAD_TEMP_DIR), from which the storage copies them."""
    storage = upload_storage()
    if isinstance(storage, FileSystemStorage):
        path = os.path.join(storage.location, INCOMING)
        os.makedirs(path, exist_ok=True)
        return path
    from django.conf import settings

    return settings.FILE_UPLOAD_TEMP_DIR


def keep_files(files: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Put each (name, file) of one upload into the storage under a fresh prefix; what the
    Upload row records of them. A file parsed to the storage's own directory is renamed into
    place (FileSystemStorage moves anything with `temporary_file_path`), any other is copied. If
    one fails, those already kept are deleted and the error goes on."""
    storage = upload_storage()
    prefix = f"{time.strftime('%Y%m%d')}-{secrets.token_hex(8)}"
    kept: list[dict[str, Any]] = []
    try:
        for index, (name, f) in enumerate(files):
            content = f if hasattr(f, "temporary_file_path") or hasattr(f, "chunks") else File(f)
            stored = storage.save(f"{prefix}/{index:03d}", content)
            kept.append({"name": str(name)[:500], "stored": stored, "size": storage.size(stored)})
    except BaseException:
        forget(kept)
        raise
    return kept


def pending_inputs(upload: Upload) -> list[Input]:
    """The upload's kept files, each opened through the storage."""
    storage = upload_storage()
    return [
        Input(f["name"], _opener(storage, f["stored"]), f.get("size")) for f in upload.files or []
    ]


def discard(upload: Upload) -> None:
    """Delete the upload's files from the storage once the caller's transaction commits (at once
    outside one): a rolled-back 'done' keeps them for the try that follows."""
    kept = list(upload.files or [])
    transaction.on_commit(lambda: forget(kept))


def forget(kept: list[dict[str, Any]]) -> None:
    """Delete stored files (and their prefix directory, in a directory storage); a file already
    gone is no error."""
    storage = upload_storage()
    prefixes = set()
    for f in kept:
        try:
            storage.delete(f["stored"])
        except OSError:
            log.warning("upload file %s not deleted", f["stored"], exc_info=True)
        prefixes.add(f["stored"].rpartition("/")[0])
    if isinstance(storage, FileSystemStorage):
        for prefix in filter(None, prefixes):
            try:
                os.rmdir(storage.path(prefix))
            except OSError:
                pass  # not empty, or gone


def sweep_incoming(now: float | None = None) -> int:
    """Delete files in the incoming directory that nothing has written to for
    STALE_INCOMING_SECONDS (a server killed mid-body leaves its parsed part there); how many."""
    storage = upload_storage()
    if not isinstance(storage, FileSystemStorage):
        return 0
    path = os.path.join(storage.location, INCOMING)
    now = time.time() if now is None else now
    gone = 0
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return 0
    for entry in entries:
        try:
            if entry.is_file() and now - entry.stat().st_mtime > STALE_INCOMING_SECONDS:
                os.unlink(entry.path)
                gone += 1
        except FileNotFoundError:
            pass
    return gone


def sweep_storage(now: float | None = None) -> int:
    """What a worker's heartbeat clears from a directory storage: parts a killed server left in
    the incoming directory, and files no unfinished upload names (a process killed between
    moving them into place and committing their upload), once untouched for
    STALE_INCOMING_SECONDS; how many."""
    storage = upload_storage()
    if not isinstance(storage, FileSystemStorage):
        return 0
    now = time.time() if now is None else now
    gone = sweep_incoming(now)
    waiting = Upload.objects.filter(status__in=[Upload.Status.QUEUED, Upload.Status.RUNNING])
    named = {
        f["stored"].partition("/")[0]
        for files in waiting.values_list("files", flat=True)
        for f in files or []
    }
    try:
        entries = list(os.scandir(storage.location))
    except FileNotFoundError:
        return gone
    for entry in entries:
        if not entry.is_dir() or entry.name == INCOMING or entry.name in named:
            continue
        try:
            if now - entry.stat().st_mtime <= STALE_INCOMING_SECONDS:
                continue
            for name in os.listdir(entry.path):
                os.unlink(os.path.join(entry.path, name))
                gone += 1
            os.rmdir(entry.path)
        except OSError:
            log.warning("upload files under %s not swept", entry.path, exc_info=True)
    return gone


def _opener(storage: Storage, name: str):
    def open_() -> IO[bytes]:
        return storage.open(name, "rb")

    return open_
