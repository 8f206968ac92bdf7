"""Scoring a run against a corpus key: which key scores it, where each attempt's row is (C.9), the
attempts read back a chunk at a time and scored (here or by scorer processes), the verdicts and
rows stored in one transaction."""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, nullcontext
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min

from records.bulk import processes
from records.bulk.among import among_sql
from records.bulk.apart import Reader, reader
from records.bulk.sqlite import checkpoints
from records.bulk.tables import Table, analyze_if_large, gc_paused
from records.formats.corpus_key import CorpusKeyError, KeyDocument, key_to_json, read_corpus_key
from records.formats.rows import FAILURE_COLUMNS, VERDICT_FIELDS
from records.models import (
    Attempt,
    Call,
    CaseFigure,
    CorpusKey,
    KeyCase,
    Run,
    ScoreCase,
    Scoring,
    Session,
    Upload,
    Verdict,
    Verify,
)
from records.scorer.batch import Chunk, account_chunk, score_chunk
from records.scorer.score import (
    CALL_COLUMNS,
    SCORER_VERSION,
    ScoringError,
)
from records.scoring.failures import store_failures
from records.scoring.ranking import store_rows
from records.scoring.refusals import provenance_refusal
from records.scoring.sums import ScoringSums
from records.scoring.worker import ChunkRead, read_chunk, score_worker

# Scorers may start from a forkserver a parser process started first. On PostgreSQL they read
# their chunks with psycopg (`records.bulk.apart`): imported once by that server, its pages
# shared by them all, not imported by each (some 8 MB a scorer).
processes.preload(score_worker)
if connection.vendor == "postgresql":
    processes.preload_module("psycopg")


def store_key(
    data: bytes, name: str, upload: Upload, *, allow_digest_mismatch: bool = False
) -> tuple[CorpusKey, bool]:
    """Store a corpus key (raises CorpusKeyError). Returns (key, created)."""
    doc = read_corpus_key(data, name, allow_digest_mismatch=allow_digest_mismatch)
    canonical = key_to_json(doc)
    canonical["corpus_digest"] = doc.declared_digest
    sha = hashlib.sha256(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)).hexdigest()
    existing = CorpusKey.objects.filter(sha256=sha).first()
    if existing:
        return existing, False
    with transaction.atomic():
        key = CorpusKey.objects.create(
            digest=doc.digest,
            declared_digest=doc.declared_digest,
            verified=doc.verified,
            sha256=sha,
            name=name[:500],
            source=doc.source,
            upload=upload,
            case_count=len(doc.cases),
            document=canonical,
        )
        KeyCase.objects.bulk_create(
            KeyCase(
                key=key,
                position=i,
                case_id=c["id"],
                prompt=c["prompt"],
                recipe=c["recipe"],
                tier=c["needs"]["tier"],
                needs=c["needs"],
                surfaces_only=c["surfaces"]["only"],
                surfaces_reason=c["surfaces"]["reason"],
                steps=c["steps"],
            )
            for i, c in enumerate(canonical["cases"])
        )
    return key, True


@dataclass
class _Placement:
    mode: str
    tier: str
    row_key: str


def _row_key(model: str, surface: str, mode: str, run: Run, session: Session | None) -> str:
    """The C.9 row key string."""
    parts = [
        f"model={model}",
        f"surface={surface}",
        f"mode={mode}",  # as the session line writes it: an empty mode is its own row
        f"tier={run.tier}",
    ]
    if session is not None:
        if session.tier_pin:
            parts.append(f"tier-pin={session.tier_pin}")
        if session.meta_param_schema:
            parts.append(f"meta-schema={session.meta_param_schema}")
        if session.slice_size:
            parts.append(f"slice={session.slice_size}")
    tools = (session.tool_schema_digests or {}).get(model, "") if session else ""
    parts += [
        f"corpus={run.corpus_digest}",
        f"contract={run.contract_digest}",
        f"tools={tools}",
        f"repeat={run.repeat}",
    ]
    return " ".join(parts)


_Triple = tuple[str, str, int | None]  # an attempt's model, surface and session id
_Places = dict[_Triple, _Placement]


@dataclass
class Placing:
    """Where each (model, surface, session) of a run's attempts goes (`placed`), the rows in
    upstream's candidate order (`order`), and what `refused` needs to say which of those rows
    upstream refuses."""

    placed: _Places
    row_of: dict[str, tuple[str, int | None]]  # row key: its model and session
    sessions: dict[int, Session]
    order: list[str]

    def refused(self, run: Run) -> set[str]:
        """The row keys upstream refuses before scoring them (E.3 rules 1-4, those a run alone
        decides)."""
        return {key for key, _ in self.refusals(run)}

    def refusals(self, run: Run) -> list[tuple[str, tuple[str, str]]]:
        """Each row upstream refuses before scoring it, in candidate order, with the E.3 rule
        (1-4) and evaldash's reason."""
        providers = {p.spec: p for p in run.providers.all()}
        sessions = self.sessions
        unobserved = {
            sid for sid, s in sessions.items() if s.call_count and not s.observed_call_count
        }
        out = []
        for key in self.order:
            model, sid = self.row_of[key]
            found = provenance_refusal(
                run, sessions.get(sid or 0), providers.get(model), unobserved
            )
            if found:
                out.append((key, found))
        return out


def _placements(run: Run, firsts: dict[_Triple, int]) -> Placing:
    """Where each (model, surface, session) of the run's attempts goes (C.9); `firsts`: each
    triple with the place of its first attempt in the shard.

    Attempts with a session are keyed by it, as record.go's groupShard keys them: the row takes
    the session of its key's first attempt (two sessions sharing one row key are one candidate,
    whose provenance is the first's). A sessionless attempt (a skip, an early harness error)
    joins the one row of the shard with its model and surface (placeSessionless); with none or
    several it forms a row of its own, keyed with no session, which the provenance rule
    refuses. A sessionless attempt is scored in the default mode at the run's tier, as upstream
    reads an attempt with no session. The rows are in groupShard's order: by first attempt, the
    sessionless rows of their own after the others."""
    sessions = {s.pk: s for s in run.sessions.all()}
    triples = sorted(firsts, key=firsts.__getitem__)
    placed: _Places = {}
    rows_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    row_of: dict[str, tuple[str, int | None]] = {}
    order: list[str] = []
    for model, surface, session_id in triples:
        session = sessions.get(session_id) if session_id else None
        if session is None:
            continue
        key = _row_key(model, surface, session.mode, run, session)
        placed[(model, surface, session_id)] = _Placement(
            session.mode, session.tier_pin or run.tier, key
        )
        rows_of[(model, surface)].add(key)
        if key not in row_of:
            row_of[key] = (model, session_id)
            order.append(key)
    for model, surface, session_id in triples:
        if (model, surface, session_id) in placed:
            continue
        hosts = rows_of.get((model, surface), set())
        key = next(iter(hosts)) if len(hosts) == 1 else _row_key(model, surface, "", run, None)
        placed[(model, surface, session_id)] = _Placement("", run.tier, key)
        if key not in row_of:
            row_of[key] = (model, None)
            order.append(key)
    return Placing(placed, row_of, sessions, order)


def _firsts(rows: list[tuple]) -> dict[_Triple, int]:
    """Each (model, surface, session) of `rows` (as `_attempt_rows` reads them, in the shard's
    order) with the place of its first attempt."""
    firsts: dict[_Triple, int] = {}
    for i, row in enumerate(rows):
        firsts.setdefault(row[3:6], i)
    return firsts


def candidates(run: Run) -> Placing:
    """The run's rows as upstream's groupShard forms them, read from its attempts in one
    grouped query (not a row per attempt): in candidate order, each with its session."""
    firsts = {
        (r["model"], r["effective_surface"], r["session_id"]): r["first"]
        for r in Attempt.objects.filter(run=run)
        .values("model", "effective_surface", "session_id")
        .annotate(first=Min("line"))
        .order_by()
    }
    return _placements(run, firsts)


# What the scoring reads of each attempt: which it is and where its row goes, then what the
# scorer reads of its turns and checks, then the tries and tokens each verdict copies (with the
# session), then its repeat (the order of a case's marks, `records.scoring.sums`).
_ATTEMPT_READ = (
    *("id", "key", "case", "model", "effective_surface", "session_id"),
    *("ended_by", "reason", "last_turn_has_tool_call", "failed_checks"),
    *("try_count", "input_tokens", "output_tokens", "cache_created_tokens", "cache_read_tokens"),
    "repeat",
)
_COPIED = slice(10, 15)  # the tries and tokens


def attempts_as_read(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[tuple]:
    """Attempt rows of the named columns (as an ingest writes a run's, `session` for its
    session's id), put as the scoring reads a run's attempts (`_attempt_rows`, in id order), so
    that a run just stored is scored without reading its attempts back."""
    at = {name: i for i, name in enumerate(columns)}
    at.setdefault("session_id", at.get("session", -1))
    pick = [at[name] for name in _ATTEMPT_READ]
    return sorted((tuple(row[i] for i in pick) for row in rows), key=itemgetter(0))


def _attempt_rows(run: Run, only: int | None = None) -> list[tuple]:
    """The run's attempts (or the one whose id is `only`), in id order, as `_ATTEMPT_READ`
    names their columns."""
    qn = connection.ops.quote_name
    columns = ", ".join(qn(c) for c in _ATTEMPT_READ)
    which, params = ("run_id = %s", [run.pk]) if only is None else ("id = %s", [only])
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT {columns} FROM {qn(Attempt._meta.db_table)} WHERE {which} ORDER BY id", params
        )
        return cur.fetchall()


CHUNK_ATTEMPTS = 300  # attempts a scorer takes at a time
# The most attempts whose verdicts a scoring computed ahead of its write holds, packed as the
# scorers sent them (about 370 bytes an attempt): memory stays bounded however large the run.
AHEAD_ATTEMPTS = 20_000


def _chunk_reads(
    run: Run,
    doc: KeyDocument,
    rows: list[tuple],
    placed: _Places,
    chunk: int = CHUNK_ATTEMPTS,
) -> Iterator[ChunkRead]:
    """The run's attempts (`rows`) a chunk at a time, each with the two statements that read
    what the scorer needs of them (`records.scoring.worker.read_chunk`): plain SQL, JSON left
    as text. The statements run here or in a scorer process on a connection of its own, so
    reading the next chunk overlaps scoring this one.

    A call's result, the bulk of a run, is read only for attempts whose case binds an argument
    to an earlier step's result (a `produced` truth): no other rule looks at it."""
    producing = {
        c.id for c in doc.cases if any(a.truth.kind == "produced" for s in c.steps for a in s.args)
    }
    qn = connection.ops.quote_name
    a_t, c_t, v_t = (qn(m._meta.db_table) for m in (Attempt, Call, Verify))
    # By the range of ids alone, as the calls are: with the run's id too, SQLite took the run's
    # index and read every attempt of the run for each chunk.
    facts_sql = (
        f"SELECT id, CAST(facts AS TEXT) FROM {a_t} WHERE id >= %s AND id <= %s "
        f"AND facts IS NOT NULL"
    )
    # The text is read only for the meta decline test (C.2): skip it elsewhere. The result is
    # `{result}`: read for some of a chunk's attempts, or for none.
    read = {
        "arguments": "CAST(arguments AS TEXT)",
        "result": "{result}",
        "text": "CASE WHEN outcome = 'refused:invalid_params' THEN text ELSE '' END",
    }
    columns = ", ".join(read.get(name, qn(name)) for name in CALL_COLUMNS)
    calls_sql = (
        f"SELECT attempt_id, {columns} FROM {c_t} WHERE attempt_id >= %s AND attempt_id <= %s "
        f"ORDER BY attempt_id, {qn('index')}, line"
    )
    # The names of the failed checks, for a failure's signature: read only for a chunk with one.
    checks_sql = (
        f"SELECT attempt_id, name FROM {v_t} WHERE attempt_id >= %s AND attempt_id <= %s "
        f"AND passed = %s ORDER BY attempt_id, line"
    )
    for start in range(0, len(rows), chunk):
        attempts = []
        for row in rows[start : start + chunk]:
            pk, key, case, model, surface, session_id, ended_by, reason = row[:8]
            place = placed[(model, surface, session_id)]
            mode, tier, row_key = place.mode, place.tier, place.row_key
            attempts.append(
                (pk, key, case, model, surface, mode, tier, ended_by, reason, row_key)
                + (*row[8:10], session_id, *row[_COPIED])  # last turn, failed checks; copied
            )
        # The chunk's attempts are a range of ids (in id order), read by range; where another
        # run's attempts lie between them (ids taken by two ingests at once), their rows are
        # dropped (`mine`).
        lo, hi = attempts[0][0], attempts[-1][0]
        mine = None if hi - lo + 1 == len(attempts) else [a[0] for a in attempts]
        reading = [a[0] for a in attempts if a[2] in producing]
        if reading:
            reading_among, reading = among_sql("attempt_id", reading, connection.vendor)
            result = f"CASE WHEN {reading_among} THEN CAST(result AS TEXT) END"
        else:
            result = "NULL"
        facts = (facts_sql, [lo, hi])
        calls = (calls_sql.replace("{result}", result), [*reading, lo, hi])
        failed = any(a[11] for a in attempts)
        checks = (checks_sql, [lo, hi, False]) if failed else None
        yield ChunkRead(attempts, facts, calls, mine, checks)


def _read_here(spec: ChunkRead) -> Chunk:
    """A chunk read on this process's connection."""
    with connection.cursor() as cur:

        def fetch(sql: str, params: list[Any]) -> list[tuple]:
            cur.execute(sql, params)
            return cur.fetchall()

        return read_chunk(fetch, spec)


def chunks(run: Run, doc: KeyDocument, chunk: int = CHUNK_ATTEMPTS) -> Iterator[Chunk]:
    """The run's chunks to score (`records.scorer.batch`), read here."""
    rows = _attempt_rows(run)
    for spec in _chunk_reads(run, doc, rows, _placements(run, _firsts(rows)).placed, chunk):
        yield _read_here(spec)


# What scoring an attempt again must give for its account to stand for the stored verdict, each
# column by its place in the verdict row and its name: every column but the row key (its
# placement among the run's other attempts, which the account does not depend on).
# The failure signature is left out too: it is made from the figures compared, and a scoring
# stored before signatures were made has none.
_ACCOUNTED = [
    (i, name)
    for i, name in enumerate(VERDICT_FIELDS)
    if name != "row_key" and name not in FAILURE_COLUMNS
]
_RESCORE = "a re-score of the run shows them"


class Account(NamedTuple):
    """The scorer's account of a verdict step by step (`told`, `AttemptVerdict.as_dict`), or,
    when it is None, why not (`missing`, a sentence)."""

    told: dict[str, Any] | None
    missing: str = ""


def account(verdict: Verdict) -> Account:
    """The scorer's account of `verdict` step by step (each step, how a call reached it and was
    answered, each argument sent beside the one wanted), made again from the attempt's stored
    rows against its scoring's key. It is not stored (most of a scoring's writing); one attempt
    is scored here in a few milliseconds. It stands for the stored verdict only where the
    scorer is the version that made the scoring and scoring the attempt again gives the stored
    verdict's figures, every one; otherwise none is given, and `missing` says why."""
    scoring = verdict.scoring
    if scoring.scorer_version != SCORER_VERSION:
        return Account(
            None,
            f"This scoring was made by {scoring.scorer_version}, not by today's "
            f"{SCORER_VERSION}, so its steps are not made again here: {_RESCORE}.",
        )
    run = scoring.run
    try:
        doc = scoring.key.load()
    except CorpusKeyError as exc:
        return Account(
            None,
            f"The scoring's corpus key no longer reads ({exc}), so its steps cannot be made again.",
        )
    rows = _attempt_rows(run, verdict.attempt_id)
    (spec,) = _chunk_reads(run, doc, rows, _placements(run, _firsts(rows)).placed)
    try:
        scored = account_chunk(doc, scoring.stale, _read_here(spec))
    except ScoringError as exc:
        return Account(None, f"The scorer now refuses this attempt ({exc}): {_RESCORE}.")
    stored = [getattr(verdict, Verdict._meta.get_field(name).attname) for _, name in _ACCOUNTED]
    for row, told in scored:
        if [row[i] for i, _ in _ACCOUNTED] == stored:
            return Account(told)
    return Account(
        None,
        "Scoring this attempt again no longer gives this verdict's figures, so its steps are "
        f"not shown: {_RESCORE}.",
    )


SCORER_PROCESSES = 2


def _by_processes(run: Run) -> bool:
    """Whether a scoring of `run` is done by the scorer processes: a large run, where a
    process can be started at all."""
    return (
        run.attempt_count >= settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS and processes.available()
    )


def scored_on_arrival_by_processes(run: Run) -> bool:
    """Whether a scoring of `run` on its arrival will be done by the scorer processes: it is
    large enough, and a stored key has its digest."""
    return _by_processes(run) and run.key() is not None


def prepare_scorers(
    reach: Reader | None, *, in_thread: bool = False, parsers_end: bool = False
) -> bool:
    """Called once a shard is read, before its attempts are stored, for a run that will be
    scored on arrival by the scorer processes (`scored_on_arrival_by_processes`): have what
    they are started from ready by then (`processes.prepare`). `reach`: what
    `records.bulk.apart.reader` answered before the shard's transaction, as it will answer the
    scoring after its commit. `in_thread`: the scoring will run in a thread of its own while
    this one works on, so its scorers cannot be forked from here. `parsers_end`: the ingest's
    parser processes (and the threads that feed them) end before the scoring, so scorers that
    may fork can be forked from here then: nothing is started for them now, and True is
    returned, for the ingest to ask again once they have ended (where other threads remain,
    their server starts then)."""
    fork = _may_fork(reach) and not in_thread
    if fork and parsers_end:
        return True
    processes.prepare(score_worker, fork=fork)
    return False


def _may_fork(reach: Reader | None) -> bool:
    """Whether the scorers may be forked from this process, for how they read the rows."""
    return reach is None or reach.may_fork


def _verdicts(
    run: Run,
    doc: KeyDocument,
    stale: bool,
    reach: Reader | None,
    rows: list[tuple],
    placing: Placing,
    ahead: threading.Event | None = None,
) -> Iterator[tuple[list[tuple], int, int, int]]:
    """Verdict rows chunk by chunk, scored here or, for a large run, by two scorer processes
    while this one writes the verdicts (`records.bulk.processes`). Each scorer reads its
    chunks' rows itself where it can reach them (`reach`, `records.bulk.apart`), so this process
    only sends which rows and writes what comes back; else they are read here and sent. Chunks
    go to the scorers in turn and their answers are taken in the same order, so the verdicts,
    and the first error, are those of scoring in line. `rows`: the run's attempts, as
    `_attempt_rows` reads them, placed by `placing`.

    `ahead`: until it is set, the scorers are sent chunks and their answers wait, packed, up to
    `AHEAD_ATTEMPTS` attempts' worth; nothing is yielded before it is set."""
    placed, refused = placing.placed, placing.refused(run)
    if not _by_processes(run):
        if ahead is not None:
            ahead.wait()
        for spec in _chunk_reads(run, doc, rows, placed):
            yield score_chunk(doc, stale, _read_here(spec), refused)
        return
    what = f"the scoring of run {run.pk}"
    scorers = processes.Beside.several(
        SCORER_PROCESSES,
        score_worker,
        (doc, stale, refused, reach),
        what,
        fork=_may_fork(reach),
    )
    n = len(scorers)
    sent = received = 0
    finished = False

    def answer(msg: Any) -> tuple[list[tuple], int, int, int]:
        if msg[0] == "error":
            raise ScoringError(msg[1])
        return msg[1], msg[2], msg[3], msg[4]

    try:
        for spec in _chunk_reads(run, doc, rows, placed):
            msg = ("read", spec) if reach else ("rows", _read_here(spec))
            if not scorers[sent % n].send(processes.pack(msg)):
                # A scorer is gone: the answers up to what it said last (an error, or
                # nothing) end this.
                if ahead is not None:
                    ahead.wait()
                while True:
                    received += 1
                    yield answer(scorers[(received - 1) % n].receive())
            sent += 1
            if ahead is not None and not ahead.is_set():
                if sent * CHUNK_ATTEMPTS >= AHEAD_ATTEMPTS:
                    ahead.wait()
                continue
            while received < sent:
                msg = scorers[received % n].receive(block=False)
                if msg is processes.NOTHING:
                    break
                received += 1
                yield answer(msg)
        for scorer in scorers:
            scorer.end_input()
        if ahead is not None:
            ahead.wait()
        while received < sent:
            received += 1
            yield answer(scorers[(received - 1) % n].receive())
        finished = True
    finally:
        for scorer in scorers:
            if not finished:
                scorer.stop()
            scorer.close()


_VERDICT_COLUMNS = ["scoring", *VERDICT_FIELDS]


class _Started:
    """A run's verdicts (`_verdicts`) set going now: taking the first answer sends the scorers
    their chunks, and, with `ahead`, waits until it is set. What that raises is raised where
    the answers are taken, in the scoring's transaction, as in line."""

    def __init__(self, verdicts: Iterator[tuple[list[tuple], int, int, int]]) -> None:
        self.verdicts = verdicts
        self.first: list[tuple[list[tuple], int, int, int]] = []
        self.error: Exception | None = None
        try:
            self.first.append(next(verdicts))
        except StopIteration:
            pass
        except (ScoringError, RuntimeError) as exc:
            self.error = exc

    def __iter__(self) -> Iterator[tuple[list[tuple], int, int, int]]:
        if self.error is not None:
            raise self.error
        yield from self.first
        yield from self.verdicts

    def close(self) -> None:
        """Its scorers stopped, where the answers were not all taken."""
        self.verdicts.close()


def score_run(run: Run, key: CorpusKey, doc: KeyDocument | None = None) -> Scoring:
    """Score every attempt of `run` against `key` and store the scoring whole in one
    transaction: its verdicts, rows, statistics and counts, or (when scoring fails) a scoring
    that says why. A process killed part way leaves no scoring at all, never a partial one.
    It returns once committed; on SQLite a large run's checkpoint of the log may still be under
    way beside the caller (`records.bulk.sqlite.checkpoints.finish` waits for it)."""
    scoring = _score(run, key, doc, unless_scored=False)
    assert scoring is not None
    return scoring


def _score(
    run: Run,
    key: CorpusKey,
    doc: KeyDocument | None,
    *,
    unless_scored: bool,
    attempts: list[tuple] | None = None,
    ahead: threading.Event | None = None,
) -> Scoring | None:
    """`score_run`, in turn with every other scoring of the run: the run's row is locked
    first (PostgreSQL; SQLite's immediate transactions already take one writer at a time).
    With `unless_scored`, a run that has a scoring once its turn comes is left as it is (None),
    so callers racing to score one unscored run store one scoring between them. `attempts`:
    the run's attempts as `attempts_as_read` puts them, where the caller has them; else read.
    `ahead`: the scorers start before the transaction and work until it is set (another
    connection may be writing meanwhile), their answers waiting (`_verdicts`); the transaction
    starts then."""
    reach = reader(connection)  # before this transaction: whether the run's rows are committed
    # A large run's verdicts fill SQLite's log: its checkpoint runs beside what comes next (the
    # next run's scoring, the next shard), as a shard's does, not on the commit's path.
    large = run.attempt_count >= settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS
    if _by_processes(run):  # their server starts while the key is read and the attempts listed
        processes.prepare(score_worker, fork=_may_fork(reach))
    doc = doc or key.load()
    stale = key.digest != run.corpus_digest or not key.verified

    table = Table(Verdict, _VERDICT_COLUMNS)
    verdicts = None
    if ahead is not None:  # read and placed before the transaction: the run is committed
        attempts = attempts if attempts is not None else _attempt_rows(run)
        placing = _placements(run, _firsts(attempts))
        verdicts = _Started(_verdicts(run, doc, stale, reach, attempts, placing, ahead))
    stop = closing(verdicts) if verdicts is not None else nullcontext()
    with checkpoints.deferred(large), gc_paused(), transaction.atomic(), stop:
        list(Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True))
        if unless_scored and Scoring.objects.filter(run=run).exists():
            return None
        count = 0
        skipped_retired = skipped_unknown = skipped_refused = 0
        with transaction.atomic():
            scoring = Scoring.objects.create(
                run=run, key=key, scorer_version=SCORER_VERSION, stale=stale, signed=True
            )
            if attempts is None:
                attempts = _attempt_rows(run)
            repeats = {row[0]: row[-1] for row in attempts}
            sums = ScoringSums()
            if verdicts is None:
                placing = _placements(run, _firsts(attempts))
                verdicts = _verdicts(run, doc, stale, reach, attempts, placing)
            try:
                for rows, retired, unknown, refused in verdicts:
                    skipped_retired += retired
                    skipped_unknown += unknown
                    skipped_refused += refused
                    count += len(rows)
                    sums.add(rows, repeats)
                    table.rows = [(scoring.pk, *row) for row in rows]
                    with connection.cursor() as cur:
                        table.flush(cur)
                del attempts, repeats  # a row per attempt: not kept through the statistics
            except ScoringError as exc:
                transaction.set_rollback(True)
                error = str(exc)
            except RuntimeError as exc:  # a scorer process died: the scoring fails, nothing else
                transaction.set_rollback(True)
                error = f"the scoring did not finish: {exc}"
            else:
                error = ""
        if error:
            # The verdicts were rolled back; keep the failed scoring so the run page can say why.
            return Scoring.objects.create(
                run=run, key=key, scorer_version=SCORER_VERSION, stale=stale, error=error
            )
        sessions = {key: sid for key, (_, sid) in placing.row_of.items()}
        store_rows(scoring, sums, sessions, placing.sessions)
        # ANALYZE in the transaction counts its own new rows: the pages' reads plan on them.
        analyze_if_large(count, (Verdict, ScoreCase))
        CaseFigure.objects.store_for(scoring, sums.marks())
        store_failures(scoring, sums)
        notes = []
        if skipped_retired:
            notes.append(f"{skipped_retired} attempt(s) name retired cases and are not scored")
        if skipped_unknown:
            notes.append(f"{skipped_unknown} attempt(s) name cases this key does not have")
        if skipped_refused:
            notes.append(
                f"{skipped_refused} attempt(s) could not be scored and stand in rows upstream "
                "refuses before scoring, so they are not scored"
            )
        scoring.verdict_count, scoring.error = count, "; ".join(notes)
        scoring.save(update_fields=["verdict_count", "error"])
    return scoring


def rescore_for_key(key: CorpusKey) -> list[Scoring]:
    """Score every stored run that carries this key's digest."""
    doc = key.load()
    return [score_run(run, key, doc) for run in Run.objects.filter(corpus_digest=key.digest)]


def score_if_key(run: Run) -> Scoring | None:
    key = run.key()
    return score_run(run, key) if key else None


# The largest run the run page scores while it loads, when a killed ingest left it unscored:
# about 1.5 s of scoring (2,876 attempts took 1.7 s on two busy cores). A larger one is left
# to a retried upload, the gate, a worker's sweep or `manage.py rescore --pending`.
PAGE_SCORING_MAX_ATTEMPTS = 2000


def score_if_unscored(
    run: Run, attempts: list[tuple] | None = None, ahead: threading.Event | None = None
) -> Scoring | None:
    """Score a run that has no scoring yet against its stored key, and return that scoring;
    None when no stored key has its digest or it has a scoring (also one that a concurrent
    caller stored a moment ago: the two store one scoring between them, on either database).

    A run is left unscored when its process was killed between the commit of its shard and
    its scoring; every place that meets the run calls this (a retried upload, the gate, the
    run page for a run small enough to score inline, `score_pending_runs`). `attempts`: the
    run's attempts, where the caller just stored them (`attempts_as_read`). `ahead`: its
    scorers work until that is set before its transaction starts (the ingest sets it once the
    next shard is stored, `records.ingest.shards.Scorings`)."""
    if Scoring.objects.filter(run=run).exists():
        return None
    key = run.key()
    if key is None:
        return None
    return _score(run, key, None, unless_scored=True, attempts=attempts, ahead=ahead)


def score_unscored(runs: Iterable[Run]) -> list[Scoring]:
    """`score_if_unscored` for each of `runs`: the scorings stored. The gate calls it for its
    two runs, so CI gets an answer about a run a killed ingest left unscored."""
    return [s for run in runs if (s := score_if_unscored(run)) is not None]


def score_pending_runs(limit: int | None = None) -> list[Scoring]:
    """Score every run whose key is stored but that has no scoring (`Run.objects.pending()`), oldest
    first, at most `limit` of them; returns the scorings stored.

    This is the sweep a background worker runs now and then, and what `manage.py rescore
    --pending` runs: it picks up the runs a killed ingest left unscored. Each run is scored as
    `score_if_unscored` scores it, so sweeps running at once (or a sweep and a page) store one
    scoring per run. A run's attempts are read a chunk at a time, so memory stays bounded."""
    ids = Run.objects.pending().order_by("pk").values_list("pk", flat=True)
    made = []
    for pk in list(ids if limit is None else ids[:limit]):
        run = Run.objects.filter(pk=pk).first()  # it may have been deleted meanwhile
        if run is not None and (scoring := score_if_unscored(run)) is not None:
            made.append(scoring)
    return made
