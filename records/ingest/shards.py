"""Storing one shard: read by the strict reader (here or in a parser process beside the writer),
written whole in one transaction or not at all."""

from __future__ import annotations

import hashlib
import io
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction

from records.bulk import processes
from records.bulk.apart import Reader, reader
from records.bulk.readahead import CHUNK, Feed, Parsers, WorkerError
from records.bulk.sqlite import checkpoints
from records.bulk.tables import RowRefused, Table, analyze_if_large, gc_paused, reserve_ids
from records.formats.rows import (
    ATTEMPT_COLUMNS,
    CALL_COLUMNS,
    SUMMARY_COLUMNS,
    TURN_COLUMNS,
    VERIFY_COLUMNS,
    RunRow,
    SessionRow,
    kept,
)
from records.formats.shard import ShardError
from records.formats.shard_rows import (
    Batch,
    ShardSummary,
    messages,
)
from records.ingest.inputs import (
    IngestReport,
    Progress,
    disk_full,
)
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
from records.scoring.run import (
    attempts_as_read,
    prepare_scorers,
    score_if_unscored,
    scored_on_arrival_by_processes,
)
from records.search.index import after_commit, indexing, queue_index

PRICE_FIELDS = (
    "input_per_million_usd",
    "output_per_million_usd",
    "cache_write_per_million_usd",
    "cache_read_per_million_usd",
)


def _sha256(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
    stream.seek(0)
    return digest.hexdigest()


def stream_size(stream: IO[bytes]) -> int:
    size = stream.seek(0, io.SEEK_END)
    stream.seek(0)
    return size


_SHARD_FIELD = {"try_number": "try"}  # where a column's name is not its field's


class _Writer:
    """Writes the parser's rows: child rows as they come, attempt rows once the shard is read.

    Attempt ids are reserved ahead of the rows that name them (the parser numbers attempts in
    file order), so turn, call and verify rows carry their attempt's id when they are written.
    The search index is not written here: the shard's transaction queues it
    (`records.search.index.queue_index`), and it is written once the shard has committed.
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.turns = Table(Turn, TURN_COLUMNS)
        self.calls = Table(Call, [*CALL_COLUMNS, "id"])
        self.call_ids_above = 0
        self.verifies = Table(Verify, VERIFY_COLUMNS)
        self.attempts = Table(Attempt, ["id", "run", "session", *ATTEMPT_COLUMNS])
        self.kinds = {
            id(self.turns): "turn",
            id(self.calls): "call",
            id(self.verifies): "verify",
            id(self.attempts): "attempt",
        }
        self.ids: list[int] = []
        self.read: list[tuple] = []  # the attempt rows as the scoring reads them

    def where(self, refused: RowRefused) -> tuple[int | None, str | None]:
        """The shard line and field of a row the database refused: rows carry their line."""
        kind, table = self.kinds.get(id(refused.table)), refused.table
        if kind is None or "line" not in table.columns:
            return None, None
        line = refused.row[table.columns.index("line")]
        column = refused.column
        return line, f"{kind}.{_SHARD_FIELD.get(column, column)}" if column else None

    def _reserve(self, n: int) -> None:
        if n > len(self.ids):
            above = self.ids[-1] if self.ids else 0
            self.ids += reserve_ids(Attempt, max(n - len(self.ids), 1000), above=above)

    def children(self, batch: Batch) -> None:
        self._reserve(batch.attempts_seen)
        ids = self.ids
        calls = batch.calls
        call_ids = reserve_ids(Call, len(calls), above=self.call_ids_above) if calls else []
        for r, call_id in zip(calls, call_ids, strict=True):
            r.append(call_id)
        if call_ids:
            self.call_ids_above = call_ids[-1]
        with connection.cursor() as cursor:
            for table, rows in (
                (self.turns, batch.turns),
                (self.calls, calls),
                (self.verifies, batch.verifies),
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
        self.read += attempts_as_read(self.attempts.columns, self.attempts.rows)
        with connection.cursor() as cursor:
            self.attempts.flush(cursor)


def _parser_process_for(size: int) -> bool:
    """Whether a shard of this size is parsed in a second process."""
    return size >= settings.EVALDASH_PARSER_PROCESS_MIN_BYTES and processes.available()


def _hashed_on_the_way(size: int) -> bool:
    """Whether a shard of this size is hashed as its bytes go to the parser process: it is
    parsed there, and no stored shard has its size, so none can hold the same content. Any
    other shard is hashed and looked up first, in its turn."""
    return _parser_process_for(size) and not ShardFile.objects.filter(size=size).exists()


@dataclass
class ShardCandidate:
    """A shard candidate: its stream is open until the shard is stored or refused (`ingest`
    closes it), so that its parse may start while the shards before it are stored."""

    name: str
    stream: IO[bytes]
    size: int
    feed: Feed | None = None  # its parse, when it started while the shard before was stored


class _Raise:
    """An unforeseen error met while taking the next unit early: it is raised in its turn."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


_END = object()


class Units:
    """What the inputs hold, in order (`_units`), looking ahead as far as the parser processes
    allow: while the writer stores a shard, the large shards after it are taken and their
    parses started in the other processes; once it has read a shard, its process takes the
    next. At most one unit a process is taken ahead, and none past one not being parsed."""

    def __init__(self, units: Iterator[Any], parsers: Parsers) -> None:
        self.units = units
        self.parsers = parsers
        self.limit = len(parsers.parsers)
        self.ahead: deque[Any] = deque()  # the units taken early, in order

    def __iter__(self) -> Iterator[Any]:
        while True:
            unit = self.ahead.popleft() if self.ahead else next(self.units, _END)
            if unit is _END:
                return
            if isinstance(unit, _Raise):
                raise unit.exc
            yield unit

    def read_on(self) -> None:
        """The shard being stored has started, or has been read: start on the next ones."""
        for unit in self.ahead:
            if not self._started(unit):
                return
        while len(self.ahead) < self.limit and self._parsing_last():
            if not self._started(self._take()):
                return

    def parse_follows(self) -> bool:
        """Whether the unit after the one being stored is a shard a parser process will parse
        (the next is taken early to see, where `read_on` has not taken it)."""
        if not self.ahead:
            self._take()
        unit = self.ahead[0]
        return isinstance(unit, ShardCandidate) and (
            unit.feed is not None or _parser_process_for(unit.size)
        )

    def _take(self) -> Any:
        try:
            unit = next(self.units, _END)
        except Exception as exc:  # noqa: BLE001 (raised in its turn, not into this shard's)
            unit = _Raise(exc)
        self.ahead.append(unit)
        return unit

    def shard_follows(self) -> bool:
        """Whether the unit after the one being stored is known to be a shard (taken early,
        `read_on`)."""
        return bool(self.ahead) and isinstance(self.ahead[0], ShardCandidate)

    def _parsing_last(self) -> bool:
        """Whether the last unit taken early is a shard being parsed (or none was taken): none
        is taken past one that is not, since what is taken early (an archive's entry, copied
        out) waits in memory or on disk, for no gain."""
        last = self.ahead[-1] if self.ahead else None
        return last is None or (isinstance(last, ShardCandidate) and last.feed is not None)

    def _started(self, unit: Any) -> bool:
        """Whether `unit` needs no parse started, or its parse is started; False while every
        parser process is busy."""
        if not isinstance(unit, ShardCandidate) or unit.feed is not None:
            return True
        if not _hashed_on_the_way(unit.size):
            return True  # parsed in its turn, once hashed and looked up
        unit.feed = self.parsers.start(unit.stream, unit.name, ahead=True)
        return unit.feed is not None


def _store_run(run: Run, summary: ShardSummary, shard: ShardFile) -> dict[str, int]:
    """Write the run line, its providers, sessions and summaries; the session ids by label."""
    p = summary.run
    for name, value in kept(RunRow, p, summary.run_line).items():
        setattr(run, name, value)
    providers = []
    for pos, prov in enumerate(p.get("providers", [])):
        price = prov.get("price")
        providers.append(
            Provider(
                run=run,
                position=pos,
                **{f: prov.get(f, "") for f in ("spec", "name", "model")},
                options=prov.get("options", {}),
                priced=price is not None,
                # An unpriced model has no figures (unknown, never zero); a priced one, 0 for
                # a figure its price leaves out.
                **{f: (price or {}).get(f, 0.0 if price else None) for f in PRICE_FIELDS},
                retrieved_on=(price or {}).get("retrieved_on", ""),
            )
        )
    Provider.objects.bulk_create(providers)
    sessions = Session.objects.bulk_create(
        Session(
            run=run,
            **kept(SessionRow, s, line),
            call_count=summary.session_calls.get(label, (0, 0))[0],
            observed_call_count=summary.session_calls.get(label, (0, 0))[1],
        )
        for label, (line, s) in summary.sessions.items()
    )
    if sessions and not all(s.pk for s in sessions):
        sessions = list(Session.objects.filter(run=run))
    table = Table(SurfaceSummary, ["run", *SUMMARY_COLUMNS])
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


def _present(name: str, sha: str) -> dict[str, Any]:
    """What a shard already stored is reported as. A process killed between storing the shard
    and scoring it leaves its run unscored: sending the shard again scores it now, against its
    stored key, and the answer says so (`scored_against`)."""
    entry: dict[str, Any] = {"file": name, "sha256": sha}
    run = Run.objects.filter(shard__sha256=sha).select_related("pending_index").first()
    scoring = score_if_unscored(run) if run is not None else None
    if run is not None and indexing(run):  # its index too, killed before it was written
        after_commit(run.pk)
    if scoring is not None:
        entry.update(run=run.pk, run_id=run.run_id, scored_against=scoring.key.digest)
    return entry


def ingest_shard(
    shard: ShardCandidate,
    upload: Upload,
    report: IngestReport,
    progress: Progress | None,
    parsers: Parsers,
    units: Units,
    scorings: Scorings,
) -> None:
    """Store one shard whole, or report why not. Never raises for a user's mistake.

    The same content is stored once. A shard no stored shard matches in size cannot be stored
    already: a large one is then hashed as its bytes go to the parser process, instead of in
    a pass of its own before the parse; the row waits under a provisional digest until then.
    Any other shard is hashed first and looked up. Either way the unique digest decides a race
    between two uploads of the same content. `units.read_on` is called as the shard starts and
    once it is read, so the next ones may start; the shard is then scored by `scorings`."""
    started = time.perf_counter()
    stream, name, size, feed = shard.stream, shard.name, shard.size, shard.feed
    large = feed is not None or _parser_process_for(size)
    sha: str | None = None
    if feed is None and not _hashed_on_the_way(size):
        sha = _sha256(stream)
        if ShardFile.objects.filter(sha256=sha).exists():
            report.present.append(_present(name, sha))
            return
    try:
        reach = reader(connection)  # as the scoring after the commit will find it
        with checkpoints.deferred(large), gc_paused(), transaction.atomic():
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
            beside = False  # whether its scoring will run beside the next shard's store
            deferred = False  # whether the scorers' head start waits for the parsers' end
            next_report = CHUNK * 8
            if large and feed is None:
                feed = parsers.start(stream, name)
            units.read_on()  # the shards after this one, parsed beside it where processes are free
            for msg in feed.messages() if feed else messages(stream, name):
                kind = msg[0]
                if kind == "batch":
                    batch = Batch(*msg[1:])
                    writer.children(batch)
                    if progress and batch.bytes_read >= next_report:
                        progress(name, batch.bytes_read, size)
                        next_report = batch.bytes_read + CHUNK * 8
                elif kind == "shard":
                    units.read_on()
                    summary = msg[1]
                    session_ids = _store_run(run, summary, shard_row)
                    if scored_on_arrival_by_processes(run):  # its key stored, large enough
                        beside = scorings.beside(reach)
                        # Ready once the rest is stored.
                        deferred = prepare_scorers(
                            reach, in_thread=beside, parsers_end=not units.parse_follows()
                        )
                elif kind == "attempts":
                    writer.write_attempts(msg[1], session_ids)
                elif kind == "done" and sha is None:
                    sha = shard_row.sha256 = msg[1]
                    shard_row.save(update_fields=["sha256"])
            assert summary is not None and sha is not None
            if not units.parse_follows():
                # No parse follows: the parser processes end now, their memory given back
                # before this shard's scoring starts processes of its own (a large shard
                # further on starts them again).
                parsers.close()
                if deferred:  # where threads outlive them, the scorers' server after all
                    prepare_scorers(reach, in_thread=beside)
            queue_index(run)  # indexed once this commits, by its follow-up
            attempts, lineno = summary.attempt_count, summary.lines
    except ShardError as exc:
        report.refused.append(exc.as_dict())
        return
    except WorkerError as exc:  # the parser process's own ShardError, as it sent it
        file, message, line, fld = exc.payload
        report.refused.append(ShardError(file, message, line=line, field=fld).as_dict())
        return
    except RowRefused as exc:
        if disk_full(exc):  # PostgreSQL's COPY names the row it was writing when the disk filled
            raise
        line, fld = writer.where(exc)
        message = f"the database refused a value of this shard: {exc.message}"
        report.refused.append(ShardError(name, message, line=line, field=fld).as_dict())
        return
    except IntegrityError:
        # Another upload stored the same content while this one was reading it.
        if sha is not None and ShardFile.objects.filter(sha256=sha).exists():
            report.present.append(_present(name, sha))
            return
        raise
    except DatabaseError as exc:
        # The transaction rolled back: nothing of the shard is stored. A full store is no fault
        # of the shard: the ingest stops, and its caller keeps the bytes to try again later.
        if disk_full(exc):
            raise
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
    after_commit(run.pk)  # the index, queued (or kept for the end of the ingest)

    entry = {
        "file": name,
        "sha256": sha,
        "run": run.pk,
        "run_id": run.run_id,
        "attempts": attempts,
        "lines": lineno,
        "warnings": shard_row.warning_count,
        "seconds": round(seconds, 3),  # to store it (its scoring apart)
        "scored_against": None,  # set once scored
        # Unscored until a key of this digest arrives: the answer says which one.
        "corpus_digest": run.corpus_digest,
    }
    report.stored.append(entry)
    scorings.score(run, writer.read, entry, beside)  # the attempts as written, not read back


ScoringFailed = Callable[[str, BaseException], None]


class Scorings:
    """Each stored shard's scoring on its arrival, in line or beside the next shard's store.

    A run the scorer processes score, with a shard after it, outside a caller's transaction
    (another connection could not read its rows) and where the ingest has more than one core,
    is scored by a thread on a connection of its own while this one stores the next shard:
    that store keeps about one core busy, and the scorers take the other. On PostgreSQL, which
    takes two writers at once, the thread writes the verdicts as they come. On SQLite, one
    writer at a time, the scorers work while the next shard is stored, their answers waiting
    (up to `records.scoring.run.AHEAD_ATTEMPTS`), and the thread writes them once that shard
    has committed (`wait`, which this one waits through). One scoring at a time. Elsewhere
    each run is scored in line as its shard commits.

    A scoring that raises leaves its shard out of `report.stored`: in line, the error goes on
    to the caller as before; beside, `failed(name, error)` is told once it is waited for."""

    def __init__(
        self, report: IngestReport, failed: ScoringFailed, shard_follows: Callable[[], bool]
    ) -> None:
        self.report = report
        self.failed = failed
        self.shard_follows = shard_follows
        self.thread: threading.Thread | None = None
        self.write = threading.Event()  # the scoring under way may write
        self.outcome: tuple[dict[str, Any], BaseException | None] | None = None

    def beside(self, reach: Reader | None) -> bool:
        """Whether a run just read, which the scorer processes will score on its arrival, will
        be scored beside the next shard's store: one follows (`shard_follows`, asked once the
        next units are taken). `reach`: what `records.bulk.apart.reader` answered before the
        shard's transaction (None in a caller's transaction, whose rows no other connection
        sees)."""
        return reach is not None and self.shard_follows()

    def score(self, run: Run, attempts: list[tuple], entry: dict[str, Any], beside: bool) -> None:
        """Score `run` once the scoring before it has ended: beside (`beside`), or in line."""
        self.wait()
        if not beside:
            self._score(run, attempts, entry, None)
            return
        self.write = threading.Event()
        if connection.vendor != "sqlite":
            self.write.set()  # a second writer: from the start
        self.thread = threading.Thread(
            target=self._score,
            args=(run, attempts, entry, self.write),
            name=f"scoring of run {run.pk}",
            daemon=True,
        )
        self.thread.start()

    def wait(self) -> None:
        """Let the scoring under way write, if any, and wait for it; a failure is told to
        `failed`."""
        if self.thread is None:
            return
        self.write.set()
        self.thread.join()
        self.thread = None
        assert self.outcome is not None
        (entry, error), self.outcome = self.outcome, None
        if error is not None:
            self.failed(entry["file"], error)

    def _score(
        self,
        run: Run,
        attempts: list[tuple],
        entry: dict[str, Any],
        write: threading.Event | None,
    ) -> None:
        """In line (`write` None) or as the thread beside."""
        error: BaseException | None = None
        try:
            scoring = score_if_unscored(run, attempts, write)
            entry["scored_against"] = scoring.key.digest if scoring else None
        except BaseException as exc:  # noqa: BLE001 (told in line, or once waited for)
            self.report.stored.remove(entry)
            if write is None:
                raise
            error = exc
        finally:
            if write is not None:
                connection.close()  # this thread's own
                self.outcome = (entry, error)
