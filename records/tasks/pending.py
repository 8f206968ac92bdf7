"""Where an upload's bytes wait for a worker: in the database, in chunks.

A worker on another machine then needs nothing but the database and the settings (no shared
directory, no object store), the bytes are written in the same transaction as the upload and
its queued task (so an upload is queued whole or not at all), and they go when it is done.
Memory stays bounded both ways: a chunk at a time is written and read.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Iterator
from typing import IO

from django.db import connection
from django.db.models import Count, Max
from django.db.models.functions import Length

from records.ingest import Input
from records.models.intake import PendingChunk, Upload

CHUNK_BYTES = 8 * 1024 * 1024


def keep_inputs(upload: Upload, files: Iterable[tuple[str, IO[bytes]]]) -> int:
    """Write each (name, stream) of an upload as chunks; the bytes kept, in all."""
    total = 0
    for index, (name, stream) in enumerate(files):
        writer = ChunkWriter(upload, index, name)
        while data := stream.read(CHUNK_BYTES):
            writer.write(data)
        total += writer.close()
    return total


class ChunkWriter:
    """One file of an upload written as its chunks while its bytes arrive (from a request's
    body, or a stream): a chunk is written as soon as it is full, so at most one chunk is held
    in memory, and the rows are written in whatever transaction the caller holds, which makes
    the upload whole or nothing. An empty file is kept as one empty chunk."""

    def __init__(self, upload: Upload, file: int, name: str) -> None:
        self.upload_id, self.file, self.name = upload.pk, file, name[:500]
        self.size = 0
        self._seq = 0
        self._pieces: list[bytes] = []
        self._held = 0

    def write(self, data: bytes) -> None:
        """Take the next bytes; pieces are joined once, when a chunk is full."""
        self.size += len(data)
        while data:
            take = min(len(data), CHUNK_BYTES - self._held)
            self._pieces.append(data if take == len(data) else data[:take])
            self._held += take
            data = data[take:]
            if self._held == CHUNK_BYTES:
                self._flush()

    def close(self) -> int:
        """Write what is left (the last, short chunk); the file's size."""
        if self._held or not self._seq:
            self._flush()
        return self.size

    def _flush(self) -> None:
        pieces, self._pieces, self._held = self._pieces, [], 0
        self._row(pieces[0] if len(pieces) == 1 else b"".join(pieces))

    def _row(self, data: bytes) -> None:
        PendingChunk.objects.create(
            upload_id=self.upload_id, file=self.file, name=self.name, seq=self._seq, data=data
        )
        self._seq += 1


@contextlib.contextmanager
def no_checkpoint_at_commit() -> Iterator[None]:
    """On SQLite, keep this connection from copying the write-ahead log into the database file
    when the transaction inside commits (an upload's chunks: as many bytes again, and a sync),
    so a request that keeps an upload answers once its bytes are in the log; the next commit on
    another connection (the worker claiming the upload) checkpoints them as usual."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        (before,) = cursor.fetchone()
        cursor.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA wal_autocheckpoint = {int(before)}")


def pending_inputs(upload: Upload) -> list[Input]:
    """The upload's kept files, each opened as a seekable stream over its chunks."""
    rows = (
        PendingChunk.objects.filter(upload=upload)
        .values("file", "name")
        .annotate(chunks=Count("id"), last=Max("seq"))
        .order_by("file")
    )
    out = []
    for row in rows:
        last = PendingChunk.objects.filter(upload=upload, file=row["file"], seq=row["last"])
        tail = last.annotate(n=Length("data")).values_list("n", flat=True).get()
        size = row["last"] * CHUNK_BYTES + tail
        out.append(Input(row["name"], _opener(upload.pk, row["file"], size), size))
    return out


def pending_bytes(upload: Upload) -> int:
    return sum(i.size or 0 for i in pending_inputs(upload))


def discard(upload: Upload) -> None:
    PendingChunk.objects.filter(upload=upload).delete()


def _opener(upload_id: int, file: int, size: int):
    def open_() -> IO[bytes]:
        return io.BufferedReader(ChunkReader(upload_id, file, size), buffer_size=1024 * 1024)

    return open_


class ChunkReader(io.RawIOBase):
    """A kept file read back chunk by chunk (seekable, for zip archives), one chunk in memory."""

    def __init__(self, upload_id: int, file: int, size: int) -> None:
        self.upload_id, self.file, self.size = upload_id, file, size
        self.pos = 0
        self._seq = -1
        self._data = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self.pos >= self.size:
            return 0
        seq, within = divmod(self.pos, CHUNK_BYTES)
        if seq != self._seq:
            data = (
                PendingChunk.objects.filter(upload_id=self.upload_id, file=self.file, seq=seq)
                .values_list("data", flat=True)
                .get()
            )
            self._data, self._seq = bytes(data), seq
        piece = self._data[within : within + len(buffer)]
        buffer[: len(piece)] = piece
        self.pos += len(piece)
        return len(piece)
