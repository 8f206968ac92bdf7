"""The rows a shard becomes, one declaration per table, and the rows the scoring and a
conformance run's reader give their tables. Pure Python, no Django.

Each layout is a msgspec Struct, and the tables take their columns from them
(`records.models.fields.row_columns`). The run and session rows, one a line, derive from the
strict reader's own declaration of those lines, with what an absent field means. The bulk
layouts are `array_like` Structs whose field names, order and types are written here and
nowhere else: the column lists the writer inserts by, and the positions the row builder reads
back, derive from them; rows travel between the parser and the writer as plain arrays in this
order (building them as lists, not Struct instances, is what keeps the parser fast: a test
converts every kind of built row into its Struct, so the two cannot drift apart).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import msgspec

from records.formats.shard import ENDINGS, PAYLOADS

# A JSON value carried as its text (stored as JSON).
JsonText = Annotated[str, msgspec.Meta(description="JSON text")]
# An integer that takes Go's int whole (64 bits), where the other counts and positions of a row
# are kept in 32.
Int64 = Annotated[int, msgspec.Meta(description="64-bit integer")]


def _line_row(
    name: str, line_type: str, *, required: tuple[str, ...], unknown: tuple[str, ...]
) -> type[msgspec.Struct]:
    """What a table keeps of a run or session line: its number in the shard and each field the
    strict reader declares with a plain type (providers, a list of objects, have a table of
    their own). Where the line leaves a field out it is its type's zero value, as upstream's
    Go reader leaves it, or None where `unknown` (absent means unknown there, not zero); the
    reader refuses a line without the `required` ones."""
    fields: list[tuple[Any, ...]] = [("line", int)]
    for field, kind in PAYLOADS[line_type].types.items():
        if field in required:
            fields.append((field, kind))
        elif field in unknown:
            fields.append((field, kind | None, None))
        else:
            fields.append((field, kind, msgspec.field(default_factory=kind)))
    return msgspec.defstruct(name, fields, kw_only=True, module=__name__)


RunRow = _line_row(
    "RunRow", "run", required=("run_id", "repeat"), unknown=("started_at", "budget_usd")
)
SessionRow = _line_row("SessionRow", "session", required=("label",), unknown=("slice_size",))


def kept(row: type[msgspec.Struct], payload: dict[str, Any], line: int) -> dict[str, Any]:
    """The values of a `row` (RunRow, SessionRow) for a line the strict reader has checked."""
    return msgspec.structs.asdict(msgspec.convert({**payload, "line": line}, row))


class TurnRow(msgspec.Struct, array_like=True):
    attempt: int  # the attempt's index in the shard; the writer puts the attempt's id here
    line: int
    index: int
    try_number: int
    request_digest: str
    blocks: JsonText
    input_tokens: int
    output_tokens: int
    cache_created_tokens: int
    cache_read_tokens: int
    status: str
    detail: str
    latency_ms: float | None
    has_tool_call: bool  # whether the turn carried a tool_call block (the scorer's C.4 test)


class CallRow(msgspec.Struct, array_like=True):
    attempt: int  # as in TurnRow
    line: int
    turn: int
    index: Int64
    tool: str
    arguments: JsonText | None
    requested_action: str
    dispatched_action: str
    dispatched_tool: str
    refusal_reason: str
    outcome: str
    result: JsonText | None
    result_truncated: bool
    text: str
    text_truncated: bool
    duration_ms: float | None
    trace_id: str
    requests: int | None
    dispatch_observed: bool


class VerifyRow(msgspec.Struct, array_like=True):
    attempt: int  # as in TurnRow
    line: int
    name: str
    passed: bool
    detail: str


class AttemptRow(msgspec.Struct, array_like=True):
    """An attempt line with what the end of the shard settles: its session's surface and mode
    (modelrecord C.1) and its totals over its turn, call and verify lines."""

    key: str
    line: int
    case: str
    model: str
    surface: str
    effective_surface: str
    effective_mode: str
    session_label: str
    repeat: int
    shown_tools: int | None
    overflowed: bool | None
    tool_digest: str
    facts: JsonText | None
    stimulus: str
    ended_by: str
    reason: str
    # The totals, in the order the builder adds them up.
    turn_count: int
    try_count: int
    call_count: int
    input_tokens: int
    output_tokens: int
    cache_created_tokens: int
    cache_read_tokens: int
    latency_ms: float
    last_turn_has_tool_call: bool | None
    failed_checks: int


# Totals per (run, model, surface, mode): how the attempts ended, one count per ending.
SummaryRow = msgspec.defstruct(
    "SummaryRow",
    [
        ("model", str),
        ("surface", str),
        ("mode", str),
        ("attempts", int),
        *((ending, int) for ending in ENDINGS),
        ("turns", int),
        ("tries", int),
        ("calls", int),
        ("latency_ms", float),
        ("input_tokens", int),
        ("output_tokens", int),
        ("cache_created_tokens", int),
        ("cache_read_tokens", int),
    ],
    array_like=True,
    module=__name__,
)


def columns(row: type[msgspec.Struct]) -> list[str]:
    return list(row.__struct_fields__)


def position(row: type[msgspec.Struct], name: str) -> int:
    return row.__struct_fields__.index(name)


TURN_COLUMNS = columns(TurnRow)
CALL_COLUMNS = columns(CallRow)
VERIFY_COLUMNS = columns(VerifyRow)
ATTEMPT_COLUMNS = columns(AttemptRow)
SUMMARY_COLUMNS = columns(SummaryRow)

# The additive C.8 contributions of a verdict (sums of them are a row's ratios and overhead),
# and the attempt's tokens it copies: every grouping of verdicts sums these columns.
ADDITIVE = (
    "discovery",
    "invalid_params",
    "steps",
    "reached_n",
    "reached_d",
    "aft_n",
    "aft_d",
    "fidelity_n",
    "fidelity_d",
    "confirmation_n",
    "confirmation_d",
)
# How a verdict's steps that needed a confirmation went, one count per way.
CONFIRMATIONS = (
    "declined_by_refusal",
    "declined_by_text",
    "confirmed_unaided",
    "confirmed_server_aided",
    "confirmed_never",
)
# Every count a verdict carries.
COUNTS = (*ADDITIVE, *CONFIRMATIONS)
TOKENS = ("input_tokens", "output_tokens", "cache_created_tokens", "cache_read_tokens")

# What a verdict that did not pass failed on, past its outcome (`records.scorer.score.
# failure_signature`): each part is a column `failure_<part>`, blank where the signature has
# none, beside `failure_mode`, the mode's id (`mode_id`; blank for a passed verdict).
FAILURE_PARTS = ("step", "tool", "action", "call_outcome", "argument", "check", "message")
FAILURE_COLUMNS = ("failure_mode", *(f"failure_{part}" for part in FAILURE_PARTS))

# A verdict row as the scorer's `score_chunk` builds it (its scoring's id goes first when it is stored); the
# verdict table takes its columns from this declaration.
VerdictRow = msgspec.defstruct(
    "VerdictRow",
    [
        ("attempt", int),
        ("row_key", str),
        ("case", str),
        ("model", str),
        ("surface", str),
        ("outcome", str),
        ("reason", str),
        ("clean", bool),
        ("unaided", bool),
        ("verified", bool),
        ("counted", bool),
        *((count, int) for count in COUNTS),
        *((column, str) for column in FAILURE_COLUMNS),
        ("session", int | None),
        ("tries", int),
        *((tokens, int) for tokens in TOKENS),
    ],
    array_like=True,
    module=__name__,
)
VERDICT_FIELDS = columns(VerdictRow)


# A conformance run's case line, as the conformance reader returns it and its table keeps it.
@dataclasses.dataclass
class CaseResult:
    line: int
    case: str
    rule: str
    passed: bool
    failures: list[str] = dataclasses.field(default_factory=list)


def killed_from_outside(exit_status: int) -> bool:
    """Whether an exit status is a signal's: -1 (or -N) as Go and Python report a process a
    signal ended, 128+N as a shell does (137 is SIGKILL, a CI job's timeout or the OOM killer)."""
    return exit_status < 0 or 128 < exit_status <= 128 + 64
