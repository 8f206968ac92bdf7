"""The shard reader takes time linear in a line whatever its escapes hold (issue 45, R1): a
backtracking regular expression rescanned a string from every `\\u` it met, so a 112 KB call
line of 16,000 escapes took 40 s. Measured as a ratio (4x the escapes, well under 16x the time a
quadratic reader would take), never as an absolute time."""

from __future__ import annotations

import json
import time

import pytest

from records.formats.shard import parse_line
from tests.builders import line

# What a string of a call's arguments repeats: an escaped backslash before `u0041` (which a
# backtracking search read as an escape each time), real escapes, escapes before backslashes.
PATTERNS = ["\\\\u0041", "\\u00e9", "\\u0041\\\\\\\\", '\\u0041\\"']


def _call_line(pattern: str, n: int) -> bytes:
    call = line("call")
    call["call"]["arguments"] = {"q": "PLACE"}
    return json.dumps(call).replace("PLACE", pattern * n).encode()


def _best_of(raw: bytes, times: int, tries: int = 7) -> float:
    """The shortest of `tries` readings of `raw`, `times` over each."""
    best = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        for _ in range(times):
            parse_line(raw)
        best = min(best, time.perf_counter() - began)
    return best


@pytest.mark.parametrize("pattern", PATTERNS)
def test_four_times_the_escapes_take_less_than_eight_times_the_reading(pattern):
    small, large = _call_line(pattern, 16_000), _call_line(pattern, 64_000)
    assert parse_line(large)[0] == "call"
    # The small line read four times over against the large once: as long for a linear reader,
    # four times longer for a quadratic one; under 2 is under 8x the time for 4x the escapes.
    ratio = _best_of(large, 1) / max(_best_of(small, 4), 1e-6)
    assert ratio < 2, f"{4 * ratio:.1f}x the time for 4x the escapes"


def test_a_key_spelled_with_an_escape_among_many_escaped_values_is_still_read_as_go_reads_it():
    call = line("call")
    call["call"]["arguments"] = {"q": "PLACE"}
    raw = json.dumps(call).replace("PLACE", "\\\\u0041" * 16_000)
    # The call's tool spelled again with an escape: Go keeps the last of the two.
    raw = raw.replace('"outcome"', '"tool": "first", "t\\u006fol": "last", "outcome"', 1)
    typ, payload = parse_line(raw.encode())
    assert typ == "call" and payload.tool == "last"
    assert payload.arguments["q"] == "\\u0041" * 16_000
