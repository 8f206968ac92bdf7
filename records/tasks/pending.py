"""Where an upload's bytes wait for a worker: in the database, in chunks.

A worker on another machine then needs nothing but the database and the settings (no shared
directory, no object store), the bytes are written in the same transaction as the upload and
its queued task (so an upload is queued whole or not at all), and they go when it is done.
Memory stays bounded both ways: a chunk at a time is written and read.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import IO

from django.db.models import Count, Max
from django.db.models.functions import Length

from records.ingest import Input
from records.models.intake import PendingChunk, Upload

CHUNK_BYTES = 8 * 1024 * 1024


def keep_inputs(upload: Upload, files: Iterable[tuple[str, IO[bytes]]]) -> int:
    """Write each (name, stream) of an upload as chunks; the bytes kept, in all."""
    total = 0
    for index, (name, stream) in enumerate(files):
        seq = 0
        while True:
            data = stream.read(CHUNK_BYTES)
            if not data and seq:
                break
            PendingChunk.objects.create(
                upload=upload, file=index, name=name[:500], seq=seq, data=data
            )
            total += len(data)
            seq += 1
            if len(data) < CHUNK_BYTES:
                break
    return total


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
