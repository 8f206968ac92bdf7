"""The strict model-evaluation shard reader (modelrecord.md section A).

Pure Python, no Django. It reads one shard line by line, in bounded memory, and validates each
line exactly as the upstream strict reader does: envelope (A.4), payload fields (A.5) and, once
the whole shard has been seen, the joins (A.6). Every error is a `ShardError` naming the file, the
line and the field.

Lines come in two representations: the run and session lines (a handful per shard) as dicts, and
the attempt, turn, call and verify lines (the bulk) as the typed payload structs below. A line
spelled exactly as upstream writes it is decoded straight into its struct by msgspec, which checks
every field's type on the way; any line msgspec refuses (another spelling, a null, a wrong type,
bad JSON), or that repeats a key msgspec would read unlike Go, is read again by the general
reader, which follows Go's rules and words the error.
Both end in the same checks, so the fast decoder only ever decides how fast a line is read.

One deliberate difference from upstream, documented in the README: a `completed` attempt that
carries a `reason` is accepted with a warning (the upstream runner writes the model's closing
prose there, G.3), because refusing real shards helps nobody.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Annotated, Any, Literal, Union

import msgspec
import orjson
import re2

from records.formats.text import (
    NUL_ESCAPE,
    NUL_MESSAGE,
    go_blank,
    go_fold,
    invalid_utf8,
    nul_field,
)

SCHEMA_VERSION = 1
MAX_LINE_BYTES = 1_048_576  # including the newline (A.3 maxShardLine)
MAX_RESULT_BYTES = 65_536
MAX_TEXT_BYTES = 65_536
LINE_TYPES = ("run", "session", "attempt", "turn", "call", "verify")
ENDINGS = (
    "completed",
    "over_budget",
    "malformed",
    "no_tool_call",
    "provider_error",
    "harness_error",
    "skipped",
)
TURN_STATUSES = ("ok", "rate_limited", "server_error", "request_error", "transport_error")
BLOCK_KINDS = ("text", "thinking", "tool_call")
CALL_OUTCOMES = ("ok", "tool_error", "protocol_error", "transport_error", "preview")
SURFACES = ("dynamic", "meta", "individual")
MODES = ("default", "read-only", "safe")  # a session's mode; none is the default
TIERS = ("free", "ce", "premium", "ultimate")  # a run's tier ("ce" reads as free)
# evaldash's own bound, not upstream's: identifiers are indexed, and a database index entry is
# bounded (PostgreSQL b-tree entries hold about 2,700 bytes). Real ids are under 200 characters.
MAX_ID_CHARS = 500
ID_FIELDS = {
    "run": ("run_id", "commit", "corpus_digest", "contract_digest", "tier"),
    "session": ("label", "surface", "mode"),
    "attempt": ("id", "case", "model", "surface", "session"),
    "turn": ("attempt",),
    "call": ("attempt",),
    "verify": ("attempt",),
}
_INT64 = 2**63
# evaldash's own bounds, not upstream's (README, "What the reader accepts"). No real run comes
# near them; they keep every value storable alike on SQLite and PostgreSQL, every sum over a run
# inside 64 bits and every cost finite. Each is checked, by line and field, where its line type
# is checked below.
INT32_MAX = 2**31 - 1  # integers kept in 32-bit columns: repeats, indexes, tries, tool counts
INT32_MIN = -(2**31)  # call.requests, the one such integer without a lower bound of its own
# One usage field (input, output, cache_created, cache_read) of one turn line. 2 GiB of turn
# lines (a whole archive) all at this bound sum to under 2**59 per field.
MAX_TOKENS = 2**32
# A price, dollars per million tokens, either sign (real ones are under 1,000): with MAX_TOKENS,
# a turn costs at most about $1.7 billion and any sum of costs stays finite.
MAX_PRICE_USD = 100_000.0
# A turn's latency_ms or a call's duration_ms, either sign (about 115 days).
MAX_MILLISECONDS = 1e10
_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
)


def is_shard_name(name: str) -> bool:
    """A shard is any file whose base name starts with `modeleval-` and ends with `.jsonl`."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return base.startswith("modeleval-") and base.endswith(".jsonl")


class ShardError(Exception):
    """A shard refused: where (file, line, field) and why, in words a user can act on."""

    def __init__(
        self, file: str, message: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f" line {self.line}"
        if self.field:
            where += f": {self.field}"
        return f"{where}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}

    @classmethod
    def unexpected(cls, file: str, exc: BaseException) -> ShardError:
        """A fault nobody foresaw while reading or storing one input, as that input's refusal."""
        what = str(exc).splitlines()[0][:200] if str(exc) else ""
        return cls(
            file,
            f"could not be read or stored: unexpected {type(exc).__name__}"
            + (f" ({what})" if what else "")
            + "; nothing of it was stored",
        )


class ShardFieldError(Exception):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message


# Field kinds. Each decoder takes (value, path, what the field holds so far) and returns the
# Python value or raises; `value` is never null (the struct decides what null means).
def _str(v: Any, path: str, old: Any = None) -> str:
    if isinstance(v, str):
        return v
    raise ShardFieldError(path, f"must be a string, not {_kind(v)}")


def _int(v: Any, path: str, old: Any = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float):
            raise ShardFieldError(path, f"must be a whole number, not {v!r}")
        raise ShardFieldError(path, f"must be a whole number, not {_kind(v)}")
    if not -_INT64 <= v < _INT64:
        raise ShardFieldError(path, f"{v} does not fit in a 64-bit integer")
    return v


def _float(v: Any, path: str, old: Any = None) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ShardFieldError(path, f"must be a number, not {_kind(v)}")
    return float(v)


def _bool(v: Any, path: str, old: Any = None) -> bool:
    if isinstance(v, bool):
        return v
    raise ShardFieldError(path, f"must be true or false, not {_kind(v)}")


def _raw(v: Any, path: str, old: Any = None) -> Any:
    return v


def _map(v: Any, path: str, old: Any = None) -> dict[str, str]:
    # Go decodes into the map it already holds, keeping its entries; null stores "".
    if not isinstance(v, dict):
        raise ShardFieldError(path, f"must be an object of strings, not {_kind(v)}")
    out: dict[str, str] = old if isinstance(old, dict) else {}
    for k, item in _members(v):
        if item is None:
            out[k] = ""
        elif isinstance(item, str):
            out[k] = item
        else:
            raise ShardFieldError(f"{path}.{k}", f"must be a string, not {_kind(item)}")
    return out


def _str_list(v: Any, path: str, old: Any = None) -> list[str]:
    # Go decodes each element into the one already at its place; null leaves that one.
    if not isinstance(v, list):
        raise ShardFieldError(path, f"must be a list of strings, not {_kind(v)}")
    had = old if isinstance(old, list) else []
    out = []
    for i, item in enumerate(v):
        if item is None:
            out.append(had[i] if i < len(had) else "")
        elif isinstance(item, str):
            out.append(item)
        else:
            raise ShardFieldError(f"{path}[{i}]", f"must be a string, not {_kind(item)}")
    return out


def _time(v: Any, path: str, old: Any = None) -> datetime | None:
    if not isinstance(v, str):
        raise ShardFieldError(path, f"must be an RFC 3339 timestamp string, not {_kind(v)}")
    m = _RFC3339.match(v)
    if not m:
        raise ShardFieldError(path, f"{v!r} is not an RFC 3339 timestamp")
    try:
        frac = (m.group(7) or ".0")[1:7].ljust(6, "0")
        tz = m.group(8)
        stamp = datetime.fromisoformat(
            f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}"
            f".{frac}{'+00:00' if tz in 'Zz' else tz}"
        )
    except ValueError:
        raise ShardFieldError(path, f"{v!r} is not a valid date and time") from None
    try:
        stamp = stamp.astimezone(UTC)
    except OverflowError:
        # Go's time reaches past year 9999 and before year 1; a stored date cannot.
        raise ShardFieldError(path, f"{v!r} falls outside years 1 to 9999 once in UTC") from None
    # Go's zero time is what an unset started_at serializes to: it means "no date".
    return None if stamp == _ZERO_TIME else stamp


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    return "an object"


Decoder = Callable[[Any, str], Any]

# The Python type of what each plain decoder returns.
_TYPES: dict[Decoder, Any] = {
    _str: str,
    _int: int,
    _bool: bool,
    _float: float,
    _time: datetime,
    _map: dict[str, str],
    _str_list: list[str],
}


class _Object(dict):  # type: ignore[type-arg]
    """A JSON object as the general reader decodes it: a dict (the last of equal keys wins, at
    the first one's place, as orjson has it) that also keeps every member in document order,
    duplicates included, for Go's reading of a struct."""

    __slots__ = ("members",)


def _members(v: dict[str, Any]) -> Any:
    return v.members if type(v) is _Object else v.items()


def _orjson_int(text: str) -> int | float:
    # orjson reads an integer beyond 64 bits as a float; the second parse must read it alike.
    n = int(text)
    return n if -_INT64 <= n < 2 * _INT64 else float(text)


def _object(members: list[tuple[str, Any]]) -> _Object:
    obj = _Object(members)
    obj.members = members
    return obj


def _with_members(raw: bytes, doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (orjson's reading of `raw`, which it accepted) again, every object keeping all its
    members: orjson, like a dict, keeps one value per key, and Go's decoder sees each."""
    try:
        return json.loads(raw, object_pairs_hook=_object, parse_int=_orjson_int)
    except RecursionError:  # nesting deep inside a raw value: duplicates there are kept by value
        return doc


class _Struct:
    """A Go struct as the strict decoder sees it: known fields, nothing else.

    A key names a field by its exact name, else by Go's case folding (`go_fold`). Every member
    assigns in document order, so the last of several spellings wins; null leaves a value in
    place, except where Go sets it to nil (`nil`: maps, lists, raw JSON, pointers); an object
    decodes into the struct or map the field already holds, a list into the elements already at
    their places, as Go's decoder does.
    """

    def __init__(self, fields: dict[str, Decoder], *, pointer: bool = False) -> None:
        self.fields = fields
        self.folded = {go_fold(name): name for name in fields}
        # Whether null sets this struct, as a field of another, to nil (a pointer in Go).
        self.pointer = pointer
        self.nil = {
            name
            for name, d in fields.items()
            if d in (_map, _str_list, _raw) or getattr(d, "pointer", False)
        }
        # name -> the Python type of a field read by a plain decoder (nested structs left out).
        self.types: dict[str, Any] = {n: _TYPES[d] for n, d in fields.items() if d in _TYPES}

    def __call__(self, obj: Any, path: str, into: Any = None) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise ShardFieldError(path, f"must be an object, not {_kind(obj)}")
        out: dict[str, Any] = into if isinstance(into, dict) else {}
        fields = self.fields
        for key, value in _members(obj):
            name = key if key in fields else self.folded.get(go_fold(key))
            if name is None:
                raise ShardFieldError(f"{path}.{key}", "unknown field (this reader is strict)")
            if value is None:
                if name in self.nil:
                    out.pop(name, None)
                continue
            out[name] = fields[name](value, f"{path}.{name}", out.get(name))
        return out


def _list_of(item: _Struct) -> Decoder:
    def decode(v: Any, path: str, old: Any = None) -> list[dict[str, Any]]:
        if not isinstance(v, list):
            raise ShardFieldError(path, f"must be a list, not {_kind(v)}")
        had = old if isinstance(old, list) else []
        out = []
        for i, x in enumerate(v):
            there = had[i] if i < len(had) else {}
            out.append(there if x is None else item(x, f"{path}[{i}]", there))
        return out

    decode.pointer = True  # type: ignore[attr-defined]  (a slice: null sets it to nil)
    return decode


_PRICE = _Struct(
    {
        "input_per_million_usd": _float,
        "output_per_million_usd": _float,
        "cache_write_per_million_usd": _float,
        "cache_read_per_million_usd": _float,
        "retrieved_on": _str,
    },
    pointer=True,
)
_PROVIDER = _Struct({"spec": _str, "name": _str, "model": _str, "options": _map, "price": _PRICE})
_USAGE = _Struct({"input": _int, "output": _int, "cache_created": _int, "cache_read": _int})
_BLOCK = _Struct(
    {"kind": _str, "text": _str, "tool": _str, "arguments": _raw, "raw": _str, "call_id": _str}
)

PAYLOADS: dict[str, _Struct] = {
    "run": _Struct(
        {
            "package": _str,
            "run_id": _str,
            "commit": _str,
            "started_at": _time,
            "edition": _str,
            "gitlab_version": _str,
            "tier": _str,
            "tier_confirmed": _bool,
            "filter": _str,
            "corpus_digest": _str,
            "contract_digest": _str,
            "providers": _list_of(_PROVIDER),
            "budget_usd": _float,
            "repeat": _int,
        }
    ),
    "session": _Struct(
        {
            "label": _str,
            "surface": _str,
            "mode": _str,
            "capabilities": _str,
            "meta_param_schema": _str,
            "tier_pin": _str,
            "slice_size": _int,
            "token_scopes": _str_list,
            "served_tools": _int,
            "tool_schema_digests": _map,
        }
    ),
    "attempt": _Struct(
        {
            "id": _str,
            "case": _str,
            "model": _str,
            "surface": _str,
            "session": _str,
            "repeat": _int,
            "shown_tools": _int,
            "overflowed": _bool,
            "tool_digest": _str,
            "facts": _map,
            "stimulus": _str,
            "ended_by": _str,
            "reason": _str,
        }
    ),
    "turn": _Struct(
        {
            "attempt": _str,
            "index": _int,
            "try": _int,
            "request_digest": _str,
            "blocks": _list_of(_BLOCK),
            "usage": _USAGE,
            "status": _str,
            "detail": _str,
            "latency_ms": _float,
        }
    ),
    "call": _Struct(
        {
            "attempt": _str,
            "turn": _int,
            "index": _int,
            "tool": _str,
            "arguments": _raw,
            "requested_action": _str,
            "dispatched_action": _str,
            "dispatched_tool": _str,
            "refusal_reason": _str,
            "outcome": _str,
            "result": _raw,
            "result_truncated": _bool,
            "text": _str,
            "text_truncated": _bool,
            "duration_ms": _float,
            "trace_id": _str,
            "requests": _int,
            "dispatch_observed": _bool,
        }
    ),
    "verify": _Struct({"attempt": _str, "name": _str, "passed": _bool, "detail": _str}),
}
_ENVELOPE_KEYS = {"schema": "schema", "type": "type", **{t: t for t in LINE_TYPES}}
_ENVELOPE_FOLDED = {go_fold(key): name for key, name in _ENVELOPE_KEYS.items()}


def _blank(p: dict[str, Any], name: str) -> bool:
    return go_blank(p.get(name, ""))


def _require(p: dict[str, Any], typ: str, *names: str) -> None:
    for name in names:
        if _blank(p, name):
            raise ShardFieldError(f"{typ}.{name}", "is required and is empty")


def _at_least(p: dict[str, Any], typ: str, name: str, low: int, *, present: bool = False) -> None:
    if present and name not in p:
        return
    value = p.get(name, 0)
    if value < low:
        raise ShardFieldError(f"{typ}.{name}", f"must be at least {low}, not {value}")


def _at_most(value: float, path: str, high: float, why: str) -> None:
    if value > high:
        raise ShardFieldError(path, f"must be at most {high:,.0f} ({why}), not {value:,}")


def _within(value: float, path: str, high: float, why: str) -> None:
    if not -high <= value <= high:
        raise ShardFieldError(
            path, f"must be between -{high:,.0f} and {high:,.0f} ({why}), not {value}"
        )


_IN_32_BITS = "evaldash keeps it in 32 bits"


def _check_run(p: dict[str, Any]) -> None:
    for name in ID_FIELDS["run"]:
        _short(p.get(name, ""), f"run.{name}")
    for i, provider in enumerate(p.get("providers", ())):
        _short(provider.get("spec", ""), f"run.providers[{i}].spec")
        for name, value in provider.get("price", {}).items():
            if name != "retrieved_on":
                _within(
                    value,
                    f"run.providers[{i}].price.{name}",
                    MAX_PRICE_USD,
                    "evaldash's bound on a price in dollars per million tokens",
                )
    _require(p, "run", "run_id")
    _at_least(p, "run", "repeat", 1)
    _at_most(p["repeat"], "run.repeat", INT32_MAX, _IN_32_BITS)


def _check_session(p: dict[str, Any]) -> None:
    for name in ID_FIELDS["session"]:
        _short(p.get(name, ""), f"session.{name}")
    _require(p, "session", "label")
    _at_least(p, "session", "served_tools", 0)
    _at_least(p, "session", "slice_size", 0, present=True)
    for name in ("served_tools", "slice_size"):
        _at_most(p.get(name, 0), f"session.{name}", INT32_MAX, _IN_32_BITS)


# --- the bulk line types as typed structs --------------------------------------------------------

_Int64 = Annotated[int, msgspec.Meta(ge=-_INT64, le=_INT64 - 1)]


class Usage(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    input: _Int64 = 0
    output: _Int64 = 0
    cache_created: _Int64 = 0
    cache_read: _Int64 = 0


_NO_USAGE = Usage()


class Block(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    kind: str = ""
    text: str = ""
    tool: str = ""
    arguments: Any = None
    raw: str = ""
    call_id: str = ""


class AttemptLine(msgspec.Struct, forbid_unknown_fields=True):
    id: str = ""
    case: str = ""
    model: str = ""
    surface: str = ""
    session: str = ""
    repeat: _Int64 = 0
    shown_tools: _Int64 | None = None
    overflowed: bool | None = None
    tool_digest: str = ""
    facts: dict[str, str] | None = None
    stimulus: str = ""
    ended_by: str = ""
    reason: str = ""


class TurnLine(msgspec.Struct, forbid_unknown_fields=True):
    attempt: str = ""
    index: _Int64 = 0
    try_: _Int64 = msgspec.field(default=0, name="try")
    request_digest: str = ""
    blocks: list[Block] = msgspec.field(default_factory=list)
    usage: Usage = _NO_USAGE
    status: str = ""
    detail: str = ""
    latency_ms: float | None = None


class CallLine(msgspec.Struct, forbid_unknown_fields=True):
    attempt: str = ""
    turn: _Int64 = 0
    index: _Int64 = 0
    tool: str = ""
    arguments: Any = None
    requested_action: str = ""
    dispatched_action: str = ""
    dispatched_tool: str = ""
    refusal_reason: str = ""
    outcome: str = ""
    result: Any = None
    result_truncated: bool = False
    text: str = ""
    text_truncated: bool = False
    duration_ms: float | None = None
    trace_id: str = ""
    requests: _Int64 | None = None
    dispatch_observed: bool = False


class VerifyLine(msgspec.Struct, forbid_unknown_fields=True):
    attempt: str = ""
    name: str = ""
    passed: bool = False
    detail: str = ""


STRUCTS: dict[str, type[msgspec.Struct]] = {
    "attempt": AttemptLine,
    "turn": TurnLine,
    "call": CallLine,
    "verify": VerifyLine,
}


def _envelope(typ: str, payload: type) -> type:
    """{"schema": 1, "type": typ, typ: {...}}, exactly: the line as upstream writes it."""
    return msgspec.defstruct(
        f"_{typ.title()}Line",
        [("schema", Literal[1]), (typ, payload)],
        tag=typ,
        tag_field="type",
        forbid_unknown_fields=True,
    )


_ENVELOPES = {_envelope(typ, struct): typ for typ, struct in STRUCTS.items()}
_FAST = msgspec.json.Decoder(Union[tuple(_ENVELOPES)])  # noqa: UP007 (a union built at run time)
# orjson refuses JSON nested deeper than this; msgspec would accept it, so lines that could be
# (long enough, and with that many brackets) are left to the general reader.
_MAX_DEPTH = 1024


def as_dict(payload: Any) -> dict[str, Any]:
    """A payload as a plain dict (field names as the shard spells them), whichever its form."""
    if isinstance(payload, msgspec.Struct):
        return msgspec.to_builtins(payload)
    return payload


# --- checks past the field types (one function per line type, identifier lengths first) ---------

_ENDINGS = frozenset(ENDINGS)
_SESSIONLESS = frozenset(("skipped", "harness_error"))
_TURN_STATUSES = frozenset(TURN_STATUSES)
_BLOCK_KINDS = frozenset(BLOCK_KINDS)
_CALL_OUTCOMES = frozenset(CALL_OUTCOMES)


def _short_ref(value: str, path: str) -> None:
    if len(value) > MAX_ID_CHARS:
        _short(value, path)
    if go_blank(value):
        raise ShardFieldError(path, "is required and is empty")


def _low(value: int, path: str, low: int) -> None:
    if value < low:
        raise ShardFieldError(path, f"must be at least {low}, not {value}")


def _positions(*fields: tuple[int, str]) -> None:
    """Refuse the first position (a turn, an index, a try: counted from 1, kept in 32 bits) that
    is below 1, else the first past 32 bits. Called only once the line's plain comparison has
    failed, so a good line pays for no call."""
    for value, path in fields:
        _low(value, path, 1)
    for value, path in fields:
        _at_most(value, path, INT32_MAX, _IN_32_BITS)


def _check_attempt(p: AttemptLine) -> None:
    ids = (p.id, p.case, p.model, p.surface, p.session)
    if max(map(len, ids)) > MAX_ID_CHARS:
        for name, value in zip(("id", "case", "model", "surface", "session"), ids, strict=True):
            _short(value, f"attempt.{name}")
    if go_blank(p.id) or go_blank(p.case) or go_blank(p.model):
        for name in ("id", "case", "model"):
            if go_blank(getattr(p, name)):
                raise ShardFieldError(f"attempt.{name}", "is required and is empty")
    ended_by = p.ended_by
    if ended_by not in _ENDINGS:
        raise ShardFieldError(
            "attempt.ended_by", f"{ended_by!r} is not one of {', '.join(ENDINGS)}"
        )
    if ended_by not in _SESSIONLESS and go_blank(p.session):
        raise ShardFieldError("attempt.session", "is required and is empty")
    _low(p.repeat, "attempt.repeat", 1)
    if p.repeat > INT32_MAX:
        _at_most(p.repeat, "attempt.repeat", INT32_MAX, _IN_32_BITS)
    if p.shown_tools is not None:
        _low(p.shown_tools, "attempt.shown_tools", 0)
        _at_most(p.shown_tools, "attempt.shown_tools", INT32_MAX, _IN_32_BITS)
    if ended_by == "skipped" and go_blank(p.reason):
        raise ShardFieldError("attempt.reason", "a skipped attempt must say why it was skipped")


def _check_turn(p: TurnLine) -> None:
    _short_ref(p.attempt, "turn.attempt")
    if not (1 <= p.index <= INT32_MAX and 1 <= p.try_ <= INT32_MAX):
        _positions((p.index, "turn.index"), (p.try_, "turn.try"))
    latency = p.latency_ms
    if latency is not None and abs(latency) > MAX_MILLISECONDS:
        _within(latency, "turn.latency_ms", MAX_MILLISECONDS, _MS_WHY)
    if p.status not in _TURN_STATUSES:
        raise ShardFieldError(
            "turn.status", f"{p.status!r} is not one of {', '.join(TURN_STATUSES)}"
        )
    for i, block in enumerate(p.blocks):
        if block.kind not in _BLOCK_KINDS:
            raise ShardFieldError(
                f"turn.blocks[{i}].kind",
                f"block {i + 1} has kind {block.kind!r}, not one of {', '.join(BLOCK_KINDS)}",
            )
    u = p.usage
    if u.input < 0 or u.output < 0 or u.cache_created < 0 or u.cache_read < 0:
        for name in ("input", "output", "cache_created", "cache_read"):
            _low(getattr(u, name), f"turn.usage.{name}", 0)
    if max(u.input, u.output, u.cache_created, u.cache_read) > MAX_TOKENS:
        for name in ("input", "output", "cache_created", "cache_read"):
            _at_most(getattr(u, name), f"turn.usage.{name}", MAX_TOKENS, _TOKENS_WHY)


_MS_WHY = "evaldash's bound on a time in milliseconds"
_TOKENS_WHY = "evaldash's bound on one turn's token count, which keeps a run's sums in 64 bits"


def _check_call(p: CallLine) -> None:
    _short_ref(p.attempt, "call.attempt")
    if go_blank(p.tool):
        raise ShardFieldError("call.tool", "is required and is empty")
    # The call's index is Go's int (64 bits) upstream, and so a 64-bit column here: any index
    # Go reads is stored (upstream's reader vector 077, 2**63 - 1). Its turn stays in 32 bits.
    if not (1 <= p.turn <= INT32_MAX and p.index >= 1):
        _positions((p.turn, "call.turn"))
        _low(p.index, "call.index", 1)
    requests = p.requests
    if requests is not None and not INT32_MIN <= requests <= INT32_MAX:
        raise ShardFieldError(
            "call.requests",
            f"must be between {INT32_MIN:,} and {INT32_MAX:,} ({_IN_32_BITS}), not {requests:,}",
        )
    duration = p.duration_ms
    if duration is not None and abs(duration) > MAX_MILLISECONDS:
        _within(duration, "call.duration_ms", MAX_MILLISECONDS, _MS_WHY)
    outcome = p.outcome
    if outcome in _CALL_OUTCOMES:
        return
    if outcome.startswith("refused:"):
        if go_blank(outcome[len("refused:") :]):
            raise ShardFieldError("call.outcome", "a refused outcome must name its reason")
    else:
        raise ShardFieldError(
            "call.outcome",
            f"{outcome!r} is not one of {', '.join(CALL_OUTCOMES)} or refused:<reason>",
        )


def _check_verify(p: VerifyLine) -> None:
    _short_ref(p.attempt, "verify.attempt")
    if go_blank(p.name):
        raise ShardFieldError("verify.name", "is required and is empty")
    if not p.passed and go_blank(p.detail):
        raise ShardFieldError("verify.detail", "a failed check must say what did not hold")


_CHECKS: dict[str, Callable[[Any], None]] = {
    "run": _check_run,
    "session": _check_session,
    "attempt": _check_attempt,
    "turn": _check_turn,
    "call": _check_call,
    "verify": _check_verify,
}


# msgspec keeps the last of repeated keys, as Go does for a value, but where Go decodes into what a
# field already holds (an object into its struct or map, a list into its elements) or leaves it
# for null (a number or flag msgspec reads as optional), the last is not the whole answer: a line
# repeating such a key, or spelling a key with an escape (which could repeat one unseen), is left
# to the general reader. A quoted name inside a string value is escaped, so counting the quoted
# name finds every key that spells it (and at worst a value that is the bare name).
_MERGED = {
    "attempt": (b'"facts"', b'"shown_tools"', b'"overflowed"'),
    "turn": (b'"usage"', b'"blocks"', b'"latency_ms"'),
    "call": (b'"duration_ms"', b'"requests"'),
    "verify": (),
}
# The payload's key, and the type's value that spells it too ("type":"turn", "turn":{...}).
_PAYLOAD_KEY = {
    typ: (f'"{typ}"'.encode(), f'"type":"{typ}"'.encode(), names) for typ, names in _MERGED.items()
}
# A key holding a \u escape: its last escape, then anything but an unescaped quote, then a quote
# and a colon (a string value's closing quote is never followed by a colon). Matched by RE2, in
# time linear in the line whatever it holds: a backtracking engine rescans the rest of a string
# from every escape it meets (`\\u0041` repeated), quadratic in the escapes. Byte by byte
# (Latin-1), JSON's whitespace spelled out as Python's `\s` reads it.
_BYTES = re2.Options()
_BYTES.encoding = re2.Options.Encoding.LATIN1
_ESCAPED_KEY = re2.compile(rb'\\u[0-9a-fA-F]{4}(?:[^"\\]|\\[^u])*"[ \t\n\r\f\v]*:', _BYTES)


def _repeats(raw: bytes, typ: str, escaped: bool) -> bool:
    """Whether the line may repeat a key whose repetition msgspec would read unlike Go."""
    key, tag, names = _PAYLOAD_KEY[typ]
    count = raw.count
    if count(key) > 1 + count(tag):
        return True
    for name in names:
        if count(name) > 1:
            return True
    return escaped and _ESCAPED_KEY.search(raw) is not None


def parse_line(raw: bytes, escaped: bool | None = None) -> tuple[str, Any]:
    """Decode and validate one non-blank shard line: (type, payload). Raises `ShardFieldError`.

    The payload is a dict for run and session lines and a struct for the others (see above).
    `escaped`: whether the line holds a `\\u` escape, where the caller has looked already.
    """
    if escaped is None:
        escaped = b"\\u" in raw
    if len(raw) <= 2 * _MAX_DEPTH or raw.count(b"[") + raw.count(b"{") <= _MAX_DEPTH:
        try:
            line = _FAST.decode(raw)
        except msgspec.MsgspecError:
            pass  # not spelled exactly as upstream writes it: the general reader decides
        else:
            typ = _ENVELOPES[type(line)]
            if not _repeats(raw, typ, escaped):
                payload = getattr(line, typ)
                _CHECKS[typ](payload)
                return typ, payload
    typ, payload = _parse_general(raw)
    struct = STRUCTS.get(typ)
    if struct is not None:
        payload = msgspec.convert(payload, struct)
    _CHECKS[typ](payload)
    return typ, payload


def not_json_message(raw: bytes, exc: orjson.JSONDecodeError, width: int = 30) -> str:
    """A line's JSON error by column (a shard line is one line, so "line 1" would only
    mislead), with a short excerpt of the line around where reading stopped."""
    text = raw.decode("utf-8", "replace")
    pos = min(max(exc.pos, 0), len(text))
    before, after = text[max(0, pos - width) : pos], text[pos : pos + width]
    shown = (
        ("…" if pos > width else "")
        + _printable(before)
        + "⟨here⟩"
        + _printable(after)
        + ("…" if pos + width < len(text) else "")
    )
    return f"the line is not valid JSON at column {pos + 1}: {exc.msg}; near {shown}"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _parse_general(raw: bytes) -> tuple[str, dict[str, Any]]:
    """Go's reading of a line: each key names a field by its exact name or by Go's case folding,
    every member assigns in order (the last spelling wins), null leaves a value in place."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "unexpected content after document" in str(exc):
            raise ShardFieldError("", "more than one JSON value on the line") from None
        bad = invalid_utf8(raw)
        if bad:
            raise ShardFieldError("", f"the line is not valid JSON: {bad}") from None
        raise ShardFieldError("", not_json_message(raw, exc)) from None
    if type(doc) is not dict:
        raise ShardFieldError("", f"a shard line must be a JSON object, not {_kind(doc)}")
    schema: Any = 0
    typ: Any = ""
    payloads: dict[str, Any] = {}
    for key, value in _members(_with_members(raw, doc)):
        name = _ENVELOPE_KEYS.get(key) or _ENVELOPE_FOLDED.get(go_fold(key))
        if name is None:
            raise ShardFieldError(key, "unknown field (this reader is strict)")
        if name == "schema":
            if value is not None:
                schema = _int(value, "schema")
        elif name == "type":
            if value is not None:
                typ = _str(value, "type")
        elif value is None:  # a payload is a pointer: null sets it to nil
            payloads.pop(name, None)
        else:  # a payload seen before is decoded into, as Go decodes into what a pointer holds
            payloads[name] = PAYLOADS[name](value, name, payloads.get(name))
    if schema != SCHEMA_VERSION:
        raise ShardFieldError(
            "schema",
            f"schema {schema} is not {SCHEMA_VERSION}: the shard was written by another "
            "version of this package",
        )
    if typ not in PAYLOADS:
        raise ShardFieldError("type", f"unknown line type {typ!r}")
    if typ not in payloads:
        raise ShardFieldError(typ, f"line type {typ} carries no payload")
    if len(payloads) != 1:
        raise ShardFieldError(
            ", ".join(payloads),
            f"line type {typ} carries {len(payloads)} payloads, want exactly one",
        )
    return typ, payloads[typ]


def _short(value: str, path: str) -> None:
    if len(value) > MAX_ID_CHARS:
        raise ShardFieldError(
            path,
            f"is {len(value):,} characters long; evaldash keeps identifiers of at most "
            f"{MAX_ID_CHARS} characters",
        )


def iter_lines(stream: IO[bytes], name: str) -> Iterator[tuple[int, str, Any, int]]:
    """Yield (line number, type, payload, byte length) for every non-blank line, in file order.

    Memory is bounded by the line cap: a line is never read past 1 MiB.
    """
    lineno = 0
    readline = stream.readline
    while True:
        raw = readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        lineno += 1
        size = len(raw)
        if size > MAX_LINE_BYTES or (size == MAX_LINE_BYTES and not raw.endswith(b"\n")):
            raise ShardError(
                name,
                f"the line is longer than the shard line cap of {MAX_LINE_BYTES:,} bytes",
                line=lineno,
            )
        stripped = raw.strip()
        if not stripped:
            continue
        escaped = b"\\u" in stripped  # one look for both: no escape, no escaped NUL
        try:
            typ, payload = parse_line(stripped, escaped)
        except ShardFieldError as exc:
            raise ShardError(name, exc.message, line=lineno, field=exc.field or None) from None
        if escaped and NUL_ESCAPE in stripped:
            where = nul_field(payload, typ)
            if where:
                raise ShardError(name, NUL_MESSAGE, line=lineno, field=where)
        yield lineno, typ, payload, size


@dataclass
class Joins:
    """The A.6 join rules, checked in one streaming pass plus a final check.

    Sessions and the run line usually come last, so references are remembered (with the first
    line that made them) and settled in `finish()`.
    """

    name: str
    run: dict[str, Any] | None = None
    run_line: int = 0
    sessions: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    attempts: set[str] = field(default_factory=set)
    attempt_refs: dict[str, tuple[int, str]] = field(default_factory=dict)
    session_refs: dict[str, tuple[int, str]] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LINE_TYPES, 0))

    def see(self, lineno: int, typ: str, p: Any) -> None:
        self.counts[typ] += 1
        if typ == "attempt":
            key = p.id
            if key in self.attempts:
                raise ShardError(
                    self.name,
                    f"two attempt lines carry the id {key!r}; attempt ids must be unique",
                    line=lineno,
                    field="attempt.id",
                )
            self.attempts.add(key)
            label = p.session
            if label and label not in self.session_refs:
                self.session_refs[label] = (lineno, key)
            if p.ended_by == "completed" and not go_blank(p.reason):
                self.warnings.append(
                    {
                        "line": lineno,
                        "field": "attempt.reason",
                        "message": f"attempt {key!r} is completed but carries a reason; "
                        "upstream's runner writes the model's closing prose there and "
                        "upstream's reader refuses such a line. Kept, with its reason.",
                    }
                )
        elif typ == "run":
            if self.run is not None and self.run["run_id"] != p["run_id"]:
                raise ShardError(
                    self.name,
                    f"a second run line carries run_id {p['run_id']!r} but line "
                    f"{self.run_line} carries {self.run['run_id']!r}; a shard holds one run",
                    line=lineno,
                    field="run.run_id",
                )
            self.run, self.run_line = p, lineno  # the last run line wins
        elif typ == "session":
            self.sessions[p["label"]] = (lineno, p)  # a later label replaces an earlier one
        else:
            key = p.attempt
            if key not in self.attempt_refs:
                self.attempt_refs[key] = (lineno, typ)

    def finish(self) -> None:
        if self.run is None:
            raise ShardError(
                self.name,
                "the shard carries no run line, so the tier its attempts ran at is unknown",
                field="run",
            )
        # A name no line of the shard carries: the first such reference is refused.
        for refs, known, message, at in (
            (
                self.attempt_refs,
                self.attempts,
                "names attempt {name!r}, which no attempt line of this shard carries "
                "(is the shard truncated?)",
                "{by}.attempt",
            ),
            (
                self.session_refs,
                self.sessions,
                "attempt {by!r} names session {name!r}, which no session line of this "
                "shard carries",
                "attempt.session",
            ),
        ):
            dangling = _first_unknown(refs, known)
            if dangling:
                ln, name, by = dangling
                raise ShardError(
                    self.name, message.format(name=name, by=by), line=ln, field=at.format(by=by)
                )


def _first_unknown(refs: dict[str, tuple[int, str]], known: Any) -> tuple[int, str, str] | None:
    """The earliest reference (its line, the name it names, what named it) to a name `known`
    lacks, or None."""
    return min(
        ((ln, name, by) for name, (ln, by) in refs.items() if name not in known), default=None
    )


@dataclass
class AttemptRecord:
    line: int
    attempt: dict[str, Any]
    turns: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    calls: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    verifies: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Shard:
    """A whole shard in memory, joined: for tests and small inputs (ingest streams instead)."""

    name: str
    run: dict[str, Any]
    sessions: dict[str, dict[str, Any]]
    attempts: list[AttemptRecord]
    warnings: list[dict[str, Any]]

    def session_of(self, rec: AttemptRecord) -> dict[str, Any] | None:
        return self.sessions.get(rec.attempt.get("session", ""))


def read_shard(stream: IO[bytes], name: str) -> Shard:
    joins = Joins(name)
    attempts: dict[str, AttemptRecord] = {}
    children: list[tuple[str, int, dict[str, Any]]] = []
    for lineno, typ, p, _ in iter_lines(stream, name):
        joins.see(lineno, typ, p)
        if typ == "attempt":
            attempts[p.id] = AttemptRecord(lineno, as_dict(p))
        elif typ in ("turn", "call", "verify"):
            children.append((typ, lineno, as_dict(p)))
    joins.finish()
    for typ, lineno, p in children:  # attached in file order once every attempt is known
        rec = attempts[p["attempt"]]
        {"turn": rec.turns, "call": rec.calls, "verify": rec.verifies}[typ].append((lineno, p))
    assert joins.run is not None
    return Shard(
        name=name,
        run=joins.run,
        sessions={label: p for label, (_, p) in joins.sessions.items()},
        attempts=list(attempts.values()),
        warnings=joins.warnings,
    )


def read_shard_bytes(data: bytes | Iterable[bytes], name: str) -> Shard:

    if not isinstance(data, bytes):
        data = b"".join(data)
    return read_shard(io.BytesIO(data), name)
