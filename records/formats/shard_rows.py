"""A shard's lines as table rows, in one streaming pass. Pure Python, no Django.

`messages()` reads a shard with the strict reader, checks the joins, and yields what the ingest
writes, in this order:

- ("batch", *`Batch`), every few thousand lines or few MB: child rows whose first value is
  their attempt's index in the shard (0, 1, ... in file order);
- ("shard", ShardSummary) once the whole shard is read and its joins hold: the run line, the
  sessions with their call counts, the per-(model, surface, mode) summaries and the warnings;
- ("attempts", rows), the attempt rows with their totals, effective surface and mode settled;
- ("done", None).

Attempt rows are held until the end because what they carry (totals over their turn and call
lines, their session's surface and mode) is only known once the shard is read; written once,
they are never updated. The same generator runs in the ingest's own process, or, for large
shards, in a parser process beside the database writer (`worker`), so that parsing and writing
use both cores; one such process parses an ingest call's large shards one after another. A
ShardError in the parser reaches the writer as a ("error", ...) message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

import msgspec

from records.formats.rows import (
    AttemptRow,
    position,
)
from records.formats.shard import ENDINGS, Joins, iter_lines

BATCH_LINES = 2000
# A batch also goes out once this many bytes were read since the last, rows or not (long lines,
# or attempt lines only): the writer lets the parser read only so far ahead of the rows it took.
BATCH_BYTES = 4 * 1024 * 1024

_TABLES = {"turn": "turns", "call": "calls", "verify": "verifies"}

# Positions in an attempt row (AttemptRow's order); its totals start at _A_TOTALS, the eight
# summed ones first.
_A_MODEL = position(AttemptRow, "model")
_A_SURFACE = position(AttemptRow, "surface")
_A_EFF_SURFACE = position(AttemptRow, "effective_surface")
_A_EFF_MODE = position(AttemptRow, "effective_mode")
_A_LABEL = position(AttemptRow, "session_label")
_A_ENDED_BY = position(AttemptRow, "ended_by")
_A_TOTALS = position(AttemptRow, "turn_count")
_NO_TOTALS = (0, 0, 0, 0, 0, 0, 0, 0.0, None, 0)


_encode = msgspec.json.Encoder().encode


class Batch(NamedTuple):
    """What a "batch" message carries after its kind (messages travel as plain lists)."""

    turns: list[list[Any]]
    calls: list[list[Any]]
    verifies: list[list[Any]]
    attempts_seen: int  # attempts read so far: every row names one of these
    bytes_read: int  # of the shard, so far: always the last item


def json_text(value: Any) -> str | None:
    """JSON text: SQLite stores it as is, PostgreSQL parses it into jsonb."""
    if value is None:
        return None
    return _encode(value).decode()


@dataclass
class ShardSummary:
    lines: int
    run: dict[str, Any]
    run_line: int
    sessions: dict[str, tuple[int, dict[str, Any]]]
    # label -> [calls, calls the server observed] over the session's attempts
    session_calls: dict[str, list[int]]
    summaries: list[tuple[Any, ...]]  # SUMMARY_COLUMNS order
    cases_seen: list[str]
    attempt_count: int
    warnings: list[dict[str, Any]] = field(default_factory=list)
    warning_count: int = 0


class ShardRows:
    """Turns validated lines into rows and keeps what the end of the shard settles."""

    def __init__(self, name: str) -> None:
        self.joins = Joins(name)
        self.index: dict[str, int] = {}  # attempt key -> its index in the shard
        self.attempts: list[list[Any]] = []
        # attempt index -> [turn indexes, tries, calls, input, output, cache created,
        # cache read, latency, (index, has a tool call) of the last turn, failed
        # checks]; for keys not yet seen, waiting under the key.
        self.totals: dict[Any, list[Any]] = {}
        # Child rows as lists, their attempt's index first (the writer puts its id there).
        self.turns: list[list[Any]] = []
        self.calls: list[list[Any]] = []
        self.verifies: list[list[Any]] = []
        # Child lines that came before their attempt line (rare): rows keyed by attempt key.
        # (table name, attempt key, row): the table by name, since each batch starts new lists.
        self.orphans: list[tuple[str, str, list[Any]]] = []
        # attempt index -> [calls, observed calls]
        self.call_counts: dict[int, list[int]] = {}
        self.pending_calls: dict[str, list[int]] = {}
        self.pending = 0
        self.lines = 0

    def add(self, lineno: int, typ: str, p: Any) -> None:
        """One line as the reader gives it (run and session lines as dicts, the rest as structs)."""
        self.joins.see(lineno, typ, p)
        self.lines = lineno
        if typ == "run" or typ == "session":
            return
        if typ == "attempt":
            key = p.id
            k = self.index[key] = len(self.attempts)
            self.attempts.append(
                [
                    key,
                    lineno,
                    p.case,
                    p.model,
                    p.surface,
                    p.surface,
                    "",
                    p.session,
                    p.repeat,
                    p.shown_tools,
                    p.overflowed,
                    p.tool_digest,
                    json_text(p.facts),
                    p.stimulus,
                    p.ended_by,
                    p.reason,
                ]
            )
            early = self.totals.pop(key, None)
            if early is not None:
                self.totals[k] = early
            early_calls = self.pending_calls.pop(key, None)
            if early_calls is not None:
                self.call_counts[k] = early_calls
            return
        key = p.attempt
        k = self.index.get(key)
        t = self.totals.get(key if k is None else k)
        if t is None:
            t = self.totals[key if k is None else k] = [set(), 0, 0, 0, 0, 0, 0, 0.0, None, 0]
        if typ == "turn":
            u = p.usage
            blocks = p.blocks
            latency = p.latency_ms
            has_tool_call = "tool_call" in [b.kind for b in blocks]
            last = t[8]
            # The conversation's last position, its last try there (lines come in order).
            if last is None or p.index >= last[0]:
                t[8] = (p.index, has_tool_call)
            t[0].add(p.index)
            t[1] += 1
            t[3] += u.input
            t[4] += u.output
            t[5] += u.cache_created
            t[6] += u.cache_read
            if latency:
                t[7] += latency
            table = self.turns
            row: list[Any] = [
                k,
                lineno,
                p.index,
                p.try_,
                p.request_digest,
                _encode(blocks).decode(),
                u.input,
                u.output,
                u.cache_created,
                u.cache_read,
                p.status,
                p.detail,
                latency,
                has_tool_call,
            ]
        elif typ == "call":
            t[2] += 1
            observed = p.dispatch_observed
            counts = (
                self.pending_calls.setdefault(key, [0, 0])
                if k is None
                else self.call_counts.setdefault(k, [0, 0])
            )
            counts[0] += 1
            counts[1] += observed
            table = self.calls
            arguments, result = p.arguments, p.result
            row = [
                k,
                lineno,
                p.turn,
                p.index,
                p.tool,
                None if arguments is None else _encode(arguments).decode(),
                p.requested_action,
                p.dispatched_action,
                p.dispatched_tool,
                p.refusal_reason,
                p.outcome,
                None if result is None else _encode(result).decode(),
                p.result_truncated,
                p.text,
                p.text_truncated,
                p.duration_ms,
                p.trace_id,
                p.requests,
                observed,
            ]
        else:
            table = self.verifies
            if not p.passed:
                t[9] += 1
            row = [k, lineno, p.name, p.passed, p.detail]
        if k is None:
            self.orphans.append((_TABLES[typ], key, row))
        else:
            table.append(row)
        self.pending += 1

    def take_batch(self, bytes_read: int) -> tuple[Any, ...]:
        out = Batch(self.turns, self.calls, self.verifies, len(self.attempts), bytes_read)
        self.turns, self.calls, self.verifies = [], [], []
        self.pending = 0
        return ("batch", *out)

    def finish(self) -> tuple[ShardSummary, list[list[Any]]]:
        """Check the joins, place the orphans, and settle what needs the whole shard."""
        self.joins.finish()
        for table, key, row in self.orphans:
            row[0] = self.index[key]
            getattr(self, table).append(row)
        self.orphans = []
        joins = self.joins
        sessions = joins.sessions
        attempts = self.attempts
        totals = self.totals
        # Each attempt's session surface and mode (modelrecord C.1), then its totals.
        for k, row in enumerate(attempts):
            label = row[_A_LABEL]
            if label:
                s = sessions[label][1]
                if not row[_A_SURFACE]:
                    row[_A_EFF_SURFACE] = s.get("surface", "")
                row[_A_EFF_MODE] = s.get("mode", "") or "default"
            t = totals.get(k)
            if t is None:
                row.extend(_NO_TOTALS)
            else:
                row.extend((len(t[0]), *t[1:8], None if t[8] is None else t[8][1], t[9]))
        # Sessionless attempts (skips, early harness errors) join the one candidate of the
        # shard with the same model and surface, if there is exactly one (modelrecord C.9).
        modes: dict[tuple[str, str], set[str]] = {}
        for row in attempts:
            if row[_A_LABEL]:
                modes.setdefault((row[_A_MODEL], row[_A_EFF_SURFACE]), set()).add(row[_A_EFF_MODE])
        for row in attempts:
            if not row[_A_LABEL]:
                found = modes.get((row[_A_MODEL], row[_A_EFF_SURFACE]))
                if found is not None and len(found) == 1:
                    row[_A_EFF_MODE] = next(iter(found))
        session_calls: dict[str, list[int]] = {}
        for k, (n, observed) in self.call_counts.items():
            label = attempts[k][_A_LABEL]
            if label:
                c = session_calls.setdefault(label, [0, 0])
                c[0] += n
                c[1] += observed
        groups: dict[tuple[str, str, str], list[list[Any]]] = {}
        for row in attempts:
            groups.setdefault((row[_A_MODEL], row[_A_EFF_SURFACE], row[_A_EFF_MODE]), []).append(
                row
            )
        summaries = []
        for group, members in sorted(groups.items()):
            ended = Counter(row[_A_ENDED_BY] for row in members)
            turns, tries, calls, i, o, cc, cr, latency = (
                sum(column)
                for column in zip(*(row[_A_TOTALS : _A_TOTALS + 8] for row in members), strict=True)
            )
            summaries.append(
                (*group, len(members), *(ended[e] for e in ENDINGS), turns, tries, calls)
                + (float(latency), i, o, cc, cr)
            )
        assert joins.run is not None
        summary = ShardSummary(
            lines=self.lines,
            run=joins.run,
            run_line=joins.run_line,
            sessions=sessions,
            session_calls=session_calls,
            summaries=summaries,
            cases_seen=sorted({row[2] for row in attempts})[:5000],
            attempt_count=len(attempts),
            warnings=joins.warnings[:200],
            warning_count=len(joins.warnings),
        )
        return summary, attempts


def messages(stream: IO[bytes], name: str) -> Iterator[tuple[Any, ...]]:
    """The shard's rows, in the order the module docstring gives. Raises ShardError."""
    rows = ShardRows(name)
    done = last = 0
    for lineno, typ, p, nbytes in iter_lines(stream, name):
        rows.add(lineno, typ, p)
        done += nbytes
        if rows.pending >= BATCH_LINES or done - last >= BATCH_BYTES:
            yield rows.take_batch(done)
            last = done
    summary, attempts = rows.finish()
    yield rows.take_batch(done)
    yield ("shard", summary)
    for i in range(0, len(attempts), BATCH_LINES):
        yield ("attempts", [(k, *row) for k, row in enumerate(attempts[i : i + BATCH_LINES], i)])
    yield ("done", None)
