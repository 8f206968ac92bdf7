"""One ingest entry point for every way a shard arrives (CLI, upload page, API, demo, benchmark).

Inputs (files, directories, `.zip` and `.tar.gz` artifacts) are expanded into shard candidates;
each shard is then streamed through the strict reader inside one transaction, so a shard is stored
whole or not at all, while good shards beside a bad one are stored. The same content (sha256) is
stored once, also when two uploads race: the unique sha256 decides.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import orjson
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction

from records.formats.conformance import ConformanceError
from records.formats.corpus_key import CorpusKeyError
from records.formats.shard import Joins, ShardError, is_shard_name, iter_lines
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

CHUNK = 1024 * 1024
BATCH_LINES = 2000
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
        self.members = 0

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
                    self.archive,
                    f"the archive expands beyond {settings.EVALDASH_MAX_ARCHIVE_BYTES:,} bytes "
                    "(EVALDASH_MAX_ARCHIVE_BYTES); refused as a possible archive bomb",
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

    def count(self) -> None:
        self.members += 1
        if self.members > settings.EVALDASH_MAX_ARCHIVE_MEMBERS:
            raise ShardError(
                self.archive,
                f"the archive holds more than {settings.EVALDASH_MAX_ARCHIVE_MEMBERS:,} entries",
            )


@dataclass
class _Member:
    name: str
    special: str | None  # why the entry is not a regular file, if it is not
    open: Callable[[], IO[bytes]]
    compressed: int | None  # the entry's own compressed size, where the format says it


def _zip_members(fh: IO[bytes], name: str) -> Iterator[_Member]:
    try:
        archive = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError):
        raise ShardError(name, "is not a zip archive, though its name says so") from None
    with archive:
        for info in archive.infolist():
            if not info.is_dir():
                link = stat.S_ISLNK(info.external_attr >> 16)
                yield _Member(
                    info.filename,
                    "it is a symbolic link" if link else None,
                    lambda info=info: archive.open(info),
                    info.compress_size,
                )


def _tar_members(fh: IO[bytes], name: str) -> Iterator[_Member]:
    try:
        archive = tarfile.open(fileobj=fh, mode="r:gz")  # noqa: SIM115
    except (tarfile.TarError, OSError, EOFError):
        raise ShardError(
            name, "is not a gzip-compressed tar archive, though its name says so"
        ) from None
    with archive:
        for info in archive:
            if info.isdir():
                continue
            special = None
            if info.issym() or info.islnk():
                special = "it is a link"
            elif not info.isreg():
                special = "it is a device, fifo or other special file"
            yield _Member(info.name, special, lambda info=info: archive.extractfile(info), None)


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
                limits.count()
                where = f"{item.name}!{m.name}"
                why = _unsafe_member(m.name) or m.special
                if why:
                    report.refused.append(ShardError(where, f"entry refused: {why}").as_dict())
                    continue
                if not is_shard_name(m.name):
                    report.ignored.append({"file": where, "why": "not a modeleval-*.jsonl shard"})
                    continue
                found += 1
                with m.open() as src:
                    data = limits.copy(src, m.name, m.compressed)
                with data:
                    yield where, data
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
            raise ShardError(item.name, f"the archive is damaged: {exc}") from None
    if not found:
        raise ShardError(item.name, "the archive holds no shard (no modeleval-*.jsonl entry)")


# --- storing one shard --------------------------------------------------------------------------


def _sha256(stream: IO[bytes]) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
    stream.seek(0)
    return digest.hexdigest(), size


def _json(value: Any) -> Any:
    """JSON text: SQLite stores it as is, PostgreSQL's COPY parses it into jsonb."""
    if value is None:
        return None
    return orjson.dumps(value).decode()


class _Table:
    """A plain `INSERT ... VALUES` for executemany: the ORM's per-object cost is the bottleneck."""

    def __init__(self, model: type, columns: list[str]) -> None:
        qn = connection.ops.quote_name
        cols = [model._meta.get_field(c).column for c in columns]
        self.sql = (
            f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(c) for c in cols)}) "
            f"VALUES ({', '.join(['%s'] * len(cols))})"
        )
        self.copy_sql = (
            f"COPY {qn(model._meta.db_table)} ({', '.join(qn(c) for c in cols)}) FROM STDIN"
        )

        self.rows: list[tuple[Any, ...]] = []

    def flush(self, cursor: Any) -> None:
        if not self.rows:
            return
        if connection.vendor == "postgresql":
            # COPY is PostgreSQL's bulk path; executemany sends a statement per row.
            with cursor.cursor.copy(self.copy_sql) as copy:
                for row in self.rows:
                    copy.write_row(row)
        else:
            cursor.executemany(self.sql, self.rows)
        self.rows = []


class _ShardWriter:
    """Buffers a shard's rows and writes them with executemany.

    Attempt ids are reserved up front, so turn, call and verify rows carry their attempt's id
    when they are written; per-attempt totals are added up while the lines stream past.
    """

    ATTEMPT_COLUMNS = [
        "id",
        "run",
        "key",
        "line",
        "case",
        "model",
        "surface",
        "effective_surface",
        "effective_mode",
        "session_label",
        "repeat",
        "shown_tools",
        "overflowed",
        "tool_digest",
        "facts",
        "stimulus",
        "ended_by",
        "reason",
        "turn_count",
        "try_count",
        "call_count",
        "input_tokens",
        "output_tokens",
        "cache_created_tokens",
        "cache_read_tokens",
        "latency_ms",
    ]

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.attempts = _Table(Attempt, self.ATTEMPT_COLUMNS)
        self.turns = _Table(
            Turn,
            [
                "attempt",
                "line",
                "index",
                "try_number",
                "request_digest",
                "blocks",
                "input_tokens",
                "output_tokens",
                "cache_created_tokens",
                "cache_read_tokens",
                "status",
                "detail",
                "latency_ms",
                "has_tool_call",
            ],
        )
        self.calls = _Table(
            Call,
            [
                "attempt",
                "line",
                "turn",
                "index",
                "tool",
                "arguments",
                "requested_action",
                "dispatched_action",
                "dispatched_tool",
                "refusal_reason",
                "outcome",
                "result",
                "result_truncated",
                "text",
                "text_truncated",
                "duration_ms",
                "trace_id",
                "requests",
                "dispatch_observed",
            ],
        )
        self.verifies = _Table(Verify, ["attempt", "line", "name", "passed", "detail"])
        self.pending = 0
        self.ids: dict[str, int] = {}
        # Child lines that came before their attempt line wait here for its id (rare).
        self.orphans: list[tuple[_Table, str, tuple[Any, ...]]] = []
        # attempt key -> [turn indexes, tries, calls, input, output, cache created, cache read,
        # latency]
        self.totals: dict[str, list[Any]] = {}
        self._free: list[int] = []
        self._high = 0

    def _next_id(self) -> int:
        if not self._free:
            self._free = _reserve_ids(Attempt, 1000, above=self._high)[::-1]
            self._high = self._free[0]
        return self._free.pop()

    def _total(self, key: str) -> list[Any]:
        t = self.totals.get(key)
        if t is None:
            t = self.totals[key] = [set(), 0, 0, 0, 0, 0, 0, 0.0]
        return t

    def add(self, lineno: int, typ: str, p: dict[str, Any]) -> None:
        if typ == "run" or typ == "session":
            return  # written once the whole shard is read (they usually come last)
        g = p.get
        run = self.run_id
        if typ == "attempt":
            surface = g("surface", "")
            pk = self.ids[p["id"]] = self._next_id()
            self.attempts.rows.append(
                (
                    pk,
                    run,
                    p["id"],
                    lineno,
                    p["case"],
                    p["model"],
                    surface,
                    surface,
                    "",
                    g("session", ""),
                    g("repeat", 0),
                    g("shown_tools"),
                    g("overflowed"),
                    g("tool_digest", ""),
                    _json(g("facts")),
                    g("stimulus", ""),
                    p["ended_by"],
                    g("reason", ""),
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0.0,
                )
            )
        else:
            key = p["attempt"]
            if typ == "turn":
                u = g("usage") or {}
                blocks = g("blocks", [])
                usage = (
                    u.get("input", 0),
                    u.get("output", 0),
                    u.get("cache_created", 0),
                    u.get("cache_read", 0),
                )
                latency = g("latency_ms")
                t = self._total(key)
                t[0].add(p["index"])
                t[1] += 1
                t[3] += usage[0]
                t[4] += usage[1]
                t[5] += usage[2]
                t[6] += usage[3]
                t[7] += latency or 0.0
                table = self.turns
                row: tuple[Any, ...] = (
                    lineno,
                    p["index"],
                    p["try"],
                    g("request_digest", ""),
                    _json(blocks),
                    *usage,
                    p["status"],
                    g("detail", ""),
                    latency,
                    any(b.get("kind") == "tool_call" for b in blocks),
                )
            elif typ == "call":
                self._total(key)[2] += 1
                table = self.calls
                row = (
                    lineno,
                    p["turn"],
                    p["index"],
                    p["tool"],
                    _json(g("arguments")),
                    g("requested_action", ""),
                    g("dispatched_action", ""),
                    g("dispatched_tool", ""),
                    g("refusal_reason", ""),
                    p["outcome"],
                    _json(g("result")),
                    g("result_truncated", False),
                    g("text", ""),
                    g("text_truncated", False),
                    g("duration_ms"),
                    g("trace_id", ""),
                    g("requests"),
                    g("dispatch_observed", False),
                )
            else:
                table = self.verifies
                row = (lineno, p["name"], g("passed", False), g("detail", ""))
            attempt_id = self.ids.get(key)
            if attempt_id is None:
                self.orphans.append((table, key, row))
                return
            table.rows.append((attempt_id, *row))
        self.pending += 1
        if self.pending >= BATCH_LINES:
            self.flush()

    def flush(self) -> None:
        with connection.cursor() as cursor:
            for table in (self.attempts, self.turns, self.calls, self.verifies):
                table.flush(cursor)
        self.pending = 0

    def adopt_orphans(self) -> None:
        """Write the lines that came before their attempt line, now that every id is known."""
        for table, key, row in self.orphans:
            table.rows.append((self.ids[key], *row))
        self.orphans = []
        self.flush()

    def write_totals(self, cursor: Any) -> None:
        qn = connection.ops.quote_name
        cursor.executemany(
            f"UPDATE {qn(Attempt._meta.db_table)} SET turn_count = %s, try_count = %s, "
            f"call_count = %s, input_tokens = %s, output_tokens = %s, "
            f"cache_created_tokens = %s, cache_read_tokens = %s, latency_ms = %s WHERE id = %s",
            [(len(t[0]), *t[1:], self.ids[key]) for key, t in self.totals.items()],
        )


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


def _finish(run: Run, joins: Joins, shard: ShardFile, writer: _ShardWriter) -> int:
    """Write the run and session lines, then settle joins and totals in the database."""
    p = joins.run
    assert p is not None
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
    run.line = joins.run_line
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
        )
        for label, (line, s) in joins.sessions.items()
    )
    qn = connection.ops.quote_name
    a, t, c, v = (qn(m._meta.db_table) for m in (Attempt, Turn, Call, Verify))
    with connection.cursor() as cur:
        if sessions:
            if not all(s.pk for s in sessions):
                sessions = list(Session.objects.filter(run=run))
            cur.executemany(
                f"UPDATE {a} SET session_id = %s, effective_mode = %s, effective_surface = "
                f"CASE WHEN surface = '' THEN %s ELSE surface END "
                f"WHERE run_id = %s AND session_label = %s",
                [(s.pk, s.mode or "default", s.surface, run.pk, s.label) for s in sessions],
            )
        # Sessionless attempts (skips, early harness errors) join the one candidate of the
        # shard with the same model and surface, if there is exactly one (modelrecord C.9).
        cur.execute(
            f"SELECT model, effective_surface, MIN(effective_mode), MAX(effective_mode) FROM {a} "
            f"WHERE run_id = %s AND session_id IS NOT NULL GROUP BY model, effective_surface",
            [run.pk],
        )
        single = [(lo, run.pk, m, s) for m, s, lo, hi in cur.fetchall() if lo == hi]
        if single:
            cur.executemany(
                f"UPDATE {a} SET effective_mode = %s WHERE run_id = %s AND session_id IS NULL "
                f"AND model = %s AND effective_surface = %s",
                single,
            )
        writer.write_totals(cur)
        ended = ", ".join(
            f"SUM(CASE WHEN ended_by = '{e}' THEN 1 ELSE 0 END)"
            for e in (
                "completed",
                "over_budget",
                "malformed",
                "no_tool_call",
                "provider_error",
                "harness_error",
                "skipped",
            )
        )
        s_table = qn(SurfaceSummary._meta.db_table)
        cur.execute(
            f"INSERT INTO {s_table} (run_id, model, surface, mode, attempts, completed, "
            f"over_budget, malformed, no_tool_call, provider_error, harness_error, skipped, "
            f"turns, tries, calls, latency_ms, input_tokens, output_tokens, "
            f"cache_created_tokens, cache_read_tokens) SELECT run_id, model, effective_surface, "
            f"effective_mode, COUNT(*), {ended}, SUM(turn_count), SUM(try_count), "
            f"SUM(call_count), SUM(latency_ms), SUM(input_tokens), SUM(output_tokens), "
            f"SUM(cache_created_tokens), SUM(cache_read_tokens) FROM {a} WHERE run_id = %s "
            f"GROUP BY run_id, model, effective_surface, effective_mode",
            [run.pk],
        )
        cur.execute(
            f"SELECT a.session_id, COUNT(*), SUM(CASE WHEN c.dispatch_observed THEN 1 ELSE 0 END) "
            f"FROM {c} c JOIN {a} a ON a.id = c.attempt_id WHERE a.run_id = %s "
            f"AND a.session_id IS NOT NULL GROUP BY a.session_id",
            [run.pk],
        )
        per_session = cur.fetchall()
        if per_session:
            cur.executemany(
                f"UPDATE {qn(Session._meta.db_table)} SET call_count = %s, "
                f"observed_call_count = %s WHERE id = %s",
                [(n, observed, sid) for sid, n, observed in per_session],
            )
        cur.execute(f"SELECT DISTINCT {qn('case')} FROM {a} WHERE run_id = %s ORDER BY 1", [run.pk])
        run.cases_seen = [r[0] for r in cur.fetchmany(5000)]
    summaries = list(SurfaceSummary.objects.filter(run=run))
    run.attempt_count = sum(s.attempts for s in summaries)
    run.input_tokens = sum(s.input_tokens for s in summaries)
    run.output_tokens = sum(s.output_tokens for s in summaries)
    run.cache_created_tokens = sum(s.cache_created_tokens for s in summaries)
    run.cache_read_tokens = sum(s.cache_read_tokens for s in summaries)
    run.models_seen = sorted({s.model for s in summaries})
    run.surfaces_seen = sorted({s.surface for s in summaries if s.surface})
    run.modes_seen = sorted({s.mode for s in summaries if s.mode})
    run.save()
    shard.warnings = joins.warnings[:200]
    shard.warning_count = len(joins.warnings)
    return run.attempt_count


def ingest_shard(
    stream: IO[bytes],
    name: str,
    upload: Upload,
    report: IngestReport,
    progress: Progress | None = None,
) -> None:
    """Store one shard whole, or report why not. Never raises for a user's mistake."""
    sha, size = _sha256(stream)
    if ShardFile.objects.filter(sha256=sha).exists():
        report.present.append({"file": name, "sha256": sha})
        return
    try:
        with transaction.atomic():
            shard = ShardFile.objects.create(
                upload=upload, name=name[:500], sha256=sha, size=size, lines=0
            )
            run = Run.objects.create(shard=shard, run_id="", repeat=0, line=0)
            joins = Joins(name)
            writer = _ShardWriter(run.pk)
            done = 0
            next_report = CHUNK * 8
            lineno = 0
            for lineno, typ, p, nbytes in iter_lines(stream, name):
                joins.see(lineno, typ, p)
                writer.add(lineno, typ, p)
                done += nbytes
                if progress and done >= next_report:
                    progress(name, done, size)
                    next_report += CHUNK * 8
            joins.finish()
            writer.adopt_orphans()
            shard.lines = lineno
            attempts = _finish(run, joins, shard, writer)
            shard.save(update_fields=["lines", "warnings", "warning_count"])
    except ShardError as exc:
        report.refused.append(exc.as_dict())
        return
    except IntegrityError:
        # Another upload stored the same content while this one was reading it.
        if ShardFile.objects.filter(sha256=sha).exists():
            report.present.append({"file": name, "sha256": sha})
            return
        raise
    except DatabaseError as exc:
        # A value the database cannot hold; the transaction rolled back, nothing is stored.
        if "lock" in str(exc).lower():
            raise
        report.refused.append(
            ShardError(name, f"the database refused a value of this shard: {exc}").as_dict()
        )
        return
    if progress:
        progress(name, size, size)
    analyze_if_large(lineno)
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
            "warnings": shard.warning_count,
            "scored_against": scoring.key.digest if scoring else None,
        }
    )


ANALYZE_AFTER_LINES = 20_000


def analyze_if_large(rows: int) -> None:
    """After a large bulk load, refresh PostgreSQL's statistics so its plans fit the data
    (autovacuum gets there eventually; pages should not wait for it)."""
    if connection.vendor != "postgresql" or rows < ANALYZE_AFTER_LINES:
        return
    from records.models import ScoreCase, Verdict

    with connection.cursor() as cur:
        for model in (Attempt, Turn, Call, Verify, Session, SurfaceSummary, Verdict, ScoreCase):
            cur.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


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
    for item in inputs:
        if isinstance(item, ShardError):
            report.refused.append(item.as_dict())
            continue
        try:
            if item.name.lower().endswith(".json"):
                _ingest_key(item, upload, report, allow_digest_mismatch)
            else:
                _ingest_one(item, upload, report, progress)
        except (ShardError, CorpusKeyError, ConformanceError) as exc:
            report.refused.append(exc.as_dict())
    upload.summary = report.as_dict()
    upload.save(update_fields=["summary"])
    return report


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
        raise CorpusKeyError(item.name, f"is not valid JSON: {exc}") from None
    from records.conformance_runs import looks_like_suite, store_suite

    if looks_like_suite(doc):
        report.suites.append(store_suite(data, item.name, upload))
        return
    if not (isinstance(doc, dict) and "format" in doc) and looks_like_replay(doc):
        report.replays.append(ingest_document(doc, item.name, upload))
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


def _ingest_one(
    item: Input, upload: Upload, report: IngestReport, progress: Progress | None
) -> None:
    base = item.name.replace("\\", "/").rsplit("/", 1)[-1]
    kind = _archive_kind(base)
    if kind:
        for member, data in _expand_archive(item, kind, report):
            ingest_shard(data, member, upload, report, progress)
    elif is_shard_name(base):
        with item.open() as fh:
            ingest_shard(fh, item.name, upload, report, progress)
    else:
        raise ShardError(
            item.name,
            "is neither a shard (modeleval-*.jsonl), a corpus key or replay document (.json) "
            "nor a .zip or .tar.gz artifact",
        )


def bytes_input(name: str, data: bytes) -> Input:
    return Input(name, lambda: io.BytesIO(data), len(data))
