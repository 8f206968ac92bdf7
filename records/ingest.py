"""One ingest entry point for every way a shard arrives (CLI, upload page, API, demo, benchmark).

Inputs (files, directories, `.zip` and `.tar.gz` artifacts) are expanded into shard candidates;
each shard is then streamed through the strict reader inside one transaction, so a shard is stored
whole or not at all, while good shards beside a bad one are stored. The same content (sha256) is
stored once, also when two uploads race: the unique sha256 decides.
"""

from __future__ import annotations

import gc
import hashlib
import io
import logging
import os
import re
import stat
import struct
import tarfile
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import orjson
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction

from records import beside
from records.formats.conformance import ConformanceError
from records.formats.corpus_key import CorpusKeyError
from records.formats.shard import ShardError, is_shard_name
from records.formats.shard_rows import (
    ATTEMPT_COLUMNS,
    CALL_COLUMNS,
    SUMMARY_COLUMNS,
    TURN_COLUMNS,
    VERIFY_COLUMNS,
    ShardSummary,
    messages,
    worker,
)
from records.formats.text import NUL_ESCAPE, NUL_MESSAGE, invalid_utf8, nul_field
from records.models import (
    Attempt,
    Call,
    Provider,
    Run,
    Session,
    ShardFile,
    SurfaceSummary,
    Turn,
    Upload,
    Verify,
)

log = logging.getLogger(__name__)
CHUNK = 1024 * 1024
Progress = Callable[[str, int, int], None]


@dataclass
class Input:
    """Something to ingest: a name to report it by and a way to open its bytes."""

    name: str
    open: Callable[[], IO[bytes]]
    size: int | None = None


@dataclass
class IngestReport:
    stored: list[dict[str, Any]] = field(default_factory=list)
    present: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    ignored: list[dict[str, Any]] = field(default_factory=list)
    keys: list[dict[str, Any]] = field(default_factory=list)
    replays: list[dict[str, Any]] = field(default_factory=list)
    suites: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refused

    def as_dict(self) -> dict[str, Any]:
        return {
            "stored": self.stored,
            "already_present": self.present,
            "refused": self.refused,
            "ignored": self.ignored,
            "keys": self.keys,
            "replays": self.replays,
            "suites": self.suites,
        }

    def summary_line(self) -> str:
        lines = sum(s["lines"] for s in self.stored)
        attempts = sum(s["attempts"] for s in self.stored)
        return (
            f"{len(self.stored)} shard(s) stored ({attempts} attempts, {lines} lines), "
            f"{len(self.present)} already present, {len(self.refused)} refused, "
            f"{len(self.ignored)} ignored"
            + (f", {len(self.keys)} corpus key(s)" if self.keys else "")
            + (f", {len(self.replays)} replay document(s)" if self.replays else "")
            + (f", {len(self.suites)} conformance suite(s)" if self.suites else "")
        )


# --- expanding inputs ---------------------------------------------------------------------------


def inputs_from_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Input | ShardError]:
    """Files and directories named on a command line. Directories are walked recursively."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = False
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames.sort()
                for fname in sorted(filenames):
                    full = Path(dirpath) / fname
                    if is_shard_name(fname) or _archive_kind(fname):
                        found = True
                        yield _file_input(full)
            if not found:
                yield ShardError(
                    str(path),
                    "no shard found: the directory holds no modeleval-*.jsonl file or archive",
                )
        elif path.is_file():
            yield _file_input(path)
        else:
            yield ShardError(str(path), "no such file or directory")


def _file_input(path: Path) -> Input:
    return Input(str(path), lambda: open(path, "rb"), path.stat().st_size)  # noqa: SIM115


def _archive_kind(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".zip"):
        return "zip"
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar"
    return None


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

    def copy(self, src: IO[bytes], member: str, compressed: int | None) -> IO[bytes]:
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
                    f"{self.archive}!{member}",
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
        infos = [i for i in archive.infolist() if not i.is_dir()]
        if len(infos) > limit:
            raise ShardError(name, _too_many_members(limit, len(infos)))
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


def _tar_members(fh: IO[bytes], name: str) -> Iterator[_Member]:
    def open_tar() -> tarfile.TarFile:
        try:
            return tarfile.open(fileobj=fh, mode="r:gz")
        except (tarfile.TarError, OSError, EOFError):
            raise ShardError(
                name, "is not a gzip-compressed tar archive, though its name says so"
            ) from None

    # A tar has no directory: its headers are read once to count the entries and add up their
    # declared sizes, so an archive over a limit is refused before any entry is stored.
    limit, most = settings.EVALDASH_MAX_ARCHIVE_MEMBERS, settings.EVALDASH_MAX_ARCHIVE_BYTES
    entries = declared = 0
    with open_tar() as archive:
        for info in archive:
            if info.isdir():
                continue
            entries += 1
            declared += info.size
            if entries > limit:
                raise ShardError(name, _too_many_members(limit, None))
            if declared > most:
                raise ShardError(name, _too_large_expanded(most))
    fh.seek(0)
    with open_tar() as archive:
        for info in archive:
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


def _expand_archive(
    item: Input, kind: str, report: IngestReport
) -> Iterator[tuple[str, IO[bytes]]]:
    """Each shard entry of an archive, copied out within the bounds; other entries reported."""
    limits = _Limits(item.name, item.size)
    found = 0
    members = _zip_members if kind == "zip" else _tar_members
    with item.open() as fh:
        try:
            for m in members(fh, item.name):
                where = f"{item.name}!{m.name}"
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
                    data = limits.copy(src, m.name, m.compressed)
                with data:
                    yield where, data
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
            raise ShardError(item.name, f"the archive is damaged: {exc}") from None
    if not found:
        raise ShardError(item.name, "the archive holds no shard (no modeleval-*.jsonl entry)")


# --- storing one shard --------------------------------------------------------------------------


@contextmanager
def gc_paused() -> Iterator[None]:
    """Bulk work (a shard's rows, a run's verdicts) makes objects by the hundred thousand and
    no reference cycles: the collector would only walk them, and the whole heap once they
    count as old, to free nothing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _sha256(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
    stream.seek(0)
    return digest.hexdigest()


def _size(stream: IO[bytes]) -> int:
    size = stream.seek(0, io.SEEK_END)
    stream.seek(0)
    return size


# PostgreSQL column types and the binary COPY form each takes. A json value's binary form is
# its text: the text the parser encoded goes in as it is, and the server still checks it.
_BINARY_COPY = {
    "integer": "int4",
    "bigint": "int8",
    "smallint": "int2",
    "boolean": "bool",
    "double precision": "float8",
    "text": "text",
    "json": "text",
}


_COPY_CONTEXT = re.compile(r"^COPY \S+, line (?P<row>\d+)(?:, column (?P<column>\w+))?")
_SHARD_FIELD = {"try_number": "try"}  # where a column's name is not its field's


class RowRefused(Exception):
    """The database refused a value of one shard line (its line, field and the reason)."""

    def __init__(self, line: int, field: str | None, message: str) -> None:
        super().__init__(message)
        self.line, self.field, self.message = line, field, message


class _Table:
    """A plain `INSERT ... VALUES` for executemany: the ORM's per-object cost is the bottleneck.
    On PostgreSQL, a binary COPY: no value is written out as text for the server to parse."""

    def __init__(self, model: type, columns: list[str], kind: str = "") -> None:
        qn = connection.ops.quote_name
        fields = [model._meta.get_field(c) for c in columns]
        cols = ", ".join(qn(f.column) for f in fields)
        table = qn(model._meta.db_table)
        self.sql = f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(fields))})"
        self.copy_sql = f"COPY {table} ({cols}) FROM STDIN"
        # Rows of shard lines carry their line: a refused row is reported by it.
        self.kind = kind
        self.line_at = columns.index("line") if "line" in columns else None
        self.copy_types: list[str] | None = None
        self.int4: list[tuple[int, bool]] = []  # (position, nullable) of the int4 columns
        if connection.vendor == "postgresql":
            types = [_BINARY_COPY.get(f.db_type(connection) or "") for f in fields]
            if all(types):
                self.copy_types = types  # type: ignore[assignment]
                self.int4 = [(i, f.null) for i, f in enumerate(fields) if types[i] == "int4"]
        self.rows: list[tuple[Any, ...]] = []

    def _refused(self, exc: DatabaseError) -> Exception:
        """PostgreSQL names the COPY row and column it refused ("COPY records_turn, line 2,
        column index"); said as the shard's own line and field, as the reader says its errors."""
        diag = getattr(exc.__cause__, "diag", None)
        where = _COPY_CONTEXT.search(getattr(diag, "context", None) or "")
        if not (where and self.line_at is not None and self.kind):
            return exc
        row = self.rows[int(where["row"]) - 1]
        column = where["column"]
        return RowRefused(
            row[self.line_at],
            f"{self.kind}.{_SHARD_FIELD.get(column, column)}" if column else None,
            getattr(diag, "message_primary", None) or str(exc),
        )

    def _binary(self) -> bool:
        """Whether these rows go in binary: every int4 value must fit, since the binary form of
        a larger one wraps around silently; in text, the server refuses it by name."""
        if not self.copy_types:
            return False
        rows = self.rows
        for i, nullable in self.int4:
            values = [r[i] for r in rows]
            if nullable:
                values = [v for v in values if v is not None]
            if values and (min(values) < -(2**31) or max(values) >= 2**31):
                return False
        return True

    def flush(self, cursor: Any) -> None:
        if not self.rows:
            return
        if connection.vendor == "postgresql":
            # COPY is PostgreSQL's bulk path; executemany sends a statement per row. The driver's
            # own cursor bypasses Django's error translation, so it is applied here: a value
            # the database refuses is a DatabaseError like any other.
            binary = self._binary()
            sql = self.copy_sql + (" (FORMAT BINARY)" if binary else "")
            try:
                with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
                    if binary:
                        copy.set_types(self.copy_types)
                    for row in self.rows:
                        copy.write_row(row)
            except DatabaseError as exc:
                raise self._refused(exc) from exc
        else:
            # SQLite checks each JSON column with JSON_VALID (Django's constraint), parsing the
            # text again: a fifth of these inserts. This text is the parser's own encoding of
            # values it decoded, valid by construction, so the check is off for these rows only.
            cursor.execute("PRAGMA ignore_check_constraints = ON")
            try:
                cursor.executemany(self.sql, self.rows)
            finally:
                cursor.execute("PRAGMA ignore_check_constraints = OFF")
        self.rows = []


class _Writer:
    """Writes the parser's rows: child rows as they come, attempt rows once the shard is read.

    Attempt ids are reserved ahead of the rows that name them (the parser numbers attempts in
    file order), so turn, call and verify rows carry their attempt's id when they are written.
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.turns = _Table(Turn, TURN_COLUMNS, "turn")
        self.calls = _Table(Call, CALL_COLUMNS, "call")
        self.verifies = _Table(Verify, VERIFY_COLUMNS, "verify")
        self.attempts = _Table(Attempt, ["id", "run", "session", *ATTEMPT_COLUMNS], "attempt")
        self.ids: list[int] = []

    def _reserve(self, n: int) -> None:
        if n > len(self.ids):
            above = self.ids[-1] if self.ids else 0
            self.ids += _reserve_ids(Attempt, max(n - len(self.ids), 1000), above=above)

    def children(
        self, turns: list[list], calls: list[list], verifies: list[list], seen: int
    ) -> None:
        self._reserve(seen)
        ids = self.ids
        with connection.cursor() as cursor:
            for table, rows in (
                (self.turns, turns),
                (self.calls, calls),
                (self.verifies, verifies),
            ):
                for r in rows:  # msgpack gives lists: each takes its attempt's id in place
                    r[0] = ids[r[0]]
                table.rows = rows
                table.flush(cursor)

    def write_attempts(self, rows: list[tuple], session_ids: dict[str, int]) -> None:
        self._reserve(rows[-1][0] + 1 if rows else 0)
        ids, run = self.ids, self.run_id
        label = 1 + ATTEMPT_COLUMNS.index("session_label")
        self.attempts.rows = [(ids[r[0]], run, session_ids.get(r[label]), *r[1:]) for r in rows]
        with connection.cursor() as cursor:
            self.attempts.flush(cursor)


# --- parsing beside the writer -------------------------------------------------------------------


def _parser_process_for(size: int) -> bool:
    """Whether a shard of this size is parsed in a second process."""
    return size >= settings.EVALDASH_PARSER_PROCESS_MIN_BYTES and beside.available()


def _hashed_on_the_way(size: int) -> bool:
    """Whether a shard of this size is hashed as its bytes go to the parser process: it is
    parsed there, and no stored shard has its size, so none can hold the same content. Any
    other shard is hashed and looked up first, in its turn."""
    return _parser_process_for(size) and not ShardFile.objects.filter(size=size).exists()


class _Parser:
    """The parser process of one ingest call (`records.formats.shard_rows.worker`).

    Large shards are parsed there one after another. The next one's bytes go in as soon as the
    last one is read (`_Units.read_on`), so its parse runs while the writer stores the end of
    the last one: its attempt rows, its run, the commit. The process starts with the first large
    shard and ends with the call; a shard's error ends it too, as does the writer giving up on
    a shard the process is still reading, and the next large shard starts another."""

    def __init__(self) -> None:
        self.proc: beside.Beside | None = None
        self.feeding: _Feed | None = None  # the last shard whose bytes went in

    def start(self, stream: IO[bytes], name: str) -> _Feed:
        if self.feeding is not None:
            self.feeding.thread.join()  # the shard before was read whole: its bytes are in
        if self.proc is None:
            self.proc = beside.Beside(worker, (), "the shard parser")
        self.feeding = _Feed(self, self.proc, stream, name)
        return self.feeding

    def stop(self) -> None:
        """Stop the process, whatever it is doing."""
        if self.proc is not None:
            self.proc.stop()
            self._release()

    def ended(self) -> None:
        """The process ended by itself (after a shard's error)."""
        self._release()

    def close(self) -> None:
        """At the end of the call: a process with nothing left to parse ends by itself."""
        if self.proc is None:
            return
        if self.feeding is not None and not self.feeding.finished:
            self.stop()  # the call ends early (an error nobody caught)
            return
        self.proc.end_input()
        self._release()

    def _release(self) -> None:
        proc, self.proc = self.proc, None
        if self.feeding is not None:
            self.feeding.close()
            self.feeding.thread.join()  # its sending fails once the process is gone
        assert proc is not None
        proc.close()


# How far ahead of the writer the parser may read a shard: the rows of at most this many bytes
# wait for the writer, so memory stays bounded however slow the database or large the shard.
AHEAD_BYTES = 32 * 1024 * 1024


class _Feed:
    """One shard in the parser process: its bytes sent, and hashed, by a thread of its own (hashing
    lets other threads run, so the digest costs the writer nothing), its messages taken in turn.
    The thread sends no more than AHEAD_BYTES past the bytes whose rows the writer has taken."""

    def __init__(self, parser: _Parser, proc: beside.Beside, stream: IO[bytes], name: str) -> None:
        self.parser = parser
        self.proc = proc
        self.digest = hashlib.sha256()
        self.read = False  # the parser read the whole shard (it sent the "shard" message)
        self.finished = False  # its last message ("done" or "error") was taken
        self.taken: float = 0  # bytes of the shard whose rows the writer has taken
        self.room = threading.Condition()
        self.closed = False  # the process is gone: nothing more is sent
        self.thread = threading.Thread(target=self._send, args=(stream, name), daemon=True)
        self.thread.start()

    def _send(self, stream: IO[bytes], name: str) -> None:
        if not self.proc.send(b"n" + name.encode()):
            return
        sent = 0
        while chunk := stream.read(CHUNK):
            with self.room:
                while sent - self.taken > AHEAD_BYTES and not self.closed:
                    self.room.wait()
                if self.closed:
                    return
            self.digest.update(chunk)
            if not self.proc.send(chunk):
                return  # the parser stopped early (an error in the shard, or it was stopped)
            sent += len(chunk)
        self.proc.end_input()

    def _took(self, upto: float) -> None:
        with self.room:
            self.taken = upto
            self.room.notify()

    def close(self) -> None:
        """The process is gone or going: the thread stops waiting for room."""
        with self.room:
            self.closed = True
            self.room.notify()

    def messages(self) -> Iterator[tuple[Any, ...]]:
        """The parser's messages for this shard; its "done" carries the shard's sha256."""
        while True:
            msg = self.proc.receive()
            kind = msg[0]
            if kind == "error":
                self.finished = True
                self.parser.ended()
                file, message, line, fld = msg[1]
                raise ShardError(file, message, line=line, field=fld)
            if kind == "batch":
                self._took(msg[5])
            elif kind == "shard":
                self.read = True
                self._took(float("inf"))
            elif kind == "done":  # the parser read to the end, so every byte was sent
                self.thread.join()
                self.finished = True
                yield ("done", self.digest.hexdigest())
                return
            yield msg

    def abandon(self) -> None:
        """The writer gives up on this shard. Once the parser has read it, what it still sends
        of it is dropped, so the next shard's parse goes on; before, the process is stopped."""
        if self.finished:
            return
        self.finished = True
        if self.read:
            while self.proc.receive()[0] != "done":
                pass
        else:
            self.parser.stop()


@dataclass
class _Shard:
    """A shard candidate: its stream is open until the unit after it is taken."""

    name: str
    stream: IO[bytes]
    size: int
    feed: _Feed | None = None  # its parse, when it started while the shard before was stored


class _Raise:
    """An unforeseen error met while taking the next unit early: it is raised in its turn."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


_END = object()


class _Units:
    """What the inputs hold, in order (`_units`), with one look ahead: once the writer has read
    a shard, it takes the next unit, and a large shard there starts its parse."""

    def __init__(self, units: Iterator[Any], parser: _Parser) -> None:
        self.units = units
        self.parser = parser
        self.ahead: Any = None  # the unit taken early, if any

    def __iter__(self) -> Iterator[Any]:
        while True:
            unit, self.ahead = self.ahead, None
            if unit is None:
                unit = next(self.units, _END)
            if unit is _END:
                return
            if isinstance(unit, _Raise):
                raise unit.exc
            yield unit

    def read_on(self) -> None:
        """The shard being stored has been read: start on the next one."""
        if self.ahead is not None:
            return
        try:
            self.ahead = next(self.units, _END)
        except Exception as exc:  # noqa: BLE001 (raised in its turn, not into this shard's work)
            self.ahead = _Raise(exc)
            return
        unit = self.ahead
        if isinstance(unit, _Shard) and _hashed_on_the_way(unit.size):
            unit.feed = self.parser.start(unit.stream, unit.name)


class _Checkpoints:
    """SQLite keeps a large shard's pages in its write-ahead log until a checkpoint copies
    them into the database file and syncs it. Left to SQLite, that happens at the shard's
    commit, on the ingest's path; here the commit skips it, and the checkpoint runs on its
    own connection beside what comes next (the next shard's parse is already under way); the
    ingest call waits for the last one, so it returns with the log checkpointed as before. A
    commit is as durable either way (WAL with synchronous=NORMAL): the checkpoint only moves
    pages into place."""

    def applies(self) -> bool:
        name = str(connection.settings_dict.get("NAME") or "")
        return (
            connection.vendor == "sqlite"
            and not connection.in_atomic_block
            and name not in ("", ":memory:")
            and not name.startswith("file:")
        )

    @contextmanager
    def deferred(self, large: bool) -> Iterator[None]:
        """Around a shard's transaction: a large shard's commit is checkpointed beside."""
        if not (large and self.applies()):
            yield
            return
        with connection.cursor() as cur:
            cur.execute("PRAGMA wal_autocheckpoint")
            (every,) = cur.fetchone()
            cur.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            yield
        finally:
            with connection.cursor() as cur:
                cur.execute(f"PRAGMA wal_autocheckpoint = {int(every)}")
        # Committed (an error would not come here): one checkpoint at a time.
        beside.settle()
        path = str(connection.settings_dict["NAME"])
        beside.in_background(lambda: _checkpoint(path))

    def finish(self) -> None:
        """Wait for the checkpoint under way."""
        beside.settle()


def _checkpoint(path: str) -> None:
    import sqlite3
    from urllib.parse import quote

    # mode=rw: a database file that is gone (deleted meanwhile) is not created afresh.
    db = sqlite3.connect(
        f"file:{quote(path)}?mode=rw",
        uri=True,
        timeout=settings.DATABASES["default"]["OPTIONS"]["timeout"],
    )
    try:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        db.close()


_wal = _Checkpoints()


def _reserve_ids(model: type, n: int, above: int = 0) -> list[int]:
    """n primary keys for rows this transaction is about to insert with explicit ids.

    `above` is the highest id this transaction already handed out (some may not be written yet).
    """
    table = model._meta.db_table
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, n],
            )
            return [r[0] for r in cur.fetchall()]
        # SQLite: the IMMEDIATE transaction holds the write lock, so nobody else inserts now.
        cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {connection.ops.quote_name(table)}")
        start = max(cur.fetchone()[0], above)
    return list(range(start + 1, start + n + 1))


def _store_run(run: Run, summary: ShardSummary, shard: ShardFile) -> dict[str, int]:
    """Write the run line, its providers, sessions and summaries; the session ids by label."""
    p = summary.run
    for name in (
        "package",
        "commit",
        "edition",
        "gitlab_version",
        "tier",
        "filter",
        "corpus_digest",
        "contract_digest",
    ):
        setattr(run, name, p.get(name, ""))
    run.run_id = p["run_id"]
    run.started_at = p.get("started_at")
    run.tier_confirmed = p.get("tier_confirmed", False)
    run.budget_usd = p.get("budget_usd")
    run.repeat = p.get("repeat", 0)
    run.line = summary.run_line
    providers = []
    for pos, prov in enumerate(p.get("providers", [])):
        price = prov.get("price")
        providers.append(
            Provider(
                run=run,
                position=pos,
                spec=prov.get("spec", ""),
                name=prov.get("name", ""),
                model=prov.get("model", ""),
                options=prov.get("options", {}),
                priced=price is not None,
                input_per_million_usd=(price or {}).get(
                    "input_per_million_usd", 0.0 if price else None
                ),
                output_per_million_usd=(price or {}).get(
                    "output_per_million_usd", 0.0 if price else None
                ),
                cache_write_per_million_usd=(price or {}).get(
                    "cache_write_per_million_usd", 0.0 if price else None
                ),
                cache_read_per_million_usd=(price or {}).get(
                    "cache_read_per_million_usd", 0.0 if price else None
                ),
                retrieved_on=(price or {}).get("retrieved_on", ""),
            )
        )
    Provider.objects.bulk_create(providers)
    sessions = Session.objects.bulk_create(
        Session(
            run=run,
            label=label,
            surface=s.get("surface", ""),
            mode=s.get("mode", ""),
            capabilities=s.get("capabilities", ""),
            meta_param_schema=s.get("meta_param_schema", ""),
            tier_pin=s.get("tier_pin", ""),
            slice_size=s.get("slice_size"),
            token_scopes=s.get("token_scopes", []),
            served_tools=s.get("served_tools", 0),
            tool_schema_digests=s.get("tool_schema_digests", {}),
            line=line,
            call_count=summary.session_calls.get(label, (0, 0))[0],
            observed_call_count=summary.session_calls.get(label, (0, 0))[1],
        )
        for label, (line, s) in summary.sessions.items()
    )
    if sessions and not all(s.pk for s in sessions):
        sessions = list(Session.objects.filter(run=run))
    table = _Table(SurfaceSummary, ["run", *SUMMARY_COLUMNS])
    table.rows = [(run.pk, *row) for row in summary.summaries]
    with connection.cursor() as cursor:
        table.flush(cursor)
    totals = [0, 0, 0, 0, 0]
    for row in summary.summaries:
        totals[0] += row[3]
        for i, v in enumerate(row[-4:], 1):
            totals[i] += v
    (
        run.attempt_count,
        run.input_tokens,
        run.output_tokens,
        run.cache_created_tokens,
        run.cache_read_tokens,
    ) = totals
    run.models_seen = sorted({row[0] for row in summary.summaries})
    run.surfaces_seen = sorted({row[1] for row in summary.summaries if row[1]})
    run.modes_seen = sorted({row[2] for row in summary.summaries if row[2]})
    run.cases_seen = summary.cases_seen
    run.save()
    shard.lines = summary.lines
    shard.warnings = summary.warnings
    shard.warning_count = summary.warning_count
    shard.save(update_fields=["lines", "warnings", "warning_count"])
    return {s.label: s.pk for s in sessions}


def ingest_shard(
    shard: _Shard,
    upload: Upload,
    report: IngestReport,
    progress: Progress | None,
    parser: _Parser,
    read_on: Callable[[], None],
) -> None:
    """Store one shard whole, or report why not. Never raises for a user's mistake.

    The same content is stored once. A shard no stored shard matches in size cannot be stored
    already: a large one is then hashed as its bytes go to the parser process, instead of in
    a pass of its own before the parse; the row waits under a provisional digest until then.
    Any other shard is hashed first and looked up. Either way the unique digest decides a race
    between two uploads of the same content. `read_on` is called once the shard is read, so
    the next one may start."""
    started = time.perf_counter()
    stream, name, size, feed = shard.stream, shard.name, shard.size, shard.feed
    large = feed is not None or _parser_process_for(size)
    sha: str | None = None
    if feed is None and not _hashed_on_the_way(size):
        sha = _sha256(stream)
        if ShardFile.objects.filter(sha256=sha).exists():
            report.present.append({"file": name, "sha256": sha})
            return
    try:
        with _wal.deferred(large), gc_paused(), transaction.atomic():
            shard_row = ShardFile.objects.create(
                upload=upload,
                name=name[:500],
                sha256=sha or f"pending-{uuid.uuid4().hex}",
                size=size,
                lines=0,
            )
            run = Run.objects.create(shard=shard_row, run_id="", repeat=0, line=0)
            writer = _Writer(run.pk)
            summary: ShardSummary | None = None
            session_ids: dict[str, int] = {}
            next_report = CHUNK * 8
            if large and feed is None:
                feed = parser.start(stream, name)
            for msg in feed.messages() if feed else messages(stream, name):
                kind = msg[0]
                if kind == "batch":
                    writer.children(*msg[1:5])
                    if progress and msg[5] >= next_report:
                        progress(name, msg[5], size)
                        next_report = msg[5] + CHUNK * 8
                elif kind == "shard":
                    read_on()
                    summary = msg[1]
                    session_ids = _store_run(run, summary, shard_row)
                elif kind == "attempts":
                    writer.write_attempts(msg[1], session_ids)
                elif kind == "done" and sha is None:
                    sha = shard_row.sha256 = msg[1]
                    shard_row.save(update_fields=["sha256"])
            assert summary is not None and sha is not None
            attempts, lineno = summary.attempt_count, summary.lines
    except ShardError as exc:
        report.refused.append(exc.as_dict())
        return
    except RowRefused as exc:
        message = f"the database refused a value of this shard: {exc.message}"
        report.refused.append(ShardError(name, message, line=exc.line, field=exc.field).as_dict())
        return
    except IntegrityError:
        # Another upload stored the same content while this one was reading it.
        if sha is not None and ShardFile.objects.filter(sha256=sha).exists():
            report.present.append({"file": name, "sha256": sha})
            return
        raise
    except DatabaseError as exc:
        # The transaction rolled back: nothing of the shard is stored.
        if "lock" in str(exc).lower():
            message = "the database was busy with another write; nothing was stored, send it again"
        else:
            message = f"the database refused a value of this shard: {exc}"
        report.refused.append(ShardError(name, message).as_dict())
        return
    finally:
        if feed is not None:
            feed.abandon()
    if progress:
        progress(name, size, size)
    analyze_if_large(lineno, (Attempt, Turn, Call, Verify, Session, SurfaceSummary))
    seconds = time.perf_counter() - started
    from records.scores import score_if_key

    scoring = score_if_key(run)
    report.stored.append(
        {
            "file": name,
            "sha256": sha,
            "run": run.pk,
            "run_id": run.run_id,
            "attempts": attempts,
            "lines": lineno,
            "warnings": shard_row.warning_count,
            "seconds": round(seconds, 3),  # to store it (its scoring apart)
            "scored_against": scoring.key.digest if scoring else None,
        }
    )


ANALYZE_AFTER_LINES = 20_000
# Rows sampled per table are 300 times this (PostgreSQL's default is 100, so 30,000 rows).
ANALYZE_STATISTICS_TARGET = 10


def analyze_if_large(rows: int, models: Iterable[type]) -> None:
    """After a large bulk load, refresh PostgreSQL's statistics so its plans fit the data
    (autovacuum gets there eventually; pages should not wait for it).

    Only the columns queries filter, join and sort on (those of every index, constraint and
    foreign key) are sampled: the bulky text and JSON columns cost most of a full ANALYZE and
    no plan looks at their statistics. The sample is 3,000 rows a table rather than 30,000:
    the plans here need row counts, distinct counts and the commonest values of id and label
    columns, which a small sample gives, and reading the large sample cost a quarter of a
    shard's load. Row counts are refreshed either way."""
    if connection.vendor != "postgresql" or rows < ANALYZE_AFTER_LINES:
        return
    qn = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(f"SET LOCAL default_statistics_target = {int(ANALYZE_STATISTICS_TARGET)}")
        for model in models:
            meta = model._meta
            names: list[str] = []
            for index in (*meta.indexes, *meta.constraints):
                names += getattr(index, "fields", ())
            names += [f.name for f in meta.concrete_fields if f.is_relation]
            columns = dict.fromkeys(meta.get_field(n.lstrip("-")).column for n in names)
            listed = f" ({', '.join(qn(c) for c in columns)})" if columns else ""
            cur.execute(f"ANALYZE {qn(meta.db_table)}{listed}")


def ingest(
    inputs: Iterable[Input | ShardError],
    upload: Upload,
    progress: Progress | None = None,
    *,
    allow_digest_mismatch: bool = False,
) -> IngestReport:
    """The one entry point: expand each input, store each shard or key, record what happened.

    `allow_digest_mismatch` is the operator's explicit override for corpus keys whose declared
    digest differs from the recomputed one (the key is then marked "digest not verified").
    """
    report = IngestReport()
    parser = _Parser()
    units = _Units(_units(inputs, report), parser)
    try:
        for unit in units:
            try:
                if isinstance(unit, _Shard):
                    ingest_shard(unit, upload, report, progress, parser, units.read_on)
                elif isinstance(unit, Input):
                    _ingest_key(unit, upload, report, allow_digest_mismatch)
                else:
                    report.refused.append(unit.as_dict())
            except (ShardError, CorpusKeyError, ConformanceError) as exc:
                report.refused.append(exc.as_dict())
            except Exception as exc:  # noqa: BLE001 (one input's fault never ends the others)
                report.refused.append(unexpected(_unit_name(unit), exc).as_dict())
    finally:
        parser.close()
        _wal.finish()
        # Also when something escaped (the server is going down): the upload says what it got.
        upload.summary = report.as_dict()
        upload.save(update_fields=["summary"])
    return report


def _unit_name(unit: Any) -> str:
    return getattr(unit, "name", None) or getattr(unit, "file", "?")


MAX_KEY_BYTES = 64 * 1024 * 1024


def _ingest_key(item: Input, upload: Upload, report: IngestReport, allow_mismatch: bool) -> None:
    """A .json document: a corpus key, or a sealed corpus and/or its replay results."""
    from records.replays import ingest_document, looks_like_replay
    from records.scores import rescore_for_key, store_key

    with item.open() as fh:
        data = fh.read(MAX_KEY_BYTES + 1)
    if len(data) > MAX_KEY_BYTES:
        raise CorpusKeyError(item.name, f"the document is larger than {MAX_KEY_BYTES:,} bytes")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorpusKeyError(item.name, f"is not valid JSON: {invalid_utf8(data) or exc}") from None
    if NUL_ESCAPE in data and (where := nul_field(doc)):
        raise CorpusKeyError(item.name, NUL_MESSAGE, field=where)
    from records.conformance_runs import looks_like_suite, store_suite

    if looks_like_suite(doc):
        report.suites.append(store_suite(data, item.name, upload))
        return
    if not (isinstance(doc, dict) and "format" in doc) and looks_like_replay(doc):
        report.replays.append(ingest_document(doc, item.name, upload, data))
        return
    key, created = store_key(data, item.name, upload, allow_digest_mismatch=allow_mismatch)
    rescored = [s.run_id for s in rescore_for_key(key)] if created else []
    report.keys.append(
        {
            "file": item.name,
            "digest": key.digest,
            "key": key.pk,
            "cases": key.case_count,
            "verified": key.verified,
            "created": created,
            "rescored_runs": rescored,
        }
    )


def _units(inputs: Iterable[Input | ShardError], report: IngestReport) -> Iterator[Any]:
    """What the inputs hold, in order: each shard (`_Shard`; archives expanded, each entry copied
    out within the bounds), each .json document (`Input`) and each error (`ShardError`)."""
    for item in inputs:
        if isinstance(item, ShardError) or item.name.lower().endswith(".json"):
            yield item
            continue
        base = item.name.replace("\\", "/").rsplit("/", 1)[-1]
        kind = _archive_kind(base)
        try:
            if kind:
                for member, data in _expand_archive(item, kind, report):
                    yield _Shard(member, data, _size(data))
            elif is_shard_name(base):
                with item.open() as fh:
                    yield _Shard(item.name, fh, _size(fh))
            else:
                raise ShardError(
                    item.name,
                    "is neither a shard (modeleval-*.jsonl), a corpus key or replay document "
                    "(.json) nor a .zip or .tar.gz artifact",
                )
        except ShardError as exc:
            yield exc
        except Exception as exc:  # noqa: BLE001 (one input's fault never ends the others)
            yield unexpected(item.name, exc)


def unexpected(name: str, exc: BaseException) -> ShardError:
    """A fault nobody foresaw while reading or storing one input: logged with its traceback,
    and reported as that input's refusal, so the inputs after it are handled as usual."""
    log.error("ingest: unexpected error on %s", name, exc_info=exc)
    return ShardError.unexpected(name, exc)


def bytes_input(name: str, data: bytes) -> Input:
    return Input(name, lambda: io.BytesIO(data), len(data))
