"""What an ingest is given: files, directories and uploaded bytes, and the report it answers with."""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from records.formats.shard import ShardError, is_shard_name

Progress = Callable[[str, int, int], None]

# What a full disk is called: errno ENOSPC and EDQUOT, SQLite's SQLITE_FULL, PostgreSQL's
# disk_full (SQLSTATE 53100).
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_SQLITE_FULL = "database or disk is full"
_DISK_FULL_SQLSTATE = "53100"


def disk_full(exc: BaseException) -> str | None:
    """Which store a failure says is full ("database" or "disk"), or None: an operational
    failure that says nothing of the file being read, so the ingest stops and is tried again
    later instead of refusing the file (an exception's causes are looked at too)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _FULL_ERRNOS:
            return "disk"
        if _SQLITE_FULL in str(seen) or _DISK_FULL_SQLSTATE in (
            getattr(seen, "sqlstate", None),
            getattr(seen, "pgcode", None),
        ):
            return "database"
        seen = seen.__cause__ or seen.__context__
    return None


# The most characters of a name that a summary, a refusal or a warning stores, and so a page
# shows: archive headers may spell a name of 64 KiB, a command line a path of any length.
NAME_CHARS = 300


def shown_name(name: str, most: int = NAME_CHARS) -> str:
    """`name` as it is stored and shown: whole when short, else its start and its end (where
    the file's own name and extension are) around a visible ellipsis, `most` characters in all."""
    if len(name) <= most:
        return name
    head = (most - 1) // 2
    return f"{name[:head]}\u2026{name[len(name) - (most - 1 - head) :]}"


@dataclass
class Input:
    """Something to ingest: a name to report it by and a way to open its bytes."""

    name: str
    open: Callable[[], IO[bytes]]
    size: int | None = None

    def __post_init__(self) -> None:
        self.name = shown_name(self.name)


@dataclass
class IngestReport:
    stored: list[dict[str, Any]] = field(default_factory=list)
    present: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    ignored: list[dict[str, Any]] = field(default_factory=list)
    keys: list[dict[str, Any]] = field(default_factory=list)
    replays: list[dict[str, Any]] = field(default_factory=list)
    suites: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)  # model results records

    @property
    def ok(self) -> bool:
        return not self.refused

    def as_dict(self) -> dict[str, Any]:
        """The report as the API answers it: each list by its name (`present` is
        `already_present` there), in the order declared above."""
        return {
            "already_present" if f.name == "present" else f.name: getattr(self, f.name)
            for f in fields(self)
        }

    def summary_line(self) -> str:
        lines = sum(s["lines"] for s in self.stored)
        attempts = sum(s["attempts"] for s in self.stored)
        return (
            f"{counted(len(self.stored), 'shard')} stored ({counted(attempts, 'attempt')}, "
            f"{counted(lines, 'line')}), {len(self.present)} already present, "
            f"{len(self.refused)} refused, {len(self.ignored)} ignored"
            + (f", {counted(len(self.keys), 'corpus key')}" if self.keys else "")
            + (f", {counted(len(self.replays), 'replay document')}" if self.replays else "")
            + (f", {counted(len(self.suites), 'conformance suite')}" if self.suites else "")
            + (f", {counted(len(self.records), 'model results record')}" if self.records else "")
        )


def counted(n: int, one: str) -> str:
    """`n` and its noun, plural unless it is one: "1 attempt", "2 attempts", "0 shards"."""
    return f"{n:,} {one}{'' if n == 1 else 's'}"


def inputs_from_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Input | ShardError]:
    """Files and directories named on a command line. Directories are walked recursively.

    Each input is named as a page will show it, with no path of this machine in it: a file by
    its own name, a file found in a directory by its path below that directory."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = False
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames.sort()
                for fname in sorted(filenames):
                    full = Path(dirpath) / fname
                    if is_shard_name(fname) or archive_kind(fname):
                        found = True
                        yield _file_input(full, full.relative_to(path).as_posix())
            if not found:
                yield ShardError(
                    path.name or str(path),
                    "no shard found: the directory holds no modeleval-*.jsonl file or archive",
                )
        elif path.is_file():
            yield _file_input(path, path.name)
        else:
            yield ShardError(path.name or str(path), "no such file or directory")


def _file_input(path: Path, name: str) -> Input:
    return Input(name, lambda: open(path, "rb"), path.stat().st_size)  # noqa: SIM115


def archive_kind(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".zip"):
        return "zip"
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar"
    return None


def bytes_input(name: str, data: bytes) -> Input:
    return Input(name, lambda: io.BytesIO(data), len(data))
