"""Uploaded files that leave nothing behind: an upload too large for memory goes to a temporary
file that has no name in any directory (O_TMPFILE or unlinked at once), so a request that dies,
or a server that is killed, leaves no spooled file in the temporary directory."""

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
