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

from records.formats.text import NUL_ESCAPE, NUL_MESSAGE, invalid_utf8, nul_field

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
_MESSAGE = {"role": S, "content": S, "untrusted": B}
_SCHEMA: dict[str, Any] = {
    "suite": S,
    "memory_message_prefix": S,
    "cases": [
        {
            "name": S,
            "rule": S,
            "seed": [{"subject": S, "predicate": S, "object": S, "statement": S}],
            "faults": {"recall": S, "observe": S, "context": S},
            "context": {
                "watermark": {"stored": INT, "formed": INT, "parked": INT},
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
            "turn": {
                "history": [{"role": S, "content": S}],
                "user": S,
                "tool_calls": [{"call": S, "result": S}],
                "synthetic": [{"role": S, "content": S}],
                "assistant": S,
                "model_failure": B,
                "compact": B,
                "repeat": INT,
                "repeat_after_ms": INT,
            },
            "expect": {
                "memory_messages": INT,
                "memory_role": S,
                "memory_untrusted": B,
                "memory_carries": [S],
                "model_carries": [S],
                "model_lacks": [S],
                "fatal": B,
                "store_error": B,
                "observed": B,
                "observed_groups": [INT],
                "observed_roles": [S],
                "observed_contents": [S],
                "observe_calls": INT,
                "observe_keys_equal": B,
                "stored": INT,
            },
        }
    ],
}


def _decoded(value: Any, schema: Any, path: str, file: str) -> Any:
    """`value` as Go's decoder reads it into the suite's types: null is the zero value, field
    names match case-insensitively (the last of equal-folding names wins), an unknown field or
    a value of another type is refused by name. The result spells every name as the type does."""
    if value is None:
        return None
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise ConformanceError(file, "must be an object", field=path)
        out: dict[str, Any] = {}
        folded = {name.lower(): name for name in schema}
        for key, item in value.items():
            name = key if key in schema else folded.get(key.lower())
            if name is None:
                raise ConformanceError(file, "unknown field", field=f"{path}.{key}".lstrip("."))
            out[name] = _decoded(item, schema[name], f"{path}.{name}".lstrip("."), file)
        return out
    if isinstance(schema, list):
        if not isinstance(value, list):
            raise ConformanceError(file, "must be a list", field=path)
        return [_decoded(item, schema[0], f"{path}[{i}]", file) for i, item in enumerate(value)]
    if schema == S and not isinstance(value, str):
        raise ConformanceError(file, "must be a string", field=path)
    if schema == INT and (
        isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63
    ):
        raise ConformanceError(file, "must be a whole number that fits 64 bits", field=path)
    if schema == B and not isinstance(value, bool):
        raise ConformanceError(file, "must be true or false", field=path)
    return value


def _first_value(data: bytes, file: str) -> Any:
    """The first JSON value of `data`, as Go's json.Decoder.Decode reads it: what follows the
    value is left unread."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConformanceError(file, f"is not valid JSON: {invalid_utf8(data)}") from None

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        start = len(text) - len(text.lstrip(" \t\r\n"))
        doc, _ = json.JSONDecoder(parse_constant=no_constant).raw_decode(text, start)
    except ValueError as exc:
        raise ConformanceError(file, f"is not valid JSON: {exc}") from None
    return doc


@dataclass
class Suite:
    suite: str
    cases: list[dict[str, Any]]
    document: dict[str, Any] = field(default_factory=dict)  # as decoded, names spelled once

    def case(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.cases if c.get("name") == name), None)

    @property
    def names(self) -> list[str]:
        return [c["name"] for c in self.cases]


def read_suite(data: bytes, file: str) -> Suite:
    """A suite file, accepted exactly where upstream's Load accepts it (taisce's runner.go):
    the first JSON value decoded strictly into the suite's types, the runner's memory message
    prefix, and at least one case. A case may leave out its turn or expect (zero values), and
    names may repeat or be empty: Load allows both, and `ambiguities` says so."""
    doc = _first_value(data, file)
    if NUL_ESCAPE in data and (where := nul_field(doc)):
        raise ConformanceError(file, NUL_MESSAGE, field=where)
    if not isinstance(doc, dict):
        raise ConformanceError(file, "a suite file is a JSON object")
    doc = _decoded(doc, _SCHEMA, "", file)
    if doc.get("memory_message_prefix") != PREFIX:
        raise ConformanceError(file, f"must be {PREFIX!r}", field="memory_message_prefix")
    cases = doc.get("cases") or []
    if not cases:
        raise ConformanceError(file, "the suite holds no case", field="cases")
    return Suite(doc.get("suite") or "", [c or {} for c in cases], doc)


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
class CaseResult:
    line: int
    case: str
    rule: str
    passed: bool
    failures: list[str] = field(default_factory=list)


@dataclass
class RunOutput:
    aborted: bool
    results: list[CaseResult]
    suite: str = ""
    cases: int = 0
    failed: int = 0


def read_output(data: bytes, file: str, *, exit_status: int, suite: Suite | None) -> RunOutput:
    """Case lines then one summary line; empty output with a non-zero exit is an aborted run."""
    if not data.strip():
        if exit_status == 0:
            raise ConformanceError(
                file,
                "the output is empty but the exit status is 0: a run "
                "that completes prints one line per case and a summary",
            )
        return RunOutput(aborted=True, results=[])
    if exit_status not in (0, 1):
        raise ConformanceError(
            file,
            f"exit status {exit_status} with output: the runner exits 0 when every case passed "
            "and 1 otherwise",
            field="exit_status",
        )
    results: list[CaseResult] = []
    summary: dict[str, Any] | None = None
    summary_line = 0
    seen: dict[str, int] = {}
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        if summary is not None:
            raise ConformanceError(
                file, "a line follows the summary line; the summary is last", line=n
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
                if key not in ("suite", "cases", "failed"):
                    raise ConformanceError(
                        file, "unknown field in the summary line", line=n, field=key
                    )
            _decoded(doc, {"suite": S, "cases": INT, "failed": INT}, "", file)
            summary, summary_line = doc, n
            continue
        for key in doc:
            if key not in ("case", "rule", "passed", "failures"):
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
        name = doc["case"]
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
        results.append(CaseResult(n, name, doc["rule"], doc["passed"], failures))
    if summary is None:
        raise ConformanceError(
            file, "the output has no summary line (suite, cases, failed): was it cut off?"
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
_VERBS = {"%d": r"-?\d+", "%q": r'(?:"(?:[^"\\]|\\.)*"|\[.*?\])', "%v": r".*?", "%s": r".*?"}


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(%[dqvs])", template)
    body = "".join(_VERBS[p] if p in _VERBS else re.escape(p) for p in parts)
    return re.compile(body, re.DOTALL)


_COMPILED = [(t, _template_regex(t)) for t in TEMPLATES]


def template_of(failure: str) -> str:
    """The judge template a failure text was made from, or the text itself if none fits."""
    for template, pattern in _COMPILED:
        if pattern.fullmatch(failure):
            return template
    return failure
