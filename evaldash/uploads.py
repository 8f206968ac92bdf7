"""Uploaded files that leave nothing behind. The upload API streams each file into its upload's
chunk rows as the bytes arrive (`ChunkRowsUploadHandler`, in the request's one transaction).
Elsewhere an upload too large for memory goes to a temporary file that has no name in any
directory (O_TMPFILE or unlinked at once), so a request that dies, or a server that is killed,
leaves no spooled file in the temporary directory."""

from __future__ import annotations

import io
import tempfile
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile


class UnnamedTemporaryUploadedFile(UploadedFile):
    def __init__(self, name: str, content_type: str, charset: str | None, extra: Any) -> None:
        file = tempfile.TemporaryFile(dir=settings.FILE_UPLOAD_TEMP_DIR)  # noqa: SIM115
        super().__init__(file, name, content_type, 0, charset, extra)


class UnnamedTemporaryFileUploadHandler(FileUploadHandler):
    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.file = UnnamedTemporaryUploadedFile(
            self.file_name, self.content_type, self.charset, self.content_type_extra
        )

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self.file.write(raw_data)

    def file_complete(self, file_size: int) -> UploadedFile:
        self.file.seek(0)
        self.file.size = file_size
        return self.file

    def upload_interrupted(self) -> None:
        if hasattr(self, "file"):
            self.file.close()


class KeptUploadedFile(UploadedFile):
    """A file of a request whose bytes went straight into the upload's chunk rows as they
    arrived: it carries its name and size, not its bytes."""

    def __init__(self, name: str, content_type: str, size: int, charset: str | None) -> None:
        super().__init__(io.BytesIO(), name, content_type, size, charset)


class ChunkRowsUploadHandler(FileUploadHandler):
    """Writes each file of a multipart body into an upload's chunk rows as its bytes arrive
    (records.tasks.pending): no temporary file, no second copy, one chunk in memory. Only the
    fields in `fields` are kept (any other file is skipped unread). Set by the view, inside the
    transaction that saved `upload`, before the body is read; a body that ends before its last
    boundary (a client gone mid-upload) sets `interrupted`, and the view then rolls back."""

    # Django reads the body in pieces of this size (its default is 64 KiB).
    chunk_size = 1024 * 1024

    def __init__(self, request: Any, upload: Any, fields: tuple[str, ...]) -> None:
        super().__init__(request)
        self.upload, self.fields = upload, fields
        self.kept: list[KeptUploadedFile] = []
        self.interrupted = False
        self._writer: Any = None

    def new_file(self, field_name: str, *args: Any, **kwargs: Any) -> None:
        from records.tasks.pending import ChunkWriter

        super().new_file(field_name, *args, **kwargs)
        if field_name not in self.fields:
            raise SkipFile
        self._writer = ChunkWriter(self.upload, len(self.kept), self.file_name or "")

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self._writer.write(raw_data)

    def file_complete(self, file_size: int) -> UploadedFile:
        size = self._writer.close()
        self._writer = None
        kept = KeptUploadedFile(self.file_name, self.content_type, size, self.charset)
        self.kept.append(kept)
        return kept

    def upload_interrupted(self) -> None:
        self.interrupted = True
