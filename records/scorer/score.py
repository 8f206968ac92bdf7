"""The upstream scorer (modelrecord.md section C), ported rule by rule. Pure Python, no Django.

Inputs are small plain objects (`AttemptInput`, `CallInput`) so the same code scores a shard
read into memory and attempts loaded back from the database. They and the verdicts are msgspec
Structs, built in C: scoring 20,000 attempts makes some 250,000 of them.

Two documented departures, both forced by what a shard carries:

* `Requested` is the recorded `requested_action`: upstream identifies (tool, arguments) against
  its own catalog first and only falls back to the recorded field (G.7).
* `Clean` is the derived reading of C.7 (not pinned upstream); the UI legend says so.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import operator
import re
from collections.abc import Iterable
from typing import Any

import msgspec
import orjson
import re2

from records.formats.corpus_key import Arg, Catalog, CatalogEntry, KeyDocument, Step
from records.formats.rows import FAILURE_PARTS
from records.formats.shard import CallLine

# Stored with each scoring. Change it with any change to what the scorer finds of an attempt,
# its step-by-step account included: an attempt's page makes that account again only for a
# scoring of this version (`records.scoring.run.account`).
SCORER_VERSION = "modelscore-port/1"
DISPATCHER_REFUSALS = frozenset(
    {
        "safe_mode",
        "needs_confirmation",
        "invalid_params",
        "unknown_action",
        "rate_limited",
        "fine_grained",
    }
)
COUNTED_APART = ("skipped", "unobserved", "provider_error", "harness_error", "gitlab_refused")
RECORDED_ENDINGS = ("skipped", "provider_error", "harness_error", "malformed", "over_budget")
OUTCOMES = (
    "completed",
    "failed",
    "gitlab_refused",
    "over_budget",
    "malformed",
    "provider_error",
    "harness_error",
    "skipped",
    "unobserved",
)
DYNAMIC_DISPATCHER = "gitlab_execute_action"
DISCOVERY_TOOL = "gitlab_find_action"
_NOT_SENT = object()


class ScoringError(Exception):
    """An attempt that cannot be scored at all (an error, not a verdict: C.1)."""


# What the scorer reads of a call line: its line number in the shard, then these fields of
# `CallLine`, as the line declares them (JSON values decoded). The batch reader selects the
# stored columns in this order and builds each call from the row as it comes.
CALL_READ = (
    "index",
    "tool",
    "arguments",
    "requested_action",
    "dispatched_action",
    "dispatched_tool",
    "outcome",
    "result",
    "result_truncated",
    "text",
    "dispatch_observed",
)
CallInput = msgspec.defstruct(
    "CallInput",
    [
        ("line", int, 0),
        *(
            (f.name, f.type, f.default)
            for f in msgspec.structs.fields(CallLine)
            if f.name in CALL_READ
        ),
    ],
    array_like=True,
    module=__name__,
)
CALL_COLUMNS = CallInput.__struct_fields__


class AttemptInput(msgspec.Struct):
    id: str
    case: str
    model: str
    surface: str  # the attempt's own surface, else its session's (C.1)
    mode: str  # session mode, '' read as default
    tier: str  # session tier pin, else the run's tier
    ended_by: str
    reason: str = ""
    facts: dict[str, str] = msgspec.field(default_factory=dict)
    calls: list[CallInput] = msgspec.field(default_factory=list)
    last_turn_has_tool_call: bool | None = None  # None: the attempt has no turn lines
    verifies: list[bool] = msgspec.field(default_factory=list)
    failed_checks: list[str] = msgspec.field(default_factory=list)  # the names of those that failed


# --- Go-compatible number parse (G.15) --------------------------------------------------------
# A port of strconv's readFloat and underscoreOK: one pass over the bytes, so any argument
# value is parsed in linear time (a backtracking pattern was quadratic on long digit runs),
# ASCII digits only (Go never reads "٤٢" or "４２" as a number), underscores between digits.


def _special(s: str) -> float | None:
    """strconv's special(): [+-]inf, [+-]infinity, nan (no sign), any case, the whole string."""
    body, sign = s, 1.0
    if s[:1] in ("+", "-"):
        body, sign = s[1:], (-1.0 if s[0] == "-" else 1.0)
        if body.lower() in ("inf", "infinity"):
            return sign * math.inf
        return None
    low = s.lower()
    if low in ("inf", "infinity"):
        return math.inf
    if low == "nan":
        return math.nan
    return None


def _underscore_ok(s: str) -> bool:
    saw = "^"  # ^ start, 0 digit or base prefix, _ underscore, ! anything else
    if s[:1] in ("+", "-"):
        s = s[1:]
    i, hexa = 0, False
    if len(s) >= 2 and s[0] == "0" and s[1] in "bBoOxX":
        i, saw, hexa = 2, "0", s[1] in "xX"
    for c in s[i:]:
        if "0" <= c <= "9" or (hexa and c in "abcdefABCDEF"):
            saw = "0"
        elif c == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def go_parse_float(s: str) -> float | None:
    """strconv.ParseFloat(s, 64): the value, or None where Go returns an error (syntax or
    range)."""
    special = _special(s)
    if special is not None:
        return special
    n, i = len(s), 0
    if i < n and s[i] in "+-":
        i += 1
    hexa = i + 2 < n and s[i] == "0" and s[i + 1] in "xX"
    if hexa:
        i += 2
    digits = "0123456789abcdefABCDEF" if hexa else "0123456789"
    sawdot = sawdigits = underscores = False
    while i < n:
        c = s[i]
        if c == "_":
            underscores = True
        elif c == ".":
            if sawdot:
                break
            sawdot = True
        elif c in digits:
            sawdigits = True
        else:
            break
        i += 1
    if not sawdigits:
        return None
    if i < n and s[i] in ("pP" if hexa else "eE"):
        i += 1
        if i < n and s[i] in "+-":
            i += 1
        if i >= n or not "0" <= s[i] <= "9":
            return None
        while i < n and ("0" <= s[i] <= "9" or s[i] == "_"):
            underscores = underscores or s[i] == "_"
            i += 1
    elif hexa:
        return None  # a hexadecimal mantissa needs its p exponent
    if i != n or (underscores and not _underscore_ok(s)):
        return None
    plain = s.replace("_", "")
    try:
        value = float.fromhex(plain) if hexa else float(plain)
    except (ValueError, OverflowError):
        return None  # out of range: Go reports ErrRange
    if math.isinf(value):
        return None
    return value


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(s: str) -> str:
    """Go's %q (strconv.Quote) of a string: double quotes, Go's escapes, printable runes kept."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def canonical(value: Any) -> str | None:
    """None when not sent (absent or null); the decoded text of a string; else compact JSON."""
    if value is _NOT_SENT or value is None:
        return None
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def equal_value(value: Any, want: str) -> bool:
    return matches_any(canonical(value), [want])


def matches_any(got: str | None, accepted: list[str]) -> bool:
    """Whether a sent value (`canonical`) equals any accepted spelling: as text, else as the
    same number where both parse as Go's floats. The sent value is parsed once, and only when
    no spelling equals it as text."""
    if got is None:
        return False
    if got in accepted:
        return True
    a = go_parse_float(got)
    return a is not None and any(go_parse_float(w) == a for w in accepted)


# --- events (C.2) -----------------------------------------------------------------------------


class Event(msgspec.Struct):
    call: CallInput
    requested: str
    dispatched: str
    dispatched_tool: str
    discovery: bool
    action_args: dict[str, Any] | None
    confirmed: bool

    @property
    def outcome(self) -> str:
        return self.call.outcome

    @property
    def observed(self) -> bool:
        return self.call.dispatch_observed


def _is_true(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() == "true")


_by_index = operator.attrgetter("index")


def events_of(calls: Iterable[CallInput], surface: str, catalog: Catalog) -> list[Event]:
    meta_tools = catalog.meta_tools
    out = []
    for c in sorted(calls, key=_by_index):  # stable: ties keep file order
        if c.dispatched_action:
            discovery = False
        elif c.dispatched_tool:
            discovery = c.dispatched_tool == DISCOVERY_TOOL
        else:
            discovery = c.tool == DISCOVERY_TOOL
        top = c.arguments if isinstance(c.arguments, dict) else None
        dispatcher = (surface == "dynamic" and c.tool == DYNAMIC_DISPATCHER) or (
            surface == "meta" and c.tool in meta_tools
        )
        if dispatcher:
            params = top.get("params") if top is not None else None
            action_args = params if isinstance(params, dict) else None
        else:
            action_args = top
        if surface == "dynamic":
            confirmed = top is not None and _is_true(top.get("confirm"))
        else:
            confirmed = action_args is not None and _is_true(action_args.get("confirm"))
        out.append(
            Event(
                c,
                c.requested_action,
                c.dispatched_action,
                c.dispatched_tool,
                discovery,
                action_args,
                confirmed,
            )
        )
    return out


def git_lab_refused(outcome: str) -> bool:
    if outcome == "tool_error":
        return True
    return outcome.startswith("refused:") and outcome[8:] not in DISPATCHER_REFUSALS


def declined_by_refusal(e: Event) -> bool:
    o = e.outcome
    return (
        o == "refused:unknown_action"
        or o == "protocol_error"
        or (o == "refused:invalid_params" and "/properties/action" in e.call.text)
    )


def retried(e: Event) -> bool:
    return e.outcome in (
        "refused:invalid_params",
        "refused:needs_confirmation",
    ) and not declined_by_refusal(e)


# --- verdicts ---------------------------------------------------------------------------------


class ArgVerdict(msgspec.Struct):
    name: str
    truth: str
    required: bool
    sent: str | None
    want: str
    compared: bool
    matched: bool
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class StepVerdict(msgspec.Struct):
    number: int
    name: str
    optional: bool
    known: bool = True
    destructive: bool = False
    mutating: bool = False
    reached: bool = False
    matched_by: str = ""
    requested: str = ""
    dispatched: str = ""
    rewritten: bool = False
    call_index: int = 0
    call_line: int = 0
    call_outcome: str = ""
    observed: bool = True
    retries: int = 0
    retry_outcomes: list[str] = msgspec.field(default_factory=list)
    answer: str = ""
    decline: str = ""
    accepted_first_time: bool = False
    complete: bool = False
    reason: str = ""
    confirmation: str = ""
    args: list[ArgVerdict] = msgspec.field(default_factory=list)

    def compared_all_matched(self) -> bool:
        return all(a.matched for a in self.args if a.compared)

    def as_dict(self) -> dict[str, Any]:
        d = msgspec.structs.asdict(self)
        d["args"] = [a.as_dict() for a in self.args]
        return d


class AttemptVerdict(msgspec.Struct):
    """What the scorer finds of one attempt (upstream's Verdict, C.7); the stored row is
    `records.models.Verdict`."""

    attempt: str
    case: str
    outcome: str
    reason: str
    steps: list[StepVerdict]
    discovery: int
    invalid_params: int
    verified: bool
    unaided: bool
    ended_in_text: bool
    clean: bool = False

    def as_dict(self) -> dict[str, Any]:
        d = msgspec.structs.asdict(self)
        del d["steps"]
        d["steps"] = [s.as_dict() for s in self.steps]
        return d


def _entry(catalog: Catalog, step: Step) -> CatalogEntry | None:
    if step.action:
        return catalog.actions.get(step.action)
    return catalog.standalone.get(step.standalone)


def _names_step(e: Event, step: Step) -> str:
    if step.standalone:
        return "tool" if (e.dispatched_tool or e.call.tool) == step.standalone else ""
    if e.dispatched:
        return "dispatched" if e.dispatched == step.action else ""
    return "requested" if e.requested == step.action else ""


def _ended_in_text(a: AttemptInput) -> bool:
    if a.ended_by == "no_tool_call":
        return True
    if a.ended_by == "completed":
        return not a.last_turn_has_tool_call  # no turn lines counts as ended in text
    return False


def _compare_args(
    step: Step,
    sent_obj: dict[str, Any] | None,
    a: AttemptInput,
    steps: list[StepVerdict],
    reaching: list[Event | None],
) -> list[ArgVerdict]:
    out = []
    for arg in step.args:
        raw = _NOT_SENT if sent_obj is None else sent_obj.get(arg.name, _NOT_SENT)
        sent = canonical(raw)
        t = arg.truth
        if t.kind == "authored":
            out.append(
                ArgVerdict(
                    arg.name,
                    "authored",
                    arg.required,
                    sent,
                    "",
                    False,
                    False,
                    "",  # upstream gives no reason: authored values are never compared
                )
            )
            continue
        accepted, why = _resolve(arg, a, steps, reaching)
        want = " or ".join(accepted)
        if sent is None:
            if arg.required:
                out.append(
                    ArgVerdict(
                        arg.name, t.kind, True, None, want, True, False, "the argument was not sent"
                    )
                )
            else:
                out.append(ArgVerdict(arg.name, t.kind, False, None, want, False, False, ""))
            continue
        if why:
            out.append(ArgVerdict(arg.name, t.kind, arg.required, sent, want, True, False, why))
            continue
        matched = matches_any(sent, accepted)
        reason = ""
        if not matched:
            reason = {
                "fact": "the value is none of the spellings the recipe produced",
                "literal": "the value is not the one the prompt states",
                "produced": f"the value is not what step {t.produced_step} answered at "
                f"{go_quote(t.produced_field)}",
            }[t.kind]
        out.append(ArgVerdict(arg.name, t.kind, arg.required, sent, want, True, matched, reason))
    return out


# The id fact also accepted for an argument bound to a path fact (`project_path`, `group_path`).
_FACT_ALSO = {"project_path": "project_id", "group_path": "group_id"}


def _resolve(
    arg: Arg, a: AttemptInput, steps: list[StepVerdict], reaching: list[Event | None]
) -> tuple[list[str], str]:
    t = arg.truth
    if t.kind == "fact":
        values = []
        if t.fact in a.facts:
            values.append(a.facts[t.fact])
        extra = _FACT_ALSO.get(t.fact)
        if extra and extra in a.facts:
            values.append(a.facts[extra])
        if not values:
            return [], (
                f"the attempt recorded no fact named {go_quote(t.fact)}, so there is nothing to "
                "compare this argument with"
            )
        return values, ""
    if t.kind == "literal":
        return [t.literal], ""
    if t.kind == "produced":
        s = t.produced_step
        if not 1 <= s <= len(steps):
            return [], f"step {s} is not a step of this case"
        if reaching[s - 1] is None:
            return [], f"step {s} was never reached, so it answered nothing to bind to"
        ev = reaching[s - 1]
        assert ev is not None
        if ev.call.result_truncated:
            return [], (
                f"step {s} answered with more than the record keeps, so "
                f"{go_quote(t.produced_field)} was cut off rather than absent"
            )
        node: Any = ev.call.result
        for part in t.produced_field.split("."):
            if not isinstance(node, dict) or part not in node:
                return [], f"step {s} answered with no field {go_quote(t.produced_field)}"
            node = node[part]
        if node is None:
            return [], f"step {s} answered with no value at {go_quote(t.produced_field)}"
        value = canonical(node)
        assert value is not None
        return [value], ""
    return [], "the case declares no truth for this argument"


def score_attempt(a: AttemptInput, key: KeyDocument) -> AttemptVerdict:
    case = key.case(a.case)
    if case is None:
        raise ScoringError(
            f"attempt {a.id} names case {a.case!r}, which the corpus key does not have"
        )
    if a.surface not in ("dynamic", "meta", "individual"):
        raise ScoringError(
            f"attempt {a.id} has surface {a.surface!r}, which is not dynamic, meta or individual"
        )
    mode = a.mode or "default"
    catalog = key.catalog_for(a.tier)
    if catalog is None:
        raise ScoringError(
            f"attempt {a.id} ran at tier {a.tier!r}, for which the corpus key has no catalog"
        )
    events = events_of(a.calls, a.surface, catalog)
    ended_in_text = _ended_in_text(a)
    steps: list[StepVerdict] = []
    reaching_events: list[Event | None] = []
    by_refusal_reaching: set[int] = set()
    cursor = 0
    for number, step in enumerate(case.steps, 1):
        sv = StepVerdict(number, step.name, step.optional)
        steps.append(sv)
        reaching_events.append(None)
        # Matching reads no catalog (upstream's matchSteps): a step the tier lacks is still
        # reached by the call that names it, which counts its retries and moves the window.
        reaching: Event | None = None
        prior: list[Event] = []
        kind = ""
        for i in range(cursor, len(events)):
            e = events[i]
            if e.discovery:
                continue
            kind = _names_step(e, step)
            if not kind:
                continue
            if retried(e):
                prior.append(e)
                continue
            reaching = e
            cursor = i + 1
            reaching_events[-1] = e
            sv.reached = True
            break
        sv.retries = len(prior)
        sv.retry_outcomes = [e.outcome for e in prior]
        entry = _entry(catalog, step)
        if entry is None:
            sv.known = False
            sv.reason = (
                f"the catalog at this tier has no {step.name}, so the case cannot be "
                "scored against it"
            )
            continue
        sv.destructive = entry.destructive
        sv.mutating = not entry.read_only
        if reaching is not None:
            sv.matched_by = kind
            sv.requested = reaching.requested
            sv.dispatched = reaching.dispatched
            sv.rewritten = bool(
                reaching.requested
                and reaching.dispatched
                and reaching.requested != reaching.dispatched
            )
            sv.call_index = reaching.call.index
            sv.call_line = reaching.call.line
            sv.call_outcome = reaching.outcome
            sv.observed = reaching.observed
            sv.args = _compare_args(step, reaching.action_args, a, steps, reaching_events)
            served_in_read_only = False
            if mode == "read-only" and sv.mutating:
                if declined_by_refusal(reaching):
                    sv.decline = "by-refusal"
                    sv.answer = "accepted"
                    by_refusal_reaching.add(id(reaching))
                else:
                    sv.answer = "wrong"
                    served_in_read_only = True
            else:
                sv.answer = _answer_of(mode, sv.mutating, reaching.outcome)
            sv.accepted_first_time = not prior and sv.answer == "accepted"
            sv.complete = sv.answer == "accepted" and sv.compared_all_matched()
            if not sv.complete:
                if served_in_read_only:
                    sv.reason = (
                        "read-only withholds this action and the model was served "
                        "rather than declined"
                    )
                elif sv.answer == "gitlab_refused":
                    sv.reason = f"the action ran and GitLab refused it: {reaching.outcome}"
                elif sv.answer == "wrong":
                    sv.reason = (
                        f"the call was answered {reaching.outcome}, which is not what "
                        "this mode expects"
                    )
                else:
                    sv.reason = (
                        "the arguments did not carry the values the case declares: "
                        + ", ".join(
                            f"{x.name} ({x.reason})"
                            for x in sv.args
                            if x.compared and not x.matched
                        )
                    )
        else:
            declined = False
            if mode == "read-only" and sv.mutating and ended_in_text:
                if not any(_mutating(catalog, e.dispatched) for e in events if e.dispatched):
                    declined = True
                    sv.decline = "by-text"
                    sv.answer = "accepted"
                    sv.complete = True
                    sv.accepted_first_time = True
                    sv.observed = all(e.observed for e in events)
                else:
                    sv.reason = "the attempt dispatched a mutating action and then declined in text"
            if not declined:
                sv.complete = step.optional
                if not step.optional:
                    if not prior:
                        sv.reason = "no call named this step"
                    else:
                        sv.reason = (
                            f"{len(prior)} call(s) named this step and the server asked for each "
                            f"again ({prior[-1].outcome}); none was answered"
                        )
                    sv.observed = not any(
                        not e.observed for e in events[cursor:] if not e.discovery
                    )
        if sv.destructive:
            if not sv.reached or not reaching or not reaching.confirmed:
                sv.confirmation = "never"
            elif any(e.outcome == "refused:needs_confirmation" for e in prior):
                sv.confirmation = "server-aided"
            else:
                sv.confirmation = "unaided"
    discovery = sum(1 for e in events if e.discovery)
    counted = [e for e in events if id(e) not in by_refusal_reaching]
    invalid_params = sum(1 for e in counted if e.outcome == "refused:invalid_params")
    verified = all(a.verifies)
    outcome, reason = _outcome_of(a, steps, verified)
    unaided = outcome == "completed" and not any(
        e.outcome in ("refused:invalid_params", "refused:needs_confirmation") for e in counted
    )
    v = AttemptVerdict(
        a.id,
        a.case,
        outcome,
        reason,
        steps,
        discovery,
        invalid_params,
        verified,
        unaided,
        ended_in_text,
    )
    v.clean = is_clean(v)
    return v


def _mutating(catalog: Catalog, action: str) -> bool:
    entry = catalog.actions.get(action) or catalog.standalone.get(action)
    return entry is not None and not entry.read_only


def _answer_of(mode: str, mutating: bool, outcome: str) -> str:
    if mode == "safe" and mutating:
        return "accepted" if outcome == "preview" else "wrong"
    if outcome == "ok":
        return "accepted"
    if git_lab_refused(outcome):
        return "gitlab_refused"
    return "wrong"


def _outcome_of(a: AttemptInput, steps: list[StepVerdict], verified: bool) -> tuple[str, str]:
    if a.ended_by in RECORDED_ENDINGS:
        return a.ended_by, a.reason
    refused: StepVerdict | None = None
    for s in steps:
        if not s.observed:
            return (
                "unobserved",
                f"step {s.number} rests on a call whose dispatch was never observed",
            )
        if s.complete:
            continue
        if s.answer == "gitlab_refused" and s.compared_all_matched():
            refused = s
            continue
        if refused is not None and not s.reached:
            return "gitlab_refused", (
                f"step {refused.number} ({refused.name}) was dispatched as the case declares "
                f"and GitLab refused it, so step {s.number} ({s.name}) was never reached"
            )
        return "failed", f"step {s.number} ({s.name}): {s.reason}"
    if not verified:
        return "failed", "a recipe check against GitLab did not hold afterwards"
    if refused is not None:
        return "gitlab_refused", (
            "every step was dispatched as the case declares and GitLab refused one"
        )
    return "completed", ""


def is_clean(v: AttemptVerdict) -> bool:
    """C.7, derived reading (not pinned upstream)."""
    if not (v.outcome == "completed" and v.unaided and v.verified):
        return False
    for s in v.steps:
        if s.optional and not s.reached and s.decline == "":
            continue
        if not s.observed or not (s.reached or s.decline):
            return False
        if s.destructive and s.confirmation not in ("unaided", "server-aided"):
            return False
        if not s.compared_all_matched():
            return False
    return True


# --- aggregation (C.8) ------------------------------------------------------------------------

RATIO_COLUMNS = (
    "clean",
    "reached",
    "accepted_first_time",
    "argument_fidelity",
    "confirmation",
    "unaided",
    "completion",
)


class Aggregate(msgspec.Struct):
    """Additive figures for a set of verdicts; `+` is upstream's `Sum`."""

    attempts: int = 0
    outcomes: dict[str, int] = msgspec.field(default_factory=dict)
    declines: dict[str, int] = msgspec.field(default_factory=dict)
    confirmations: dict[str, int] = msgspec.field(default_factory=dict)
    ratios: dict[str, list[int]] = msgspec.field(
        default_factory=lambda: {c: [0, 0] for c in RATIO_COLUMNS}
    )
    discovery: int = 0
    invalid_params: int = 0
    steps: int = 0

    def counted_apart(self, outcome: str) -> int:
        return self.outcomes.get(outcome, 0)

    def add(self, v: AttemptVerdict) -> None:
        self.outcomes[v.outcome] = self.outcomes.get(v.outcome, 0) + 1
        if v.outcome in COUNTED_APART:
            return
        r = self.ratios
        self.attempts += 1
        for col, hit in (
            ("completion", v.outcome == "completed"),
            ("unaided", v.unaided),
            ("clean", v.clean),
        ):
            r[col][1] += 1
            r[col][0] += hit
        self.discovery += v.discovery
        self.invalid_params += v.invalid_params
        for s in v.steps:
            if not s.observed:
                continue
            if s.decline:
                self.declines[s.decline] = self.declines.get(s.decline, 0) + 1
            if s.destructive:
                r["confirmation"][1] += 1
                self.confirmations[s.confirmation] = self.confirmations.get(s.confirmation, 0) + 1
                r["confirmation"][0] += s.confirmation in ("unaided", "server-aided")
            reached = s.reached or bool(s.decline)
            if not s.optional:
                r["reached"][1] += 1
                r["reached"][0] += reached
            if reached:
                self.steps += 1
                r["accepted_first_time"][1] += 1
                r["accepted_first_time"][0] += s.accepted_first_time
                for arg in s.args:
                    if arg.compared:
                        r["argument_fidelity"][1] += 1
                        r["argument_fidelity"][0] += arg.matched

    def __add__(self, other: Aggregate) -> Aggregate:
        out = Aggregate(
            self.attempts + other.attempts,
            _sum_maps(self.outcomes, other.outcomes),
            _sum_maps(self.declines, other.declines),
            _sum_maps(self.confirmations, other.confirmations),
            {
                c: [self.ratios[c][0] + other.ratios[c][0], self.ratios[c][1] + other.ratios[c][1]]
                for c in RATIO_COLUMNS
            },
            self.discovery + other.discovery,
            self.invalid_params + other.invalid_params,
            self.steps + other.steps,
        )
        return out


def _sum_maps(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def aggregate(verdicts: Iterable[AttemptVerdict]) -> Aggregate:
    agg = Aggregate()
    for v in verdicts:
        agg.add(v)
    return agg


def ratio_text(n: int, d: int) -> str:
    return "-" if d == 0 else f"{n} / {d}"


def overhead_text(agg: Aggregate) -> str:
    if agg.steps == 0:
        return "-"
    return (
        f"{agg.discovery + agg.invalid_params} / {agg.steps} "
        f"({agg.discovery} find, {agg.invalid_params} invalid_params)"
    )


# --- inputs from a shard read into memory -------------------------------------------------------


def attempt_inputs(shard: Any) -> list[AttemptInput]:
    """AttemptInputs for every attempt of a `records.formats.shard.Shard` (C.1 placement)."""
    run = shard.run
    out = []
    for rec in shard.attempts:
        p = rec.attempt
        session = shard.sessions.get(p.get("session", "")) or {}
        last = None
        for line, t in rec.turns:
            if last is None or t["index"] >= last[1]["index"]:
                last = (line, t)
        out.append(
            AttemptInput(
                id=p["id"],
                case=p["case"],
                model=p["model"],
                surface=p.get("surface") or session.get("surface", ""),
                mode=session.get("mode", ""),
                tier=session.get("tier_pin") or run.get("tier", ""),
                ended_by=p["ended_by"],
                reason=p.get("reason", ""),
                facts=p.get("facts") or {},
                calls=[
                    CallInput(line=line, **{name: c[name] for name in CALL_READ if name in c})
                    for line, c in rec.calls
                ],
                last_turn_has_tool_call=None
                if last is None
                else any(b.get("kind") == "tool_call" for b in last[1].get("blocks", [])),
                verifies=[v.get("passed", False) for _, v in rec.verifies],
                failed_checks=[v["name"] for _, v in rec.verifies if not v.get("passed", False)],
            )
        )
    return out


# --- failure signatures -----------------------------------------------------------------------

# A signature's parts, in the order pages and exports show them; `mode_id` hashes them all.
SIGNATURE_PARTS = ("outcome", *FAILURE_PARTS)
# Where the first thing that went wrong lies (a signature's `step`).
STEP_KINDS = ("call", "check", "ending")
MESSAGE_MAX = 200
# How much of a message the rule reads: a reason may be a megabyte of the model's text, and a
# pattern's cost grows with what it reads.
MESSAGE_READ = 2000

# The message rule's patterns, applied in this order (each placeholder is left alone by the
# patterns after it). Quoted values are found by RE2 (linear in the text, where a backtracking
# search restarts at every quote of `"\"\"\"...`); Python's `\s` spelled out for it.
_PY_SPACE = r"\t\n\v\f\r\x{1c}-\x{1f} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
_QUOTED = re2.compile(rf"\"(?:[^\"\\]|\\.)*\"|'[^'{_PY_SPACE}][^']*'|`[^`]*`|«[^»]*»|“[^”]*”")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
# A path starts where a run of name characters starts (not inside one, which would read the
# rest of the run again from every `-`, `.` or `~` of it).
_PATH = re.compile(r"(?<![\w.~<-])(?:[\w.~-]+)?(?:/[\w.~%+@:-]+)+/?")
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_HEX_ID = re.compile(r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_MIXED_ID = re.compile(r"\b(?=\w*\d)(?=\w*[A-Za-z])[\w-]*\d[\w-]*\b")
_SPACE = re.compile(r"\s+")


def normalise_message(text: str) -> str:
    """A failure's message with what varies from attempt to attempt taken out, so that one
    problem reads alike wherever it occurs ("project 42 not found" and "project 97 not found"
    are one message, "project <n> not found"). In this order: a quoted value ("..", '..', `..`,
    «..», “..”) becomes `<q>`; a URL or a path (anything with a slash between names, such as
    `eval-group/eval-project` or `/api/v4/projects`) `<path>`; a UUID or a run of seven or more
    hex digits with both a digit and a letter `<id>`; a number (sign, digits, separators,
    decimals, exponent) `<n>`; a word mixing letters and digits (`ab12c`, `call_7`) `<id>`.
    White space is collapsed and the message cut to 200 characters. Only the message's first
    2,000 characters are read. (A run repeats a few messages over and over: the last few
    thousand are kept.)"""
    return _normalised(text[:MESSAGE_READ])


@functools.lru_cache(maxsize=4096)
def _normalised(text: str) -> str:
    text = _QUOTED.sub("<q>", text)
    text = _URL.sub("<path>", text)
    text = _PATH.sub("<path>", text)
    text = _UUID.sub("<id>", text)
    text = _HEX_ID.sub("<id>", text)
    text = _NUMBER.sub("<n>", text)
    text = _MIXED_ID.sub("<id>", text)
    return _SPACE.sub(" ", text).strip()[:MESSAGE_MAX]


def _action_of(requested: str, dispatched: str) -> str | None:
    """A call's action as a signature spells it: the one action when only one is recorded or
    both agree, `requested>dispatched` when the server ran another."""
    if requested and dispatched and requested != dispatched:
        return f"{requested}>{dispatched}"
    return dispatched or requested or None


def failure_signature(a: AttemptInput, v: AttemptVerdict) -> dict[str, str | None] | None:
    """What a verdict that did not pass (any outcome but `completed`) failed on, as a
    signature: None for a passed one. The rule, from the records alone:

    * `outcome`: the verdict's outcome.
    * `step`, where the first thing that went wrong lies: `ending` when the runner's recorded
      ending is the outcome (C.1: skipped, provider_error, harness_error, malformed,
      over_budget); else `call` for the first step of the case, in order, that was not
      observed or not complete (the step the outcome's reason names); else `check` (every step
      held and a verify check did not).
    * for a `call`: `tool`, `action` and `call_outcome` of the call that reached the step (its
      requested action, or `requested>dispatched` when the server ran another); for a step no
      call reached, `tool` and `action` of the call made instead (the first call after the
      previous step's that looked nothing up), with no call outcome; `argument`, the name of
      the first argument compared and not matched; `message`, the step's reason.
    * for a `check`: `check`, the name of the first check that failed; `message`, the
      verdict's reason.
    * for an `ending`: `message`, the runner's reason (else the verdict's).

    Every message is `normalise_message`d; an absent part is None. `mode_id` names the mode a
    signature stands for."""
    if v.outcome == "completed":
        return None
    sig: dict[str, str | None] = dict.fromkeys(SIGNATURE_PARTS)
    sig["outcome"] = v.outcome
    if a.ended_by in RECORDED_ENDINGS:
        sig["step"] = "ending"
        sig["message"] = normalise_message(a.reason or v.reason) or None
        return sig
    previous_call = 0
    for s in v.steps:
        if s.observed and s.complete:
            if s.reached:
                previous_call = max(previous_call, s.call_index)
            continue
        sig["step"] = "call"
        if s.reached:
            sig["tool"] = _tool_at(a.calls, s.call_index, s.call_line)
            sig["action"] = _action_of(s.requested, s.dispatched)
            sig["call_outcome"] = s.call_outcome or None
            sig["argument"] = next((x.name for x in s.args if x.compared and not x.matched), None)
        else:
            instead = next(
                (
                    c
                    for c in sorted(a.calls, key=_by_index)
                    if c.index > previous_call and DISCOVERY_TOOL not in (c.tool, c.dispatched_tool)
                ),
                None,
            )
            if instead is not None:
                sig["tool"] = instead.tool or None
                sig["action"] = _action_of(instead.requested_action, instead.dispatched_action)
        reason = s.reason
        if not s.observed:
            reason = "the call's dispatch was never observed"
        sig["message"] = normalise_message(reason or v.reason) or None
        return sig
    if not v.verified:
        sig["step"] = "check"
        sig["check"] = a.failed_checks[0] if a.failed_checks else None
    else:
        sig["step"] = "ending"
    sig["message"] = normalise_message(v.reason) or None
    return sig


def _tool_at(calls: list[CallInput], index: int, line: int) -> str | None:
    for c in calls:
        if c.index == index and c.line == line:
            return c.tool or None
    return None


def mode_id(signature: dict[str, Any]) -> str:
    """The id of the failure mode a signature stands for: the first 16 hex digits of the
    sha256 of its canonical JSON (every part of `SIGNATURE_PARTS`, absent ones null, keys
    sorted, no spaces, UTF-8). Other records (annotations on modes) name a mode by it."""
    return _mode_id(tuple(map(signature.get, SIGNATURE_PARTS)))


@functools.lru_cache(maxsize=4096)
def _mode_id(parts: tuple[str | None, ...]) -> str:
    text = json.dumps(
        dict(zip(SIGNATURE_PARTS, parts, strict=True)),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,  # UTF-8, as the docstring and docs/pages.md say: no \uXXXX escapes
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
