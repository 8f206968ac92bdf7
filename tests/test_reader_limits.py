"""Numbers at the edges: each bound is decided once, in the reader, alike on both databases,
refused by line and field; nothing the site sends as JSON holds a bare Infinity or NaN."""

from __future__ import annotations

import json
import math

import pytest

from records.formats.shard import (
    INT32_MAX,
    MAX_MILLISECONDS,
    MAX_PRICE_USD,
    MAX_TOKENS,
    ShardError,
    read_shard_bytes,
)
from records.models import Attempt, Run, Turn
from records.views.exports import export, json_stream, json_text
from tests.builders import PRICE, encode, ingest_bytes, line, shard


def priced_run(**price: float) -> dict:
    return line("run", providers=[{"spec": "fake:perfect", "price": {**PRICE, **price}}])


def strict_json(text: str | bytes) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def refusal(data: bytes) -> ShardError:
    with pytest.raises(ShardError) as info:
        read_shard_bytes(data, "modeleval-edge.jsonl")
    return info.value


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (line("turn", index=3_000_000_000), "turn.index"),
        (line("turn", index=INT32_MAX + 1), "turn.index"),
        (line("turn", **{"try": INT32_MAX + 1}), "turn.try"),
        (line("call", turn=INT32_MAX + 1), "call.turn"),
        (line("call", requests=INT32_MAX + 1), "call.requests"),
        (line("call", requests=-(2**31) - 1), "call.requests"),
        (line("attempt", repeat=INT32_MAX + 1), "attempt.repeat"),
        (line("attempt", shown_tools=INT32_MAX + 1), "attempt.shown_tools"),
        (line("session", served_tools=INT32_MAX + 1), "session.served_tools"),
        (line("session", slice_size=INT32_MAX + 1), "session.slice_size"),
        (line("run", repeat=INT32_MAX + 1), "run.repeat"),
    ],
)
def test_it_refuses_an_integer_past_its_32_bit_column_by_line_and_field(bad, field):
    err = refusal(shard(bad))
    assert (err.line, err.field) == (5, field) and "32 bits" in err.message


@pytest.mark.parametrize("name", ["input", "output", "cache_created", "cache_read"])
def test_it_refuses_a_token_count_past_its_bound_by_line_and_field(name):
    err = refusal(shard(line("turn", usage={name: 2**63 - 1})))
    assert (err.line, err.field) == (5, f"turn.usage.{name}")
    assert f"at most {MAX_TOKENS:,}" in err.message


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (priced_run(input_per_million_usd=1e308), "run.providers[0].price.input_per_million_usd"),
        (
            priced_run(cache_read_per_million_usd=-1e308),
            "run.providers[0].price.cache_read_per_million_usd",
        ),
        (line("turn", latency_ms=1e308), "turn.latency_ms"),
        (line("call", duration_ms=-1e308), "call.duration_ms"),
    ],
)
def test_it_refuses_a_price_or_a_time_past_its_bound_by_line_and_field(bad, field):
    err = refusal(shard(bad))
    assert (err.line, err.field) == (5, field) and "must be between" in err.message


def test_values_at_every_bound_are_read():
    s = read_shard_bytes(
        shard(
            line("turn", index=INT32_MAX, usage=dict.fromkeys(("input", "output"), MAX_TOKENS)),
            line("call", requests=-(2**31), duration_ms=MAX_MILLISECONDS),
            priced_run(output_per_million_usd=MAX_PRICE_USD),
        ),
        "modeleval-edge.jsonl",
    )
    turns = [t for _, t in s.attempts[0].turns]
    assert turns[1]["index"] == INT32_MAX and turns[1]["usage"]["input"] == MAX_TOKENS


@pytest.mark.django_db
class TestStored:
    """The same answer on SQLite and PostgreSQL: refused by line and field, or stored whole."""

    def test_a_turn_index_past_32_bits_is_refused_and_nothing_is_stored(self):
        report = ingest_bytes(("modeleval-i.jsonl", shard(line("turn", index=3_000_000_000))))
        (refused,) = report.refused
        assert (refused["line"], refused["field"]) == (5, "turn.index")
        assert Run.objects.count() == 0 and Turn.objects.count() == 0

    def test_a_token_count_of_int64_max_is_refused_by_line_and_field(self):
        data = shard(line("turn", usage={"input": 2**63 - 1}))
        (refused,) = ingest_bytes(("modeleval-t.jsonl", data)).refused
        assert (refused["line"], refused["field"]) == (5, "turn.usage.input")
        assert "unexpected" not in refused["message"] and Run.objects.count() == 0

    def test_a_price_of_1e308_is_refused_by_line_and_field(self):
        (refused,) = ingest_bytes(
            ("modeleval-p.jsonl", shard(priced_run(output_per_million_usd=1e308)))
        ).refused
        assert refused["field"] == "run.providers[0].price.output_per_million_usd"
        assert Run.objects.count() == 0

    def test_a_run_at_every_bound_is_stored_and_its_cost_is_finite_json(self, client, settings):
        settings.EVALDASH_PUBLIC_READ = True
        usage = dict.fromkeys(("input", "output", "cache_created", "cache_read"), MAX_TOKENS)
        turns = [line("turn", index=INT32_MAX - i, usage=usage) for i in range(3)]
        price = dict.fromkeys(
            (
                "input_per_million_usd",
                "output_per_million_usd",
                "cache_write_per_million_usd",
                "cache_read_per_million_usd",
            ),
            MAX_PRICE_USD,
        )
        data = encode([line("attempt"), *turns, line("session"), priced_run(**price)])
        report = ingest_bytes(("modeleval-b.jsonl", data))
        assert report.ok, report.refused
        attempt = Attempt.objects.get()
        assert attempt.input_tokens == 3 * MAX_TOKENS
        assert sorted(Turn.objects.values_list("index", flat=True))[-1] == INT32_MAX
        (row,) = strict_json(client.get("/runs.json").content)["rows"]
        want = 3 * 4 * MAX_TOKENS * MAX_PRICE_USD / 1e6
        assert row["priced_cost_usd"] == pytest.approx(want)
        assert math.isfinite(row["priced_cost_usd"])
        trace = b"".join(client.get(f"/attempts/{attempt.pk}.json").streaming_content)
        assert strict_json(trace)


def test_json_exports_send_a_number_that_is_not_finite_as_null():
    rows = [{"cost": math.inf, "rate": math.nan, "nested": [{"x": -math.inf}], "n": 1.5}]
    doc = strict_json(export("json", "x", iter(rows)).content)
    assert doc == {"rows": [{"cost": None, "rate": None, "nested": [{"x": None}], "n": 1.5}]}
    streamed = b"".join(
        s for s in json_stream({"a": math.inf}, [("items", [math.nan])]).streaming_content
    )
    assert strict_json(streamed) == {"a": None, "items": [None]}
    assert json_text({"ok": 2.0}) == '{"ok": 2.0}'
