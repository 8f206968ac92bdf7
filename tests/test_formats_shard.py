"""The strict shard reader against modelrecord.md A and every vector of its Appendix 2."""

from __future__ import annotations

import io
import json

import pytest

from records.formats.shard import (
    MAX_LINE_BYTES,
    ShardError,
    is_shard_name,
    read_shard,
    read_shard_bytes,
)
from tests.builders import DROP, FIXTURE_SHARD, MINIMAL, encode, line, shard


def refuse(data: bytes) -> ShardError:
    with pytest.raises(ShardError) as info:
        read_shard_bytes(data, "modeleval-t.jsonl")
    return info.value


def test_it_reads_the_upstream_fixture_shard_with_its_session_line_last():
    s = read_shard(FIXTURE_SHARD.open("rb"), FIXTURE_SHARD.name)
    assert s.run["run_id"] == "run-fixture-dynamic"
    assert [a.attempt["id"] for a in s.attempts] == ["MT-002/dynamic/1", "MT-002/dynamic/2"]
    first = s.attempts[0]
    assert [t["index"] for _, t in first.turns] == [1, 2, 3]
    assert [c["index"] for _, c in first.calls] == [1, 2]
    assert s.session_of(first)["surface"] == "dynamic"
    assert first.calls[1][1]["result"]["project"]["id"] == 42
    assert s.warnings == []


def test_it_accepts_every_minimal_valid_line_of_appendix_2():
    s = read_shard_bytes(shard(), "modeleval-min.jsonl")
    assert len(s.attempts) == 1 and len(s.attempts[0].verifies) == 1


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("{", None, "not valid JSON"),
        (
            '{"schema":2,"type":"attempt","attempt":{"id":"a1"}}',
            "schema",
            "schema 2 is not 1: the shard was written by another version",
        ),
        ('{"type":"attempt","attempt":{"id":"a1"}}', "schema", "schema 0 is not 1"),
        (
            '{"schema":1,"type":"verdict","attempt":{"id":"a1"}}',
            "type",
            "unknown line type 'verdict'",
        ),
        (
            '{"schema":1,"type":"turn","attempt":{"id":"a1"}}',
            "turn",
            "line type turn carries no payload",
        ),
        ('{"schema":1,"type":"turn","turn":null}', "turn", "carries no payload"),
        (
            '{"schema":1,"type":"call","call":{"attempt":"a1","turn":1,"index":1,"tool":"t","outcome":"ok"},'
            '"turn":{"attempt":"a1","index":1,"try":1,"status":"ok"}}',
            "call, turn",
            "line type call carries 2 payloads, want exactly one",
        ),
        (
            '{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"n","passed":true}} '
            '{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"n","passed":true}}',
            None,
            "more than one JSON value on the line",
        ),
        ("[1, 2]", None, "must be a JSON object"),
    ],
)
def test_it_refuses_envelope_errors_naming_line_and_field(text, field, words):
    err = refuse(encode([line("run"), text]))
    assert err.line == 2
    assert err.field == field
    assert words in err.message
    assert "modeleval-t.jsonl line 2" in str(err)


def test_it_refuses_a_line_over_the_one_mebibyte_cap():
    body = '{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"'
    tail = '","passed":true}}'
    long_line = body + "x" * (MAX_LINE_BYTES + 1 - len(body) - len(tail) - 1) + tail
    assert len(long_line) + 1 == 1_048_577
    err = refuse(encode([line("run"), long_line]))
    assert err.line == 2 and "longer than the shard line cap" in err.message


def test_a_line_exactly_at_the_cap_is_read():
    body = '{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"'
    tail = '","passed":true}}'
    at_cap = body + "x" * (MAX_LINE_BYTES - len(body) - len(tail) - 1) + tail
    s = read_shard_bytes(shard(at_cap), "modeleval-cap.jsonl")
    assert len(s.attempts[0].verifies) == 2


def test_blank_lines_are_skipped_but_counted():
    err = refuse(encode([line("run"), "   ", "{"]))
    assert err.line == 3


@pytest.mark.parametrize(
    ("typ", "changes", "field", "words"),
    [
        ("run", {"run_id": DROP}, "run.run_id", "required"),
        ("run", {"run_id": "   "}, "run.run_id", "required"),
        ("run", {"repeat": 0}, "run.repeat", "at least 1"),
        ("session", {"label": DROP}, "session.label", "required"),
        ("session", {"served_tools": -1}, "session.served_tools", "at least 0"),
        ("session", {"slice_size": -1}, "session.slice_size", "at least 0"),
        ("attempt", {"id": DROP}, "attempt.id", "required"),
        ("attempt", {"ended_by": "skipped", "reason": DROP}, "attempt.reason", "must say why"),
        ("attempt", {"ended_by": "gave_up"}, "attempt.ended_by", "'gave_up' is not one of"),
        ("attempt", {"session": DROP}, "attempt.session", "required"),
        ("attempt", {"ended_by": "over_budget", "session": ""}, "attempt.session", "required"),
        ("attempt", {"repeat": 0}, "attempt.repeat", "at least 1"),
        ("attempt", {"shown_tools": -1}, "attempt.shown_tools", "at least 0"),
        ("turn", {"index": 0}, "turn.index", "at least 1"),
        ("turn", {"try": 0}, "turn.try", "at least 1"),
        ("turn", {"status": ""}, "turn.status", "is not one of"),
        ("turn", {"status": "refused"}, "turn.status", "is not one of"),
        ("turn", {"status": "OK"}, "turn.status", "is not one of"),
        (
            "turn",
            {"blocks": [{"kind": "text"}, {"kind": "function_call"}]},
            "turn.blocks[1].kind",
            "block 2 has kind 'function_call'",
        ),
        ("turn", {"usage": {"input": -1, "output": 0}}, "turn.usage.input", "at least 0"),
        ("turn", {"usage": {"input": 0, "output": -1}}, "turn.usage.output", "at least 0"),
        (
            "turn",
            {"usage": {"input": 0, "output": 0, "cache_created": -1}},
            "turn.usage.cache_created",
            "at least 0",
        ),
        (
            "turn",
            {"usage": {"input": 0, "output": 0, "cache_read": -1}},
            "turn.usage.cache_read",
            "at least 0",
        ),
        ("call", {"turn": 0}, "call.turn", "at least 1"),
        ("call", {"index": 0}, "call.index", "at least 1"),
        ("call", {"outcome": "refused:"}, "call.outcome", "must name its reason"),
        ("call", {"outcome": "refused:  "}, "call.outcome", "must name its reason"),
        ("call", {"outcome": "shrugged"}, "call.outcome", "'shrugged' is not one of"),
        ("verify", {"passed": False}, "verify.detail", "must say what did not hold"),
        ("verify", {"name": ""}, "verify.name", "required"),
    ],
)
def test_it_refuses_invalid_payloads_naming_the_field(typ, changes, field, words):
    err = refuse(encode([line(typ, **changes)]))
    assert (err.line, err.field) == (1, field)
    assert words in err.message


@pytest.mark.parametrize("typ", ["run", "session", "attempt", "turn", "call", "verify"])
def test_it_refuses_an_empty_payload_of_every_type(typ):
    err = refuse(encode([{"schema": 1, "type": typ, typ: {}}]))
    assert err.field.startswith(typ + ".")


@pytest.mark.parametrize("ending", ["skipped", "harness_error"])
def test_skips_and_harness_errors_may_carry_no_session(ending):
    extra = line("attempt", id="a2", session="", ended_by=ending, reason="needs ultimate")
    s = read_shard_bytes(shard(extra), "modeleval-s.jsonl")
    assert s.attempts[1].attempt["ended_by"] == ending


def test_a_completed_attempt_with_a_reason_is_kept_with_a_warning():
    data = encode([line("attempt", reason="The project ID is 42."), line("session"), line("run")])
    s = read_shard_bytes(data, "modeleval-w.jsonl")
    assert s.attempts[0].attempt["reason"] == "The project ID is 42."
    assert s.warnings and s.warnings[0]["line"] == 1 and s.warnings[0]["field"] == "attempt.reason"


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        (line("attempt", extra_field=1), "attempt.extra_field", "unknown field"),
        (
            {"schema": 1, "type": "run", "run": {"run_id": "r", "repeat": 1}, "x": 1},
            "x",
            "unknown field",
        ),
        (
            line(
                "run", providers=[{"spec": "a", "price": {"input_per_million_usd": 1, "euros": 2}}]
            ),
            "run.providers[0].price.euros",
            "unknown field",
        ),
        (
            line("turn", usage={"input": 1, "output": 1, "reasoning": 3}),
            "turn.usage.reasoning",
            "unknown field",
        ),
        (
            line("turn", blocks=[{"kind": "text", "html": "<b>"}]),
            "turn.blocks[0].html",
            "unknown field",
        ),
        (line("attempt", repeat=1.0), "attempt.repeat", "whole number"),
        (line("attempt", repeat="1"), "attempt.repeat", "whole number"),
        (line("attempt", repeat=2**63), "attempt.repeat", "64-bit"),
        (line("attempt", repeat=10**30), "attempt.repeat", "whole number"),
        (line("attempt", id=42), "attempt.id", "must be a string"),
        (line("attempt", facts={"project_id": 42}), "attempt.facts.project_id", "must be a string"),
        (line("call", dispatch_observed="yes"), "call.dispatch_observed", "true or false"),
        (line("run", started_at="yesterday"), "run.started_at", "RFC 3339"),
        (line("session", token_scopes="api"), "session.token_scopes", "list of strings"),
    ],
)
def test_it_refuses_hostile_lines(bad, field, words):
    err = refuse(encode([bad]))
    assert err.field == field and words in err.message


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (
            b'{"schema":1,"type":"run","run":{"run_id":"r","repeat":1,"budget_usd":NaN}}',
            "not valid JSON",
        ),
        (
            b'{"schema":1,"type":"run","run":{"run_id":"r","repeat":1,"budget_usd":1e400}}',
            "not valid JSON",
        ),
        (b'{"schema":1,"type":"run","run":{"run_id":"\xff\xfe","repeat":1}}', "not valid JSON"),
        (
            b'{"schema":1,"type":"call","call":{"attempt":"a","turn":1,"index":1,"tool":"t","outcome":"ok","result":'
            + b"[" * 5000
            + b"]" * 5000
            + b"}}",
            "not valid JSON",
        ),
    ],
)
def test_it_refuses_nan_huge_numbers_invalid_utf8_and_deep_nesting(raw, words):
    err = refuse(raw + b"\n")
    assert err.line == 1 and words in err.message


def test_field_names_match_case_insensitively_and_the_last_duplicate_wins_like_go():
    raw = (
        b'{"schema":1,"type":"attempt","attempt":{"ID":"a1","Case":"MT-002","model":"m",'
        b'"session":"dynamic/default","repeat":1,"ended_by":"skipped","ended_by":"completed"}}'
    )
    s = read_shard_bytes(encode([raw.decode(), line("session"), line("run")]), "modeleval-c.jsonl")
    assert s.attempts[0].attempt["case"] == "MT-002"
    assert s.attempts[0].attempt["ended_by"] == "completed"


def test_a_zero_started_at_means_no_date():
    data = encode(
        [line("attempt"), line("session"), line("run", started_at="0001-01-01T00:00:00Z")]
    )
    assert read_shard_bytes(data, "modeleval-z.jsonl").run["started_at"] is None
    data = encode(
        [line("attempt"), line("session"), line("run", started_at="2026-09-16T11:00:00+02:00")]
    )
    assert (
        read_shard_bytes(data, "modeleval-z.jsonl").run["started_at"].isoformat()
        == "2026-09-16T09:00:00+00:00"
    )


class TestJoins:
    def test_a_shard_without_a_run_line_is_refused(self):
        err = refuse(encode([line("attempt"), line("session")]))
        assert err.field == "run" and "carries no run line" in err.message

    def test_two_run_ids_in_one_shard_are_refused(self):
        err = refuse(shard(line("run", run_id="run-2")))
        assert err.line == 7 and err.field == "run.run_id"
        assert "run_id 'run-1' but line 5 carries 'run-2'" in err.message

    def test_repeated_run_lines_with_one_run_id_are_allowed_and_the_last_wins(self):
        s = read_shard_bytes(shard(line("run", commit="abc")), "modeleval-r.jsonl")
        assert "commit" not in s.run  # the base run line, without a commit, comes last and wins

    def test_duplicate_attempt_ids_are_refused(self):
        err = refuse(shard(line("attempt")))
        assert err.line == 5 and err.field == "attempt.id" and "two attempt lines" in err.message

    @pytest.mark.parametrize("typ", ["turn", "call", "verify"])
    def test_a_line_naming_an_unknown_attempt_is_refused(self, typ):
        err = refuse(shard(line(typ, attempt="ghost")))
        assert err.line == 5 and err.field == f"{typ}.attempt" and "'ghost'" in err.message

    def test_children_may_come_before_their_attempt_line(self):
        data = encode([line("turn"), line("attempt"), line("session"), line("run")])
        s = read_shard_bytes(data, "modeleval-o.jsonl")
        assert len(s.attempts[0].turns) == 1

    def test_an_attempt_naming_a_missing_session_is_refused(self):
        err = refuse(encode([line("attempt", session="nowhere"), line("run")]))
        assert err.line == 1 and err.field == "attempt.session" and "'nowhere'" in err.message

    def test_a_later_session_line_with_the_same_label_replaces_the_earlier(self):
        s = read_shard_bytes(shard(line("session", surface="meta")), "modeleval-l.jsonl")
        assert s.sessions["dynamic/default"]["surface"] == "dynamic"  # base session comes last


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("modeleval-123.jsonl", True),
        ("ce/modeleval-ce.jsonl", True),
        ("modeleval.jsonl", False),
        ("modeleval-x.json", False),
        ("calls-1.jsonl", False),
        ("Modeleval-1.jsonl", False),
    ],
)
def test_shard_names_follow_the_prefix_and_suffix_rule(name, ok):
    assert is_shard_name(name) is ok


def test_reading_is_bounded_by_the_line_cap_not_the_file():
    # A 3 MiB line with no newline is refused after reading at most one cap's worth.
    stream = io.BytesIO(b"x" * (3 * MAX_LINE_BYTES))
    with pytest.raises(ShardError):
        read_shard(stream, "modeleval-big.jsonl")
    assert stream.tell() <= MAX_LINE_BYTES + 1


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (line("attempt", id="x" * 501), "attempt.id"),
        (line("turn", attempt="y" * 600), "turn.attempt"),
        (line("run", providers=[{"spec": "z" * 501}]), "run.providers[0].spec"),
    ],
)
def test_identifiers_longer_than_500_characters_are_refused(bad, field):
    err = refuse(encode([bad]))
    assert err.field == field and "at most 500 characters" in err.message


def test_long_free_text_is_kept():
    s = read_shard_bytes(shard(line("verify", name="n" * 5000)), "modeleval-long.jsonl")
    assert len(s.attempts[0].verifies[1][1]["name"]) == 5000


# --- the fast reader and the general reader agree -------------------------------------------------


def _general(raw: bytes):
    """The general reader alone: Go's reading, then the same struct and checks."""
    import msgspec

    from records.formats import shard as sr

    typ, payload = sr._parse_general(raw)
    if typ in sr.STRUCTS:
        payload = msgspec.convert(payload, sr.STRUCTS[typ])
    sr._CHECKS[typ](payload)
    return typ, payload


def _outcome(read, raw: bytes):
    from records.formats.shard import ShardFieldError

    try:
        return read(raw)
    except ShardFieldError as exc:
        return ("refused", exc.field, exc.message)


def _variants() -> list[bytes]:
    call = MINIMAL["call"]
    out = [json.dumps(line(t)).encode() for t in ("attempt", "turn", "call", "verify")]
    for typ, changes in [
        ("call", {"requests": None}),
        ("call", {"turn": True}),
        ("call", {"turn": 1.0}),
        ("call", {"turn": "1"}),
        ("call", {"index": 2**63 - 1}),
        ("call", {"index": 2**63}),
        ("call", {"index": -(2**63)}),
        ("call", {"duration_ms": 7}),
        ("call", {"dispatch_observed": 1}),
        ("call", {"outcome": "refused:"}),
        ("call", {"outcome": "refused: not allowed"}),
        ("call", {"arguments": {"a": [1, {"b": None}], "c": "é"}, "result": "x"}),
        ("call", {"arguments": 12345678901234567890}),
        ("call", {"extra": 1}),
        ("call", {"attempt": " "}),
        ("call", {"attempt": "a" * 501}),
        ("turn", {"usage": {"input": 5, "cache_read": -1}}),
        ("turn", {"usage": None}),
        ("turn", {"blocks": [{"kind": "text", "text": "hi"}, None]}),
        ("turn", {"blocks": [{"kind": "tool_call", "tool": "t", "arguments": {"x": 1}}]}),
        ("turn", {"blocks": [{"kind": "essay"}]}),
        ("turn", {"blocks": [{"kind": "text", "Text": "case"}]}),
        ("turn", {"try": 0}),
        ("turn", {"latency_ms": 12.5}),
        ("attempt", {"facts": {"a": "b"}}),
        ("attempt", {"facts": {"a": 1}}),
        ("attempt", {"shown_tools": -1}),
        ("attempt", {"ended_by": "skipped", "session": "", "reason": ""}),
        ("attempt", {"overflowed": None}),
        ("verify", {"passed": False}),
        ("verify", {"passed": False, "detail": "nope"}),
    ]:
        out.append(json.dumps(line(typ, **changes)).encode())
    out += [
        b'{"schema":1,"type":"call","call":%s,"type":"turn"}' % json.dumps(call).encode(),
        b'{"schema":1,"type":"call","call":{"attempt":"x"},"call":%s}' % json.dumps(call).encode(),
        b'{"Schema":1,"TYPE":"call","Call":%s}' % json.dumps(call).encode(),
        b'{"schema":1,"type":"call","call":{"ATTEMPT":"a1","tool":"t","turn":1,"index":1,'
        b'"outcome":"ok"}}',
        b'{"schema":"1","type":"verify","verify":{"attempt":"a1","name":"n","passed":true}}',
        b'{"schema":2,"type":"verify","verify":{"attempt":"a1","name":"n","passed":true}}',
        b'{"schema":1,"type":"verify","verify":{"att\\u0065mpt":"a1","name":"n","passed":true}}',
        b'{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"\\ud800","passed":true}}',
        b'{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"\xff","passed":true}}',
        b'{"schema":1,"type":"call","call":{"attempt":"a1","tool":"t","turn":1,"index":1,'
        b'"outcome":"ok","arguments":1e400}}',
        b'{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"n","passed":true}} {}',
    ]
    # Repeated and folded keys: Go's decoder assigns every member in order.
    t = b'"attempt":"a1","index":1,"try":1,"status":"ok"'
    a = b'"id":"a1","case":"c","model":"m","session":"s","repeat":1'
    out += [
        b'{"schema":1,"type":"turn","turn":{%s,"usage":{"input":5},"usage":{"output":3}}}' % t,
        b'{"schema":1,"type":"turn","turn":{%s,"usage":{"input":5},"u\\u0073age":{"output":3}}}'
        % t,
        b'{"schema":1,"type":"turn","turn":{%s,"blocks":[{"kind":"text","text":"x"}],'
        b'"blocks":[{"kind":"thinking"}]}}' % t,
        b'{"schema":1,"type":"turn","turn":{%s,"latency_ms":5,"latency_ms":null}}' % t,
        b'{"schema":1,"type":"turn","turn":{%s,"status":"ok","status":null}}' % t,
        b'{"schema":1,"type":"turn","turn":{%s},"turn":{"detail":"d"}}' % t,
        b'{"schema":1,"type":"turn","turn":{%s},"turn":null}' % t,
        b'{"schema":1,"type":"turn","type":"call","turn":{%s}}' % t,
        b'{"schema":1,"type":"call","type":"turn","turn":{%s}}' % t,
        b'{"schema":1,"schema":null,"type":"turn","turn":{%s}}' % t,
        b'{"schema":1,"type":"\\u0074urn","turn":{%s},"turn":{"detail":"d"}}' % t,
        b'{"schema":1,"type":"attempt","attempt":{%s,"ended_by":"completed","ended_by":null}}' % a,
        b'{"schema":1,"type":"attempt","attempt":{%s,"ended_by":"completed","shown_tools":3,'
        b'"shown_tools":null}}' % a,
        b'{"schema":1,"type":"attempt","attempt":{%s,"ended_by":"completed","facts":{"a":"1"},'
        b'"facts":{"b":"2"}}}' % a,
        b'{"schema":1,"type":"attempt","attempt":{%s,"ended_by":"completed","facts":{"a":null}}}'
        % a,
        b'{"schema":1,"type":"attempt","attempt":{%s,"ended_by":"completed",'
        b'"\xc5\xbfession":"t"}}' % a,
        b'{"schema":1,"type":"call","call":{"attempt":"a1","tool":"t","turn":1,"index":1,'
        b'"outcome":"ok","requests":4,"requests":null}}',
        b'{"schema":1,"type":"call","call":{"attempt":"a1","tool":"t","turn":1,"index":1,'
        b'"outcome":"ok","text":"\\"requests\\":1","requests":2}}',
    ]
    # Numbers at the bounds evaldash keeps, and past them.
    for typ, changes in [
        ("turn", {"index": 2**31 - 1, "usage": {"input": 2**32, "output": 2**32}}),
        ("turn", {"index": 2**31}),
        ("turn", {"try": 3_000_000_000}),
        ("turn", {"usage": {"input": 2**63 - 1}}),
        ("turn", {"latency_ms": 1e308}),
        ("call", {"requests": -(2**31) - 1}),
        ("call", {"duration_ms": -1e11}),
        ("attempt", {"shown_tools": 2**31}),
        ("attempt", {"repeat": 2**31}),
    ]:
        out.append(json.dumps(line(typ, **changes)).encode())
    for depth in (1000, 1022, 1023, 1030):
        nested = b"[" * depth + b"]" * depth
        out.append(
            b'{"schema":1,"type":"call","call":{"attempt":"a1","tool":"t","turn":1,"index":1,'
            b'"outcome":"ok","arguments":%s}}' % nested
        )
    return out


def _fixture_lines() -> list[bytes]:
    return [raw for raw in FIXTURE_SHARD.read_bytes().splitlines() if raw.strip()]


def test_the_fast_reader_and_the_general_reader_agree_on_every_line():
    from records.formats.shard import parse_line

    lines = _fixture_lines() + _variants()
    assert len(lines) > 50
    for raw in lines:
        assert _outcome(parse_line, raw) == _outcome(_general, raw), raw[:200]


def test_lines_spelled_as_upstream_writes_them_never_need_the_general_reader(monkeypatch):
    from records.formats import shard as sr

    def general(raw):
        raise AssertionError("the general reader was used")

    monkeypatch.setattr(sr, "_parse_general", general)
    bulk = [raw for raw in _fixture_lines() if b'"type":"run"' not in raw]
    bulk = [raw for raw in bulk if b'"type":"session"' not in raw]
    assert len(bulk) > 5
    for raw in bulk:
        typ, payload = sr.parse_line(raw)
        assert isinstance(payload, sr.STRUCTS[typ])
