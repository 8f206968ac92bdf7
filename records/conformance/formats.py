"""Adapter conformance runs (`taisce-conformance/v1`, conformance.md). Pure Python, no Django.

Reads the suite file as the upstream loader does (strict, prefix, at least one case), reads a
run's stdout (case lines then one summary line) and checks it against itself, the suite and the
exit status, and groups failure texts by the judge's templates (section 6).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from records.formats.rows import CaseResult, killed_from_outside
from records.formats.text import (
    NUL_ESCAPE,
    NUL_MESSAGE,
    go_field,
    go_fold,
    go_json_string,
    invalid_utf8,
    nul_field,
)
from records.scorer.score import go_quote

SUITE = "taisce-conformance/v1"
PREFIX = "taisce-memory/v1 untrusted"


class ConformanceError(Exception):
    def __init__(
        self, file: str, message: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.file, self.message, self.line, self.field = file, message, line, field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file + (f" line {self.line}" if self.line else "")
        return f"{where}: {self.field + ': ' if self.field else ''}{self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}


# --- the suite file -----------------------------------------------------------------------------

S, INT, B = "string", "integer", "boolean"
# A value Go holds behind a pointer (`*int`, `*ContextAnswer`): null sets it back to nil. Any
# other value ignores a null and keeps what it held (protocol.go's types).
PTR = "pointer"
_GO_KINDS = {"string": S, "int": INT, "bool": B}


def _go_fields(declared: str) -> dict[str, Any]:
    """Fields written as protocol.go declares them (`name *int, other []string`): each name's
    schema, a `*T` as a pointer and a `[]T` as a list of T."""
    fields: dict[str, Any] = {}
    for declaration in declared.split(","):
        name, kind = declaration.split()
        if kind.startswith("[]"):
            fields[name] = [_GO_KINDS[kind[2:]]]
        elif kind.startswith("*"):
            fields[name] = (PTR, _GO_KINDS[kind[1:]])
        else:
            fields[name] = _GO_KINDS[kind]
    return fields


_MESSAGE = {"role": S, "content": S, "untrusted": B}  # protocol.go Message, everywhere it is used
_SCHEMA: dict[str, Any] = {
    "suite": S,
    "memory_message_prefix": S,
    "cases": [
        {
            "name": S,
            "rule": S,
            "seed": [{"subject": S, "predicate": S, "object": S, "statement": S}],
            "faults": {"recall": S, "observe": S, "context": S},
            "context": (
                PTR,
                {
                    "watermark": {"stored": (PTR, INT), "formed": (PTR, INT), "parked": INT},
                    "segments": [
                        {
                            "segment_id": S,
                            "level": INT,
                            "from_offset": INT,
                            "to_offset": INT,
                            "covered": INT,
                            "summary": S,
                        }
                    ],
                    "turns": [{"log_offset": INT, "occurred_at": S, "messages": [_MESSAGE]}],
                    "characters": INT,
                    "truncated": B,
                },
            ),
            "turn": {
                "history": [_MESSAGE],
                "user": S,
                "tool_calls": [{"call": S, "result": S}],
                "synthetic": [_MESSAGE],
                "assistant": S,
                "model_failure": B,
                "compact": B,
                "repeat": INT,
                "repeat_after_ms": INT,
            },
            "expect": _go_fields(
                "memory_messages *int, memory_role string, memory_untrusted *bool,"
                " memory_carries []string, model_carries []string, model_lacks []string,"
                " fatal *bool, store_error *bool, observed *bool, observed_groups []int,"
                " observed_roles []string, observed_contents []string, observe_calls *int,"
                " observe_keys_equal *bool, stored *int"
            ),
        }
    ],
}


def _decoded(value: Any, schema: Any, path: str, file: str, held: Any = None) -> Any:
    """`value` decoded by Go's rules into what a field of the suite's types already `held`: a
    null sets a pointer or a list to nil and leaves anything else as it was, an object fills
    the struct it lands in (a field named twice keeps what the first gave and the second did not
    overwrite), a list decodes its items into the items already there, field names match by Go's
    folding, an unknown field or a value of another type is refused by name. The result spells
    every name as the type does; None stands for nil, a missing key for a value never set."""
    pointer = isinstance(schema, tuple)
    if pointer:
        schema = schema[1]
    if value is None:
        return None if pointer or isinstance(schema, list) else held
    if isinstance(schema, dict):
        if not isinstance(value, Members):
            raise ConformanceError(file, "must be an object", field=path)
        out: dict[str, Any] = dict(held) if isinstance(held, dict) else {}
        for key, item in value:
            name = go_field(key, schema)
            if name is None:
                raise ConformanceError(file, "unknown field", field=f"{path}.{key}".lstrip("."))
            got = _decoded(item, schema[name], f"{path}.{name}".lstrip("."), file, out.get(name))
            if got is not None or isinstance(schema[name], tuple | list):
                out[name] = got
        return out
    if isinstance(schema, list):
        if not isinstance(value, list) or isinstance(value, Members):
            raise ConformanceError(file, "must be a list", field=path)
        before = held if isinstance(held, list) else []
        return [
            _decoded(item, schema[0], f"{path}[{i}]", file, before[i] if i < len(before) else None)
            for i, item in enumerate(value)
        ]
    if schema == S and not isinstance(value, str):
        raise ConformanceError(file, "must be a string", field=path)
    if schema == INT and (
        isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63
    ):
        raise ConformanceError(file, "must be a whole number that fits 64 bits", field=path)
    if schema == B and not isinstance(value, bool):
        raise ConformanceError(file, "must be true or false", field=path)
    return value


class Members(list):
    """A JSON object's members in order, a name given twice kept twice (Go decodes both)."""


_RAW_BAD_BYTE = re.compile("[\udc80-\udcff]")


def _first_value(data: bytes, file: str) -> Any:
    """The first JSON value of `data`, as Go's json.Decoder.Decode reads it: what follows the
    value is left unread, whatever it holds (more values, text, bytes that are not UTF-8)."""
    text = data.decode("utf-8", "surrogateescape")

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        start = len(text) - len(text.lstrip(" \t\r\n"))
        decoder = json.JSONDecoder(parse_constant=no_constant, object_pairs_hook=Members)
        doc, end = decoder.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        bad = _RAW_BAD_BYTE.search(text, 0, exc.pos + 1)
        why = _bad_byte(text, bad) if bad else exc
        raise ConformanceError(file, f"is not valid JSON: {why}") from None
    except ValueError as exc:
        raise ConformanceError(file, f"is not valid JSON: {exc}") from None
    if bad := _RAW_BAD_BYTE.search(text, 0, end):
        raise ConformanceError(file, f"is not valid JSON: {_bad_byte(text, bad)}")
    return doc


def _bad_byte(text: str, bad: re.Match[str]) -> str:
    at = len(text[: bad.start()].encode("utf-8", "surrogateescape"))
    return f"invalid UTF-8 at byte {at + 1:,}"


def lone_surrogate_field(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) in `value` holding a lone surrogate (an
    escape such as `\\ud800` with no partner), which is no text."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            if not _is_text(v):
                return where
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                sub = f"{where}.{k}" if where else str(k)
                if not _is_text(str(k)):
                    return sub
                stack.append((sub, item))
        elif isinstance(v, list):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(v))))
    return None


def _is_text(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


LONE_SURROGATE_MESSAGE = (
    "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is no text"
)


def is_suite(doc: Any) -> bool:
    """Whether a decoded document is a suite file: an object with a key Go's decoder reads as
    `memory_message_prefix` (Go's folding, so `Memory_Message_Prefix` counts)."""
    members = doc if isinstance(doc, Members) else doc.items() if isinstance(doc, dict) else None
    return members is not None and any(go_fold(k) == "MEMORY_MESSAGE_PREFIX" for k, _ in members)


def starts_with_a_suite(data: bytes) -> bool:
    """Whether the first JSON value of `data` is a suite, whatever follows it: Load reads that
    value alone, so a document a whole-file reader refuses may still be a suite."""
    try:
        return is_suite(_first_value(data, ""))
    except ConformanceError:
        return False


@dataclass
class Suite:
    suite: str
    cases: list[dict[str, Any]]
    document: dict[str, Any] = field(default_factory=dict)  # as decoded, names spelled once

    def case(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.cases if c.get("name") == name), None)

    @property
    def names(self) -> list[str]:
        return [c.get("name", "") for c in self.cases]


def read_suite(data: bytes, file: str) -> Suite:
    """A suite file, accepted exactly where upstream's Load accepts it (taisce's runner.go):
    the first JSON value decoded strictly into the suite's types, the runner's memory message
    prefix, and at least one case. A case may leave out its turn or expect (zero values), and
    names may repeat or be empty: Load allows both, and `ambiguities` says so."""
    members = _first_value(data, file)
    if not isinstance(members, Members):
        raise ConformanceError(file, "a suite file is a JSON object")
    doc = _decoded(members, _SCHEMA, "", file)
    if NUL_ESCAPE in data and (where := nul_field(doc)):
        raise ConformanceError(file, NUL_MESSAGE, field=where)
    if where := lone_surrogate_field(doc):
        raise ConformanceError(file, LONE_SURROGATE_MESSAGE, field=where)
    if doc.get("memory_message_prefix") != PREFIX:
        raise ConformanceError(file, f"must be {PREFIX!r}", field="memory_message_prefix")
    if not doc.get("cases"):
        raise ConformanceError(file, "the suite holds no case", field="cases")
    # A case left null or without a name holds Go's zero values; spelling them keeps every
    # reader of the stored document off a missing key.
    doc["cases"] = [{"name": "", "rule": "", **(c or {})} for c in doc["cases"]]
    return Suite(doc.get("suite") or "", doc["cases"], doc)


def ambiguities(cases: list[dict[str, Any]]) -> list[str]:
    """What upstream's Load accepts but a reader of results cannot tell apart."""
    notes = []
    positions: dict[str, list[int]] = {}
    for i, c in enumerate(cases, 1):
        name = c.get("name") or ""
        if not name:
            notes.append(f"case {i} has no name")
        else:
            positions.setdefault(name, []).append(i)
    for name, at in positions.items():
        if len(at) > 1:
            notes.append(
                f"cases {', '.join(map(str, at))} share the name {name!r}: results are told "
                "apart by their position only"
            )
    return notes


# --- a run's output -----------------------------------------------------------------------------


@dataclass
class RunOutput:
    aborted: bool
    results: list[CaseResult]
    suite: str = ""
    cases: int = 0
    failed: int = 0
    killed: bool = False  # aborted from outside (a signal), not by the runner


def runner_case_line(result: CaseResult) -> bytes:
    """A case line byte for byte as `taisce conformance` prints it (json.Encoder.Encode of
    runner.go's Result: case, rule, passed, failures left out when empty, then a newline)."""
    line = f'{{"case":{go_json_string(result.case)},"rule":{go_json_string(result.rule)},"passed":'
    line += "true" if result.passed else "false"
    if result.failures:
        line += ',"failures":[' + ",".join(go_json_string(f) for f in result.failures) + "]"
    return (line + "}\n").encode()


def runner_summary_line(suite: str, cases: int, failed: int) -> bytes:
    return f'{{"suite":{go_json_string(suite)},"cases":{cases},"failed":{failed}}}\n'.encode()


def _why_not_the_runners(raw: bytes, keys: tuple[str, ...], failures: Any) -> str:
    """What about a line that decodes to the runner's values still differs from its bytes."""
    if raw != raw.strip(b" \t\r\f\v"):
        return "white space around the line, which the runner never writes"
    try:
        members = json.loads(raw, object_pairs_hook=Members)
    except ValueError:
        members = Members()
    names = [k for k, _ in members]
    if twice := next((k for k in names if names.count(k) > 1), None):
        return f"the key {twice!r} appears twice, which the runner never writes"
    if "failures" in names and not failures:
        return (
            f"failures is {'null' if failures is None else '[]'}, which the runner leaves out "
            "when a case has none"
        )
    if names != [k for k in keys if k in names]:
        return f"the keys are out of the order the runner writes ({', '.join(keys)})"
    if re.search(rb"\s", _STRING.sub(b'""', raw)):
        return "white space between the values, which the runner's compact JSON never holds"
    return (
        "a string is spelled otherwise than Go's encoder spells it (it writes <, > and & as "
        "\\u003c, \\u003e and \\u0026, and every other printable character as itself, never "
        "escaped)"
    )


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def _as_the_runner_prints(
    raw: bytes, expected: bytes, n: int, file: str, keys: tuple[str, ...], failures: Any
) -> None:
    """Refuse a line unless it is, byte for byte, the line the runner prints for its values."""
    if raw + b"\n" != expected:
        why = _why_not_the_runners(raw, keys, failures)
        printed = expected.decode().rstrip("\n")
        raise ConformanceError(file, f"{why}; the runner would have printed {printed}", line=n)


_CASE_KEYS = ("case", "rule", "passed", "failures")
_SUMMARY_KEYS = ("suite", "cases", "failed")


def read_output(data: bytes, file: str, *, exit_status: int, suite: Suite | None) -> RunOutput:
    """A run's stdout, accepted only as `taisce conformance` can print it (cmd/taisce's
    conformance.go): nothing at all when a run is aborted, else one line per case and a summary
    line, each exactly as Go's json.Encoder writes it and ended by a newline, each failure one
    of the judge's texts. The one tolerance: every line ended by CRLF instead, as tools that
    rewrite line ends (a Windows shell's redirection, git's autocrlf) leave it; the text is
    otherwise unchanged."""
    if not data:
        if exit_status == 0:
            raise ConformanceError(
                file,
                "the output is empty but the exit status is 0: a run "
                "that completes prints one line per case and a summary",
            )
        return RunOutput(aborted=True, results=[], killed=killed_from_outside(exit_status))
    if not data.strip():
        raise ConformanceError(
            file,
            f"the output is {len(data):,} byte(s) of white space: the runner prints nothing at "
            "all when a run is aborted, and a line per case and a summary when it completes",
            line=1,
        )
    if exit_status not in (0, 1):
        raise ConformanceError(
            file,
            f"exit status {exit_status} with output: the runner exits 0 when every case passed "
            "and 1 otherwise",
            field="exit_status",
        )
    crlf = data.endswith(b"\r\n") and data.count(b"\n") == data.count(b"\r\n")
    text = data.replace(b"\r\n", b"\n") if crlf else data
    lines = text.split(b"\n")
    ends_with_newline = lines[-1] == b""
    if ends_with_newline:
        lines.pop()
    results: list[CaseResult] = []
    summary: dict[str, Any] | None = None
    summary_line = 0
    seen: dict[str, int] = {}
    for n, raw in enumerate(lines, 1):
        if summary is not None:
            raise ConformanceError(
                file, "a line follows the summary line; the summary is last", line=n
            )
        if not raw.strip():
            raise ConformanceError(
                file, "a blank line, which the runner never prints between its lines", line=n
            )
        if raw.endswith(b"\r"):
            raise ConformanceError(
                file,
                "the line ends with CRLF and others with a bare newline: the runner ends every "
                "line with a newline (output whose every line ends with CRLF is read as such)",
                line=n,
            )
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            why = invalid_utf8(raw) or exc
            raise ConformanceError(file, f"is not valid JSON: {why}", line=n) from None
        if NUL_ESCAPE in raw and (where := nul_field(doc)):
            raise ConformanceError(file, NUL_MESSAGE, line=n, field=where)
        if not isinstance(doc, dict):
            raise ConformanceError(file, "each line is a JSON object", line=n)
        if "suite" in doc:
            for key in doc:
                if key not in _SUMMARY_KEYS:
                    raise ConformanceError(
                        file, "unknown field in the summary line", line=n, field=key
                    )
            _decoded(Members(doc.items()), {"suite": S, "cases": INT, "failed": INT}, "", file)
            for key in _SUMMARY_KEYS:
                if key not in doc:
                    raise ConformanceError(file, "missing from the summary line", line=n, field=key)
            summary, summary_line = doc, n
            expected = runner_summary_line(doc["suite"], doc["cases"], doc["failed"])
            _as_the_runner_prints(raw, expected, n, file, _SUMMARY_KEYS, None)
            continue
        for key in doc:
            if key not in _CASE_KEYS:
                raise ConformanceError(file, "unknown field in a case line", line=n, field=key)
        for key, kind in (("case", str), ("rule", str), ("passed", bool)):
            if not isinstance(doc.get(key), kind):
                raise ConformanceError(file, f"missing or not a {kind.__name__}", line=n, field=key)
        failures = doc.get("failures") or []
        if not isinstance(failures, list) or not all(isinstance(f, str) for f in failures):
            raise ConformanceError(file, "must be a list of strings", line=n, field="failures")
        if doc["passed"] != (not failures):
            raise ConformanceError(
                file,
                "passed is true exactly when failures is empty, and this line says "
                f"passed={str(doc['passed']).lower()} with {len(failures)} failure(s)",
                line=n,
                field="passed",
            )
        for i, failure in enumerate(failures):
            if not failure:
                raise ConformanceError(
                    file,
                    "an empty failure: the judge words every failure it finds",
                    line=n,
                    field=f"failures[{i}]",
                )
            if judge_template(failure) is None:
                raise ConformanceError(
                    file,
                    f"{failure!r} is none of the judge's texts (runner.go judge): the runner "
                    "prints only those",
                    line=n,
                    field=f"failures[{i}]",
                )
        name = doc["case"]
        expect = None
        if suite is not None and len(results) < len(suite.cases):
            expect = suite.cases[len(results)].get("expect") or {}
        if (k := out_of_judges_order(failures, expect)) is not None:
            why = unwritable(failures[k], expect)
            if why is not None or k == 0:
                # No place in the judge for this case at all: not a matter of order.
                message = (
                    f"{failures[k]!r}: the judge (runner.go judge) cannot write this failure "
                    f"for this case{f': {why}' if why else ''}"
                )
            else:
                message = (
                    f"{failures[k]!r} follows {failures[k - 1]!r}, and the judge (runner.go "
                    "judge) checks it before: the runner cannot print them in this order"
                )
            raise ConformanceError(file, message, line=n, field=f"failures[{k}]")
        if suite is not None:
            # The runner prints one line per suite case, in the suite's order.
            position = len(results)
            if position >= len(suite.cases):
                raise ConformanceError(
                    file,
                    f"a case line past the suite's {len(suite.cases)} case(s)",
                    line=n,
                    field="case",
                )
            stated = suite.cases[position]
            if stated.get("name", "") != name:
                raise ConformanceError(
                    file,
                    f"case {position + 1} of the suite is {stated.get('name', '')!r}, but this "
                    f"line is {name!r}: the runner prints the suite's cases in order",
                    line=n,
                    field="case",
                )
            if stated.get("rule", "") != doc["rule"]:
                raise ConformanceError(
                    file, f"the rule of case {name!r} is not the suite's", line=n, field="rule"
                )
        elif name in seen:
            raise ConformanceError(
                file,
                f"case {name!r} appears twice (first on line {seen[name]})",
                line=n,
                field="case",
            )
        seen.setdefault(name, n)
        result = CaseResult(n, name, doc["rule"], doc["passed"], failures)
        _as_the_runner_prints(
            raw, runner_case_line(result), n, file, _CASE_KEYS, doc.get("failures")
        )
        results.append(result)
    if summary is None:
        raise ConformanceError(
            file, "the output has no summary line (suite, cases, failed): was it cut off?"
        )
    if not ends_with_newline:
        raise ConformanceError(
            file,
            "the last line has no newline after it: the runner ends every line with one (was "
            "the output cut off, or its last newline stripped?)",
            line=len(lines),
        )
    if suite is not None and len(results) < len(suite.cases):
        missing = suite.cases[len(results)].get("name", "")
        raise ConformanceError(
            file,
            f"{len(results)} case line(s) for a suite of {len(suite.cases)}: the runner prints "
            f"every case before the summary, and case {len(results) + 1} ({missing!r}) is missing",
            line=summary_line,
            field="case",
        )
    failed = sum(1 for r in results if not r.passed)
    if summary.get("cases") != len(results):
        raise ConformanceError(
            file,
            f"the summary says {summary.get('cases')} cases but "
            f"{len(results)} case lines precede it",
            line=summary_line,
            field="cases",
        )
    if summary.get("failed") != failed:
        raise ConformanceError(
            file,
            f"the summary says {summary.get('failed')} failed but "
            f"{failed} case lines have passed=false",
            line=summary_line,
            field="failed",
        )
    if suite is not None and summary.get("suite") != suite.suite:
        raise ConformanceError(
            file,
            f"the run is of suite {summary.get('suite')!r}, not {suite.suite!r}",
            line=summary_line,
            field="suite",
        )
    if (exit_status == 0) != (failed == 0):
        raise ConformanceError(
            file,
            f"exit status {exit_status} contradicts {failed} failed "
            "case(s): a run exits 0 exactly when every case passed",
            field="exit_status",
        )
    return RunOutput(False, results, summary["suite"], summary["cases"], summary["failed"])


# --- failure templates (section 6) ----------------------------------------------------------------

TEMPLATES = [
    "a memory message did not parse: %v",
    "expected %d memory message(s) handed to the model, got %d",
    "memory message %d has role %q; it must be %q, never system, never assistant",
    "memory message %d is not marked untrusted",
    "memory message %d carries no watermark",
    "memory message %d carries no plan",
    "memory message %d carries no facts although memory holds some",
    "memory message %d carries no segments although the context holds some: a compaction is the deployment's answer handed over unchanged",
    "memory message %d carries no turns although the context holds some",
    "the model was not handed %q as a message of its own: a compaction keeps what the deployment did not replace",
    "the model was handed %q, which the compaction replaced: history the deployment already holds is not sent twice",
    "the turn was fatal=%v; expected %v",
    "storing failed and the adapter surfaced nothing: a lost turn is invisible until a subject access request asks for it",
    "the adapter reported a store error where none was expected: %s",
    "nothing was sent to observe",
    "observe was called %d time(s) after a failed turn: a failed turn is not a memory",
    "the observe body did not parse: %v",
    "observed group ordinals %v; expected %v: messages that are not one atomic unit must not be observed as one",
    "observed roles %v; expected %v: internal tool traffic must not become memory by default",
    "observed %d message(s) %q; expected exactly %q: a synthetic or injected message is never observed as though a person said it",
    "observe was called %d time(s); expected %d: a retried turn is sent again, and sent with the same key",
    "a retried turn was sent with %d different idempotency keys; a retry carries the key of the turn it retries, or the deployment stores the same turn twice",
    "distinct turns were sent with one idempotency key; the deployment would keep only the first",
    "the deployment holds %d more observation(s) after the turn; expected %d",
]
# What each verb of a template prints, by the Go type runner.go's judge hands it: %d an int
# (never a leading zero, never -0; a count or an index is never negative), %q a string
# (strconv.Quote) or a []string (`["a" "b"]`), %v an error's text, a bool or a list.
_QUOTED = r'"(?:[^"\\\x00-\x1f]|\\.)*"'
_INT = r"0|-?[1-9]\d*"
_KINDS = {
    "int": _INT,
    "count": r"0|[1-9]\d*",
    "quoted": _QUOTED,
    "quoted list": rf"\[(?:{_QUOTED}(?: {_QUOTED})*)?\]",
    "bool": "true|false",
    "int list": rf"\[(?:(?:{_INT})(?: (?:{_INT}))*)?\]",
    "list": r"\[.*\]",
    "text": ".+",
}
# Each template's verbs in turn, where they are not all `int`.
_ARGS: dict[int, tuple[str, ...]] = {
    0: ("text",),
    1: ("int", "count"),  # the suite's figure, then len(memory)
    2: ("count", "quoted", "quoted"),
    **{i: ("count",) for i in range(3, 9)},  # memory message i
    9: ("quoted",),
    10: ("quoted",),
    11: ("bool", "bool"),
    13: ("text",),
    15: ("count",),
    16: ("text",),
    17: ("int list", "int list"),
    18: ("list", "list"),
    19: ("count", "quoted list", "quoted list"),
    20: ("count", "int"),
    21: ("count",),
}


def _template_regex(index: int, template: str) -> re.Pattern[str]:
    parts = re.split(r"(%[dqvs])", template)
    kinds = iter(_ARGS.get(index, ()))
    body = "".join(
        f"({_KINDS[next(kinds, 'int')]})" if len(p) == 2 and p[0] == "%" else re.escape(p)
        for p in parts
    )
    return re.compile(body, re.DOTALL)


_COMPILED = [(i, t, _template_regex(i, t)) for i, t in enumerate(TEMPLATES)]


def _judged(failure: str) -> tuple[int, list[str]] | None:
    """The index of the judge template a failure text was made from and what its verbs
    printed, or None if the judge cannot write it: each %q as strconv.Quote spells it."""
    for index, _, pattern in _COMPILED:
        found = pattern.fullmatch(failure)
        if found is None:
            continue
        kinds = _ARGS.get(index, ())
        quoted = [
            token
            for printed, kind in zip(found.groups(), kinds, strict=False)
            if kind in ("quoted", "quoted list")
            for token in re.findall(_QUOTED, printed)
        ]
        if all(map(_go_quoted, quoted)):
            return index, list(found.groups())
    return None


_UNQUOTE = re.compile(
    r'\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|[abfnrtv\\"])'
)
_QUOTED_BODY = re.compile(rf"(?:{_UNQUOTE.pattern}|[^\\\\])*", re.DOTALL)
_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _go_quoted(token: str) -> bool:
    """Whether `token` is a string as strconv.Quote writes it (its escapes Go's, printable runes
    left as they are)."""
    body = token[1:-1]
    if not _QUOTED_BODY.fullmatch(body):
        return False

    def one(m: re.Match[str]) -> str:
        e = m.group()[1:]
        if e in _SIMPLE:
            return _SIMPLE[e]
        if e[0] in "xuU":
            return chr(int(e[1:], 16))
        return e if e in '\\"' else chr(int(e, 8))

    try:
        return go_quote(_UNQUOTE.sub(one, body)) == token
    except ValueError:
        return False


def judge_template(failure: str) -> str | None:
    """The judge template a failure text was made from, or None if the judge cannot write it."""
    found = _judged(failure)
    return None if found is None else TEMPLATES[found[0]]


# The kinds of memory_carries, by the template that reports each missing.
_CARRIES = {4: "watermark", 5: "plan", 6: "facts", 7: "segments", 8: "turns"}


def _places(index: int, args: list[str], expect: dict[str, Any] | None) -> list[tuple[tuple, bool]]:
    """Where in runner.go's judge a failure of template `index` is written, as places in its
    order, each with whether the judge may write it there more than once."""
    if index == 0:
        return [((0,), True)]
    if index == 1:
        return [((1,), False)]
    if index in (2, 3):
        return [((2, int(args[0]), index - 2), False)]
    if index in _CARRIES:
        # Each message's carries in the suite's memory_carries order (unknown: any order).
        if expect is None:
            return [((2, int(args[0]), 2, 0), True)]
        carries = expect.get("memory_carries") or []
        at = [j for j, kind in enumerate(carries) if kind == _CARRIES[index]]
        return [((2, int(args[0]), 2, j), False) for j in at]
    fixed = {
        9: [((3,), True)],
        10: [((4,), True)],
        11: [((5,), False)],
        12: [((6,), False)],
        13: [((6,), False)],
        # expect.Observed, then the observed groups, then the observed roles and contents.
        14: [((7,), False), ((8, 0), False), ((9, 0), False)],
        15: [((7,), False)],
        16: [((8, 1), False), ((9, 1), False), ((11, 0), True)],
        17: [((8, 2), False)],
        18: [((9, 2), False)],
        19: [((9, 3), False)],
        20: [((10,), False)],
        21: [((11, 1), False)],
        22: [((11, 1), False)],
        23: [((12,), False)],
    }
    return fixed[index]


def out_of_judges_order(failures: list[str], expect: dict[str, Any] | None = None) -> int | None:
    """The position of the first failure the judge (runner.go judge) cannot have written after
    the ones before it, or None when the list is in an order it writes: its checks run in one
    order, each writing at most once where it can write once. `expect`: the case's, when the
    suite is known (it orders the carries of a memory message)."""
    at: tuple = ()
    again = True
    for k, failure in enumerate(failures):
        found = _judged(failure)
        if found is None:
            return k
        later = [
            (place, repeats)
            for place, repeats in _places(*found, expect)
            if place > at or (place == at and again)
        ]
        if not later:
            return k
        at, again = min(later)
    return None


def unwritable(failure: str, expect: dict[str, Any] | None) -> str | None:
    """Why the judge cannot write `failure` for a case expecting `expect`, wherever it came in
    the list (a carry its memory_carries does not name), or None when it has a place."""
    found = _judged(failure)
    if found is None:
        return "it is none of the judge's texts"
    if _places(*found, expect):
        return None
    carries = (expect or {}).get("memory_carries") or []
    if found[0] in _CARRIES:
        if not carries:
            return "its expect has no memory_carries"
        named = ", ".join(map(str, carries))
        return f"its expect.memory_carries ({named}) has no {_CARRIES[found[0]]}"
    return "the judge has no place for it"


def template_of(failure: str) -> str:
    """The judge template a failure text was made from, or the text itself if none fits."""
    return judge_template(failure) or failure
