"""CI artifacts (.zip, .tar.gz): their shard entries copied out within bounds, every other entry
reported, and an archive over a limit refused before anything of it is stored."""

from __future__ import annotations

import io
import stat
import struct
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

from django.conf import settings

from records.bulk.readahead import CHUNK
from records.formats.shard import ShardError, is_shard_name
from records.ingest.inputs import (
    IngestReport,
    Input,
    disk_full,
    shown_name,
)


def _unsafe_member(name: str) -> str | None:
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "its path is absolute"
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return "its path climbs out of the archive with '..'"
    return None


class _Limits:
    def __init__(self, archive: str, archive_size: int | None) -> None:
        self.archive = archive
        self.archive_size = archive_size
        self.total = 0

    def copy(self, src: IO[bytes], where: str, compressed: int | None) -> IO[bytes]:
        """Copy one member out, refusing bombs by total size and by compression ratio."""
        out = tempfile.SpooledTemporaryFile(max_size=8 * CHUNK)  # noqa: SIM115
        read = 0
        ratio = settings.EVALDASH_MAX_ARCHIVE_RATIO
        while chunk := src.read(CHUNK):
            read += len(chunk)
            self.total += len(chunk)
            if self.total > settings.EVALDASH_MAX_ARCHIVE_BYTES:
                out.close()
                raise ShardError(
                    self.archive, _too_large_expanded(settings.EVALDASH_MAX_ARCHIVE_BYTES)
                )
            base = compressed if compressed is not None else self.archive_size
            if base is not None and read > CHUNK and read > max(base, 1) * ratio:
                out.close()
                raise ShardError(
                    where,
                    f"expands more than {ratio} times its compressed size "
                    "(EVALDASH_MAX_ARCHIVE_RATIO); refused as a possible archive bomb",
                )
            out.write(chunk)
        out.seek(0)
        return out


@dataclass
class _Member:
    name: str
    special: str | None  # why the entry is not a regular file, if it is not
    open: Callable[[], IO[bytes]]
    compressed: int | None  # the entry's own compressed size, where the format says it


# Compression methods Python's zipfile reads; any other (Deflate64 = 9, PPMd = 98, AES = 99, ...)
# makes the entry unreadable here.
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


_ZIP_METHOD_NAMES = {9: "Deflate64", 98: "PPMd", 12: "bzip2", 14: "LZMA", 93: "Zstandard"}


# A central directory entry is 46 bytes and its name, extra field and comment; a directory
# larger than the member limit could need at this many bytes an entry is refused unread.
_ZIP_DIRECTORY_BYTES_PER_ENTRY = 1024


def _zip_directory(fh: IO[bytes]) -> tuple[int, int] | None:
    """(entries, central directory bytes) from the end-of-central-directory record (zip64 too),
    read before the directory itself is; None when there is no such record."""
    end = fh.seek(0, io.SEEK_END)
    tail_start = max(0, end - (22 + 65535))
    fh.seek(tail_start)
    tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    entries, size, offset = struct.unpack_from("<HHHHLL", tail, at + 4)[3:6]
    if entries == 0xFFFF or size == 0xFFFFFFFF or offset == 0xFFFFFFFF:
        locator = tail_start + at - 20
        if locator < 0:
            return None
        fh.seek(locator)
        loc = fh.read(20)
        if len(loc) < 20 or loc[:4] != b"PK\x06\x07":
            return None
        (record,) = struct.unpack_from("<Q", loc, 8)
        fh.seek(record)
        rec = fh.read(56)
        if len(rec) < 56 or rec[:4] != b"PK\x06\x06":
            return None
        entries, size = struct.unpack_from("<QQ", rec, 32)
    return entries, size


def _zip_unreadable(info: zipfile.ZipInfo) -> str | None:
    method = info.compress_type
    if method == 99:
        return "it is encrypted with AES (method 99); evaldash reads no encrypted entry"
    if info.flag_bits & 0x1:
        return "it is encrypted; evaldash reads no encrypted entry"
    if method not in _ZIP_METHODS:
        known = _ZIP_METHOD_NAMES.get(method)
        return (
            f"it is compressed with {known + ' ' if known else ''}(method {method}), which "
            "evaldash cannot read; compress it with Deflate"
        )
    return None


def _zip_members(fh: IO[bytes], name: str) -> Iterator[_Member]:
    limit = settings.EVALDASH_MAX_ARCHIVE_MEMBERS
    directory = _zip_directory(fh)
    fh.seek(0)
    if directory is not None:
        entries, size = directory
        if entries > limit or size > limit * _ZIP_DIRECTORY_BYTES_PER_ENTRY:
            raise ShardError(name, _too_many_members(limit, entries if entries > limit else None))
    try:
        archive = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError):
        raise ShardError(name, "is not a zip archive, though its name says so") from None
    with archive:
        every = archive.infolist()
        if len(every) > limit:  # directories count, as in a tar
            raise ShardError(name, _too_many_members(limit, len(every)))
        infos = [i for i in every if not i.is_dir()]
        most = settings.EVALDASH_MAX_ARCHIVE_BYTES
        if sum(i.file_size for i in infos) > most:  # declared sizes; copying checks real ones
            raise ShardError(name, _too_large_expanded(most))
        for info in infos:
            link = stat.S_ISLNK(info.external_attr >> 16)
            yield _Member(
                info.filename,
                "it is a symbolic link" if link else _zip_unreadable(info),
                lambda info=info: archive.open(info),
                info.compress_size,
            )


# tarfile reads a metadata header (a pax extended or global header, a GNU long name or link
# name) whole into memory before the entry it describes is seen, and follows a chain of them by
# recursion. One entry's metadata, and an archive's global headers together, may take this many
# bytes; a header that would pass it is refused from its declared size, before it is read.
MAX_TAR_HEADER_BYTES = 64 * 1024

_TAR_META_TYPES = {
    tarfile.GNUTYPE_LONGNAME: "a GNU long name header",
    tarfile.GNUTYPE_LONGLINK: "a GNU long link name header",
    tarfile.XHDTYPE: "a pax extended header",
    tarfile.SOLARIS_XHDTYPE: "a pax extended header",
    tarfile.XGLTYPE: "a pax global header",
}


class TarHeaderRefused(Exception):
    """A tar header refused before it was read; the walk cannot go on past it."""


class _BoundedTarInfo(tarfile.TarInfo):
    # These override tarfile's private per-type dispatch (stable since Python 3.2): the only
    # place a header's declared size is known before its blocks are read.
    def _proc_member(self, archive):  # type: ignore[no-untyped-def]
        what = _TAR_META_TYPES.get(self.type)
        if what is not None:
            cost = tarfile.BLOCKSIZE + self._block(self.size)
            if self.type == tarfile.XGLTYPE:
                archive.global_bytes += cost
                total = archive.global_bytes
            else:
                archive.meta_bytes += cost
                total = archive.meta_bytes
            if total > MAX_TAR_HEADER_BYTES:
                raise TarHeaderRefused(
                    f"{what} of {self.size:,} bytes at byte {self.offset:,} takes the entry's "
                    f"metadata past {MAX_TAR_HEADER_BYTES:,} bytes; refused unread, so nothing "
                    "of the archive was stored"
                )
        elif self.type == tarfile.GNUTYPE_SPARSE:
            raise TarHeaderRefused(
                f"the entry at byte {self.offset:,} is a GNU sparse file, which evaldash does "
                "not read; nothing of the archive was stored"
            )
        return super()._proc_member(archive)

    def _proc_gnusparse_00(self, *args):  # type: ignore[no-untyped-def]
        raise TarHeaderRefused(_PAX_SPARSE.format(self.offset))

    _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00


_PAX_SPARSE = (
    "the entry at byte {:,} is a pax sparse file, which evaldash does not read; "
    "nothing of the archive was stored"
)


class _BoundedTarFile(tarfile.TarFile):
    tarinfo = _BoundedTarInfo
    meta_bytes = 0  # the current entry's metadata headers so far
    global_bytes = 0  # every pax global header so far

    def next(self) -> tarfile.TarInfo | None:
        self.meta_bytes = 0
        info = super().next()
        # tarfile keeps every header it has read; a walk needs only the current one.
        self.members.clear()
        return info

    def walk(self) -> Iterator[tarfile.TarInfo]:
        while (info := self.next()) is not None:
            yield info


def _tar_members(fh: IO[bytes], name: str) -> Iterator[_Member]:
    def open_tar() -> tarfile.TarFile:
        try:
            return _BoundedTarFile.open(fileobj=fh, mode="r:gz")
        except (tarfile.TarError, OSError, EOFError):
            raise ShardError(
                name, "is not a gzip-compressed tar archive, though its name says so"
            ) from None

    # A tar has no directory: its headers are read once to count the entries (directories too,
    # as in a zip) and add up their declared sizes, so an archive over a limit is refused
    # before any entry is stored.
    limit, most = settings.EVALDASH_MAX_ARCHIVE_MEMBERS, settings.EVALDASH_MAX_ARCHIVE_BYTES
    entries = declared = 0
    try:
        with open_tar() as archive:
            for info in archive.walk():
                entries += 1
                declared += info.size
                if entries > limit:
                    raise ShardError(name, _too_many_members(limit, None))
                if declared > most:
                    raise ShardError(name, _too_large_expanded(most))
    except TarHeaderRefused as exc:
        raise ShardError(name, f"the archive was refused: {exc}") from None
    fh.seek(0)
    with open_tar() as archive:
        for info in archive.walk():
            if info.isdir():
                continue
            special = None
            if info.issym() or info.islnk():
                special = "it is a link"
            elif not info.isreg():
                special = "it is a device, fifo or other special file"
            yield _Member(info.name, special, lambda info=info: archive.extractfile(info), None)


def _too_many_members(limit: int, entries: int | None) -> str:
    held = f"{entries:,} entries" if entries is not None else f"more than {limit:,} entries"
    return (
        f"the archive holds {held}; at most {limit:,} are read "
        "(EVALDASH_MAX_ARCHIVE_MEMBERS), so nothing of it was stored"
    )


def _too_large_expanded(most: int) -> str:
    return (
        f"the archive expands beyond {most:,} bytes (EVALDASH_MAX_ARCHIVE_BYTES); "
        "refused as a possible archive bomb"
    )


def expand_archive(item: Input, kind: str, report: IngestReport) -> Iterator[tuple[str, IO[bytes]]]:
    """Each shard entry of an archive, copied out within the bounds; other entries reported."""
    limits = _Limits(item.name, item.size)
    found = 0
    members = _zip_members if kind == "zip" else _tar_members
    with item.open() as fh:
        try:
            for m in members(fh, item.name):
                # A name is stored and shown cut to a few hundred characters: a header may
                # spell one of up to 64 KiB.
                where = shown_name(f"{item.name}!{m.name}")
                shard = is_shard_name(m.name)
                found += shard  # a shard entry refused below still counts as found
                why = _unsafe_member(m.name) or m.special
                if why:
                    report.refused.append(ShardError(where, f"entry refused: {why}").as_dict())
                    continue
                if not shard:
                    report.ignored.append({"file": where, "why": "not a modeleval-*.jsonl shard"})
                    continue
                with m.open() as src:
                    data = limits.copy(src, where, m.compressed)
                yield where, data  # the shard closes it once stored (it may be read ahead)
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
            if disk_full(exc):  # no room to copy an entry out: no fault of the archive
                raise
            raise ShardError(item.name, f"the archive is damaged: {shown_name(str(exc))}") from None
    if not found:
        raise ShardError(item.name, "the archive holds no shard (no modeleval-*.jsonl entry)")
