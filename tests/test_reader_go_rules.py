"""The general reader and the fast one read repeated and case-folded keys as Go's decoder does."""

from __future__ import annotations

from pathlib import Path

import pytest

from records.formats.shard import (
    ShardError,
    ShardFieldError,
    as_dict,
    parse_line,
    read_shard_bytes,
)
from records.formats.text import go_fold
from records.models import Attempt, Run, Turn
from tests.builders import encode, ingest_bytes, line

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
ATTEMPT = '"id":"a1","case":"MS-001","model":"fake:perfect","session":"dynamic/default","repeat":1'
TURN = '"attempt":"a1","index":1,"try":1'


def payload(raw: str) -> dict:
    return as_dict(parse_line(raw.encode())[1])


def attempt(members: str) -> dict:
    return payload('{"schema":1,"type":"attempt","attempt":{' + ATTEMPT + "," + members + "}}")


def turn(members: str) -> dict:
    return payload('{"schema":1,"type":"turn","turn":{' + TURN + "," + members + "}}")


def test_the_last_spelling_of_a_field_wins_also_after_an_exact_repeat():
    # The exact key again after a folded one: Go reads malformed, the dict reading kept completed.
    got = attempt('"ended_by":"no_tool_call","Ended_By":"completed","ended_by":"malformed"')
    assert got["ended_by"] == "malformed"
    got = turn('"status":"ok","STATUS":"rate_limited","detail":"a","Detail":"b","detail":"c"')
    assert (got["status"], got["detail"]) == ("rate_limited", "c")


def test_a_null_after_a_value_leaves_the_value_in_place():
    assert attempt('"ended_by":"completed","ended_by":null')["ended_by"] == "completed"
    assert attempt('"ended_by":"completed","shown_tools":3,"shown_tools":null')["shown_tools"] == 3
    line_ = '{"Schema":1,"schema":null,"type":"verify","verify":{"attempt":"a1","name":"n","passed":true}}'
    assert payload(line_)["name"] == "n"


def test_keys_fold_as_go_folds_them_with_the_long_s_and_the_kelvin_sign():
    got = attempt('"ended_by":"completed","\u017fe\u017f\u017fion":"s2"')
    assert got["session"] == "s2"
    got = turn('"status":"ok","blocks":[{"\u212aind":"text","text":"hi"}]')
    assert got["blocks"][0]["kind"] == "text"
    assert go_fold("\u017fession") == "SESSION" and go_fold("\u212aind") == "KIND"


@pytest.mark.parametrize(
    "key",
    [
        "\u0130d",  # capital I with dot: Go's folding keeps it apart from i
        "\u0131d",  # dotless i
        "pa\u00dfed",  # sharp s folds to ss only in full folding, which Go does not use
        "\ufb01lter",  # the fi ligature, likewise
    ],
)
def test_runes_that_fold_to_ascii_only_in_full_folding_stay_unknown(key):
    raw = '{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"n","' + key + '":true}}'
    with pytest.raises(ShardFieldError) as info:
        parse_line(raw.encode())
    assert info.value.field == f"verify.{key}" and "unknown field" in info.value.message


def test_a_repeated_object_decodes_into_the_first_as_in_go():
    got = turn('"status":"ok","usage":{"input":5,"cache_read":7},"usage":{"output":3}')
    assert got["usage"] == {"input": 5, "output": 3, "cache_created": 0, "cache_read": 7}
    got = attempt('"ended_by":"completed","facts":{"a":"1"},"Facts":{"b":"2"}')
    assert got["facts"] == {"a": "1", "b": "2"}
    got = turn(
        '"status":"ok","blocks":[{"kind":"text","text":"kept"}],'
        '"blocks":[{"kind":"thinking"},{"kind":"text"}]'
    )
    blocks = [(b["kind"], b.get("text", "")) for b in got["blocks"]]
    assert blocks == [("thinking", "kept"), ("text", "")]


def test_a_repeated_payload_decodes_into_the_first():
    raw = '{"schema":1,"type":"turn","turn":{' + TURN + ',"status":"ok"},"Turn":{"detail":"2"}}'
    got = payload(raw)
    assert (got["attempt"], got["status"], got["detail"]) == ("a1", "ok", "2")


def test_a_key_spelled_with_an_escape_is_read_as_go_reads_it():
    got = turn('"status":"ok","usage":{"input":5},"u\\u0073age":{"output":3}')
    assert (got["usage"]["input"], got["usage"]["output"]) == (5, 3)


def test_a_null_in_a_map_of_strings_is_an_empty_string():
    assert attempt('"ended_by":"completed","facts":{"a":null}')["facts"] == {"a": ""}


def test_the_corpus_of_repeated_keys_reads_as_go_reads_it():
    s = read_shard_bytes((HOSTILE / "modeleval-go-repeated-keys.jsonl").read_bytes(), "x.jsonl")
    rec = s.attempts[0]
    assert rec.attempt["ended_by"] == "completed" and rec.attempt["session"] == "dynamic/default"
    ((_, t),) = rec.turns
    assert (t["status"], t["detail"]) == ("rate_limited", "slow down")
    assert t["usage"]["input"] == 10 and t["usage"]["output"] == 4


@pytest.mark.django_db
class TestStored:
    def test_an_ingested_shard_keeps_what_go_reads_from_repeated_and_folded_keys(self):
        data = (HOSTILE / "modeleval-go-repeated-keys.jsonl").read_bytes()
        report = ingest_bytes(("modeleval-go-repeated-keys.jsonl", data))
        assert report.ok, report.refused
        a = Attempt.objects.get(run=Run.objects.get())
        assert (a.ended_by, a.session_label) == ("completed", "dynamic/default")
        t = Turn.objects.get(attempt=a)
        assert (t.status, t.detail, t.input_tokens, t.output_tokens) == (
            "rate_limited",
            "slow down",
            10,
            4,
        )
        assert a.input_tokens == 10 and a.output_tokens == 4

    def test_a_key_only_go_knows_is_stored_and_one_it_does_not_is_refused_by_line_and_field(self):
        good = encode(
            [
                '{"schema":1,"type":"attempt","attempt":{"id":"a1","case":"MS-001",'
                '"model":"fake:perfect","\u017furface":"dynamic","session":"dynamic/default",'
                '"repeat":1,"ended_by":"completed"}}',
                line("session"),
                line("run"),
            ]
        )
        assert ingest_bytes(("modeleval-s.jsonl", good)).ok
        assert Attempt.objects.get().surface == "dynamic"
        bad = good.replace("\u017furface".encode(), "\u00dfurface".encode()).replace(
            b"run-1", b"run-2"
        )
        report = ingest_bytes(("modeleval-ss.jsonl", bad))
        (refused,) = report.refused
        assert (refused["line"], refused["field"]) == (1, "attempt.\u00dfurface")
        assert Run.objects.count() == 1


def test_a_refusal_names_the_line():
    data = (HOSTILE / "modeleval-go-repeated-keys.jsonl").read_bytes()
    with pytest.raises(ShardError) as info:
        read_shard_bytes(data.replace(b'"Ended_By":"completed"', b'"Ended_By":7'), "x.jsonl")
    assert (info.value.line, info.value.field) == (1, "attempt.ended_by")


def test_a_call_index_go_reads_into_its_int_is_stored_whole(db):
    # Upstream's reader vector 077: the largest int Go's decoder puts in Call.Index.
    from records.models import Call
    from tests.builders import shard

    largest = 2**63 - 1
    data = shard(line("call", index=largest), line("call", index=2))
    assert ingest_bytes(("modeleval-077.jsonl", data)).ok
    assert sorted(Call.objects.values_list("index", flat=True)) == [1, 2, largest]


def test_a_call_index_past_gos_int_is_refused_by_line_and_field():
    from tests.builders import shard

    with pytest.raises(ShardError) as info:
        read_shard_bytes(shard(line("call", index=2**63)), "modeleval-edge.jsonl")
    assert (info.value.line, info.value.field) == (5, "call.index")


# Go's strings.TrimSpace (upstream's `required`) trims the White_Space property; Python's
# str.strip() also trims U+001C to U+001F, which Go keeps.
GO_KEEPS = ["\x1c", "\x1d", "\x1e", "\x1f"]
GO_TRIMS = [" \t", "\u00a0", "\u0085", "\u2003", "\u3000", "\u2028"]


@pytest.mark.parametrize("value", GO_KEEPS)
def test_a_field_of_a_separator_control_is_not_blank_as_in_go(value):
    from tests.builders import shard

    data = shard(line("verify", name=value, passed=False, detail=value))
    lines = read_shard_bytes(data, "modeleval-x.jsonl")
    assert lines  # read, not refused as an empty name or detail


@pytest.mark.parametrize("value", GO_TRIMS)
@pytest.mark.parametrize("field", ["name", "detail"])
def test_a_field_of_go_white_space_is_blank_and_refused_by_name(value, field):
    from tests.builders import shard

    verify = line("verify", passed=False, detail="it did not hold")
    verify["verify"][field] = value
    with pytest.raises(ShardError) as info:
        read_shard_bytes(shard(verify), "modeleval-x.jsonl")
    assert info.value.field == f"verify.{field}"
