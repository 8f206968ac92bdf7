"""Uploaded files that leave nothing behind. The upload page and API parse each file into the
uploads storage's own directory as the bytes arrive (`IncomingFileUploadHandler`), so the storage
takes it by a rename; what was not taken is deleted when the request is done with it, and a
part a killed server left is swept later (`records.tasks.pending.sweep_incoming`). Elsewhere an
upload too large for memory goes to a temporary file that has no name in any directory
(O_TMPFILE or unlinked at once), so a request that dies, or a server that is killed, leaves no
spooled file in the temporary directory."""

from __future__ import annotations

import tempfile
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler


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


class IncomingUploadedFile(UploadedFile):
    """A file of a request parsed to a named temporary file in `directory` (the uploads
    storage's own, so the storage can take it by a rename: it has `temporary_file_path`, as
    Django's TemporaryUploadedFile has). Closing it deletes it unless it was moved away."""

    def __init__(
        self, directory: str | None, name: str, content_type: str, charset: str | None, extra: Any
    ) -> None:
        file = tempfile.NamedTemporaryFile(suffix=".upload", dir=directory)  # noqa: SIM115
        super().__init__(file, name, content_type, 0, charset, extra)

    def temporary_file_path(self) -> str:
        return self.file.name

    def close(self) -> None:
        try:
            self.file.close()
        except FileNotFoundError:
            pass  # moved into the storage: nothing of it is left here


class IncomingFileUploadHandler(FileUploadHandler):
    """Parses each file of a multipart body to a temporary file in the uploads storage's own
    directory (`records.tasks.pending.incoming_dir`), as its bytes arrive: one read in memory,
    no database write while the body arrives, and the storage then takes each file by a rename.
    Only the fields in `fields` are kept (any other file is read past, not written). The view
    sets it before the body is read and calls `close_files` when it is done with them: whatever
    was not moved into the storage (a body that broke off, a failure) is deleted then. A body
    that ends before its last boundary sets `interrupted`."""

    # Django reads the body in pieces of this size (its default is 64 KiB).
    chunk_size = 1024 * 1024

    def __init__(self, request: Any, directory: str | None, fields: tuple[str, ...]) -> None:
        super().__init__(request)
        self.directory, self.fields = directory, fields
        self.opened: list[IncomingUploadedFile] = []
        self.interrupted = False

    def new_file(self, field_name: str, *args: Any, **kwargs: Any) -> None:
        # The parser closes a handler's `file` when the upload is stopped: only the one being
        # written is ever there, never one already complete.
        self.__dict__.pop("file", None)
        super().new_file(field_name, *args, **kwargs)
        # A file under another field is read past and dropped (not SkipFile: the parser takes a
        # skipped last file for a body that broke off).
        self.skipping = field_name not in self.fields
        if not self.skipping:
            self.file = IncomingUploadedFile(
                self.directory,
                self.file_name,
                self.content_type,
                self.charset,
                self.content_type_extra,
            )
            self.opened.append(self.file)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        if not self.skipping:
            self.file.write(raw_data)

    def file_complete(self, file_size: int) -> UploadedFile | None:
        if self.skipping:
            return None
        done = self.__dict__.pop("file")
        done.flush()
        done.seek(0)
        done.size = file_size
        return done

    def upload_interrupted(self) -> None:
        self.interrupted = True

    def close_files(self) -> None:
        for f in self.opened:
            f.close()
