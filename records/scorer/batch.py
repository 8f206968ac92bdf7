"""Scoring a run chunk by chunk: rows as the database returns them in, verdict rows out.

Pure Python, no Django. `score_chunk` builds each attempt's scorer input from plain rows (JSON
still as text), scores it and returns the verdict rows to store. It runs in the scoring's own
process for small runs and, for large ones, in a second process (`worker`) while the first
reads the next chunk and writes the verdicts, so both cores work.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator
from typing import Any

import msgspec

from records.formats.corpus_key import KeyDocument
from records.formats.rows import FAILURE_PARTS
from records.scorer.score import (
    COUNTED_APART,
    Aggregate,
    AttemptInput,
    AttemptVerdict,
    CallInput,
    ScoringError,
    failure_signature,
    mode_id,
    score_attempt,
)

_decode = msgspec.json.Decoder().decode

# A chunk: (attempts, facts, calls, checks), each a list of rows:
#   attempts: (pk, key, case, model, surface, mode, tier, ended_by, reason, row key,
#              last turn has a tool call, failed checks,
#              session id, tries, input, output, cache created, cache read tokens)
#   facts:    (attempt pk, JSON text)
#   calls:    (attempt pk, *CALL_COLUMNS), JSON as text, in (attempt, index, line) order
#   checks:   (attempt pk, name) of each verify line that failed, in (attempt, line) order
Chunk = tuple[list[tuple], list[tuple], list[tuple], list[tuple]]
_NOT_FAILED = ("",) * (1 + len(FAILURE_PARTS))


def _json(text: str | None) -> Any:
    return None if text is None else _decode(text)


def score_chunk(
    doc: KeyDocument, stale: bool, chunk: Chunk, refused: Collection[str] = ()
) -> tuple[list[tuple], int, int, int]:
    """Verdict rows for a chunk's attempts, and how many were skipped as retired, unknown (only
    under a stale key; otherwise an unknown case is a ScoringError) or unscoreable in a row
    upstream refuses before scoring (`refused` row keys: there an attempt the scorer cannot
    read is left out, as upstream never scores it, instead of failing the whole run)."""
    rows: list[tuple] = []
    skipped = [0, 0, 0]  # by _RETIRED, _UNKNOWN, _UNSCOREABLE
    for row, verdict in _scored(doc, stale, chunk, refused):
        if row is None:
            skipped[verdict] += 1
        else:
            rows.append(row)
    return rows, *skipped


def account_chunk(doc: KeyDocument, stale: bool, chunk: Chunk) -> list[tuple[tuple, dict]]:
    """Each scored attempt of a chunk as `score_chunk` scores it: its verdict row and the
    scorer's account of it step by step (`AttemptVerdict.as_dict`), which is not stored: the
    attempt's page asks for it again (`records.scoring.run.account`)."""
    return [(row, v.as_dict()) for row, v in _scored(doc, stale, chunk, ()) if row is not None]


# Why an attempt is skipped, as `_scored` gives it (and `score_chunk` counts it).
_RETIRED, _UNKNOWN, _UNSCOREABLE = 0, 1, 2


def _scored(
    doc: KeyDocument, stale: bool, chunk: Chunk, refused: Collection[str]
) -> Iterator[tuple[tuple, AttemptVerdict] | tuple[None, int]]:
    """Each attempt of `chunk` in turn: scored, its verdict row and verdict; skipped, None and
    why (`_RETIRED`, `_UNKNOWN` or `_UNSCOREABLE`)."""
    attempts, facts_rows, call_rows, check_rows = chunk
    checks: dict[int, list[str]] = defaultdict(list)
    for attempt_pk, name in check_rows:
        checks[attempt_pk].append(name)
    facts = {pk: _json(text) for pk, text in facts_rows}
    calls: dict[int, list[CallInput]] = defaultdict(list)
    for attempt_pk, *row in call_rows:
        call = CallInput(*row)
        # JSON arrives as text, and SQLite's booleans as 0 and 1.
        call.arguments = _json(call.arguments)
        call.result = _json(call.result)
        call.result_truncated = bool(call.result_truncated)
        call.dispatch_observed = bool(call.dispatch_observed)
        calls[attempt_pk].append(call)
    for attempt in attempts:
        pk, key, case, model, surface, mode, tier, ended_by, reason, row_key = attempt[:10]
        last_has_call, failed_checks = attempt[10:12]
        if case in doc.retired:
            yield None, _RETIRED
            continue
        if stale and doc.case(case) is None:
            yield None, _UNKNOWN
            continue
        a = AttemptInput(
            id=key,
            case=case,
            model=model,
            surface=surface,
            mode=mode,
            tier=tier,
            ended_by=ended_by,
            reason=reason,
            facts=facts.get(pk) or {},
            calls=calls.get(pk, []),
            last_turn_has_tool_call=None if last_has_call is None else bool(last_has_call),
            # Only whether every check held is read (C.5), so the failures stand for them all.
            verifies=[False] * failed_checks,
            failed_checks=checks.get(pk, []),
        )
        try:
            v = score_attempt(a, doc)
        except ScoringError:
            if row_key not in refused:
                raise
            yield None, _UNSCOREABLE
            continue
        agg = Aggregate()
        agg.add(v)
        r = agg.ratios
        sig = failure_signature(a, v)
        failure = (
            _NOT_FAILED
            if sig is None
            else (mode_id(sig), *(sig[part] or "" for part in FAILURE_PARTS))
        )
        yield (
            (
                pk,
                row_key,
                case,
                model,
                surface,
                v.outcome,
                v.reason,
                v.clean,
                v.unaided,
                v.verified,
                v.outcome not in COUNTED_APART,
                agg.discovery,
                agg.invalid_params,
                agg.steps,
                r["reached"][0],
                r["reached"][1],
                r["accepted_first_time"][0],
                r["accepted_first_time"][1],
                r["argument_fidelity"][0],
                r["argument_fidelity"][1],
                r["confirmation"][0],
                r["confirmation"][1],
                agg.declines.get("by-refusal", 0),
                agg.declines.get("by-text", 0),
                agg.confirmations.get("unaided", 0),
                agg.confirmations.get("server-aided", 0),
                agg.confirmations.get("never", 0),
                *failure,
                *attempt[12:],
            ),
            v,
        )
