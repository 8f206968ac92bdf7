"""A turn of thousands of calls is shown a bounded number of items at a time, the rest loaded on
demand; every call stays reachable, each paired with the block that led to it."""

from __future__ import annotations

import re

import pytest

from records.models import Attempt, Turn
from records.queries.trace import ITEMS_PER_TURN
from tests.builders import encode, ingest_bytes, line

pytestmark = pytest.mark.django_db

CALL_ROW = re.compile(r'<div\s+class="call[^"]*" id="call-(\d+)"')
MORE = re.compile(r'hx-get="(/attempts/\d+/turns/\d+/items/\?start=(\d+))"')


def attempt_with_one_turn(calls: int, tool_blocks: int = 0) -> Attempt:
    blocks = [
        {"kind": "tool_call", "tool": "t", "arguments": {"n": n}, "call_id": f"c{n}"}
        for n in range(1, tool_blocks + 1)
    ]
    lines = [line("attempt"), line("turn", index=1, blocks=blocks)]
    lines += [line("call", turn=1, index=n, tool="t", outcome="ok") for n in range(1, calls + 1)]
    lines += [line("verify"), line("session"), line("run")]
    report = ingest_bytes(("modeleval-calls.jsonl", encode(lines)))
    assert not report.refused
    return Attempt.objects.get(run=report.stored[0]["run"])


def _follow(client, html: str) -> list[int]:
    """The call rows of `html` and of every "more of this turn" it leads to, in order."""
    shown = [int(n) for n in CALL_ROW.findall(html)]
    while more := MORE.search(html):
        html = client.get(more.group(1), headers={"HX-Request": "true"}).content.decode()
        assert "<html" not in html  # htmx gets the items alone
        part = [int(n) for n in CALL_ROW.findall(html)]
        assert 0 < len(part) <= ITEMS_PER_TURN
        shown += part
    return shown


def test_a_turn_of_five_thousand_calls_shows_one_bounded_part_and_reaches_the_rest(client, viewer):
    attempt = attempt_with_one_turn(5_000)
    html = client.get(f"/attempts/{attempt.pk}/").content.decode()
    assert [int(n) for n in CALL_ROW.findall(html)] == list(range(1, ITEMS_PER_TURN + 1))
    assert "4,950 more" in html
    more = MORE.search(html)
    assert more and more.group(2) == str(ITEMS_PER_TURN)
    assert _follow(client, html) == list(range(1, 5_001))


def test_the_rest_of_a_turn_is_a_page_of_its_own_without_javascript(client, viewer):
    attempt = attempt_with_one_turn(200)
    turn = Turn.objects.get()
    r = client.get(f"/attempts/{attempt.pk}/turns/{turn.pk}/items/?start=150")
    page = r.content.decode()
    assert r.status_code == 200 and "<html" in page and "back to the attempt" in page
    assert [int(n) for n in CALL_ROW.findall(page)] == list(range(151, 201))
    assert not MORE.search(page)


def test_calls_stay_paired_with_their_blocks_across_the_parts_of_a_turn(client, viewer):
    # 120 tool-call blocks, each leading to its call, then 80 calls no block led to.
    attempt = attempt_with_one_turn(200, tool_blocks=120)
    html = client.get(f"/attempts/{attempt.pk}/").content.decode()
    assert _follow(client, html) == list(range(1, 201))
    turn = Turn.objects.get()
    part = client.get(
        f"/attempts/{attempt.pk}/turns/{turn.pk}/items/?start=100", headers={"HX-Request": "true"}
    ).content.decode()
    # Block 101's arguments ({"n": 101}) sit just before call 101 in the same block.
    block = part.split('<div class="block tool-call">')[1]
    assert "&quot;n&quot;: 101" in block and 'id="call-101"' in block


@pytest.mark.parametrize("start", ["", "-1", "x"])
def test_a_bad_start_is_refused(client, viewer, start):
    attempt = attempt_with_one_turn(3)
    turn = Turn.objects.get()
    r = client.get(f"/attempts/{attempt.pk}/turns/{turn.pk}/items/?start={start}")
    assert r.status_code == 400


def test_a_turn_of_another_attempt_is_not_found(client, viewer):
    attempt = attempt_with_one_turn(3)
    turn = Turn.objects.get()
    r = client.get(f"/attempts/{attempt.pk + 1}/turns/{turn.pk}/items/?start=0")
    assert r.status_code == 404


def test_a_call_deep_in_a_long_turn_is_linked_to_the_part_that_shows_it(client, viewer):
    from records.queries.trace import call_pages

    attempt = attempt_with_one_turn(200, tool_blocks=120)
    turn = Turn.objects.get()
    pages, windows = call_pages(attempt, [30, 101, 150, 9_999])
    assert pages == {30: 1, 101: 1, 150: 1}
    assert windows == {101: (turn.pk, 100), 150: (turn.pk, 100)}
    part = client.get(f"/attempts/{attempt.pk}/turns/{turn.pk}/items/?start=100").content.decode()
    assert 'id="call-101"' in part and 'id="call-150"' in part


def test_a_short_attempt_shows_every_call_and_a_long_turn_stays_bounded_whatever_its_count_says(
    client, viewer
):
    short = attempt_with_one_turn(ITEMS_PER_TURN)
    html = client.get(f"/attempts/{short.pk}/").content.decode()
    assert [int(n) for n in CALL_ROW.findall(html)] == list(range(1, ITEMS_PER_TURN + 1))
    assert not MORE.search(html)
    # The attempt's call count decides only how its calls are read, never what is shown.
    long = attempt_with_one_turn(200)
    Attempt.objects.filter(pk=long.pk).update(call_count=1)
    html = client.get(f"/attempts/{long.pk}/").content.decode()
    assert [int(n) for n in CALL_ROW.findall(html)] == list(range(1, ITEMS_PER_TURN + 1))
    assert "150 more" in html and _follow(client, html) == list(range(1, 201))


def test_each_reached_call_is_on_the_trace_page_of_its_answered_try():
    from records.queries.trace import TURNS_PER_PAGE, call_pages

    # Turns 1 to 30, each with one call; turns 3 and 19 retried: a failed try, then the answer.
    lines = [line("attempt")]
    for i in range(1, 31):
        if i in (3, 19):
            lines.append(line("turn", index=i, status="server_error"))
            lines.append(line("turn", index=i, **{"try": 2}))
        else:
            lines.append(line("turn", index=i))
        lines.append(line("call", turn=i, index=i, tool="t", outcome="ok"))
    lines += [line("verify"), line("session"), line("run")]
    report = ingest_bytes(("modeleval-tries.jsonl", encode(lines)))
    assert not report.refused and TURNS_PER_PAGE == 20
    attempt = Attempt.objects.get(run=report.stored[0]["run"])
    pages, windows = call_pages(attempt, [1, 3, 17, 18, 19, 30])
    # Turn 18 is the 19th line after turn 3's retry; turn 19's answer the 21st.
    assert pages == {1: 1, 3: 1, 17: 1, 18: 1, 19: 2, 30: 2} and windows == {}
