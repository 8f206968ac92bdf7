"""The login throttle, the attempt page and its exports under hostile input, and names that
carry bidi controls or look-alike characters."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc

import pytest

from records.models import Attempt, AuditEvent, Call, Run, Turn
from tests.builders import FIXTURES, encode, ingest_bytes, line
from tests.isolation import RLO, Unisolated

pytestmark = pytest.mark.django_db


# --- login throttling ----------------------------------------------------------------------------


def _fail(client, username: str, **meta: str) -> None:
    r = client.post("/login/", {"username": username, "password": "wrong"}, **meta)
    assert r.status_code == 200


@pytest.mark.parametrize("spelling", ["ann ", "ann\t", "ann\u00a0", "\uff41\uff4e\uff4e"])
def test_it_refuses_a_locked_account_under_every_spelling_the_login_form_reads_as_it(
    client, django_user_model, spelling
):
    django_user_model.objects.create_user("ann", password="right-password-1")
    for _ in range(5):
        _fail(client, "ann")
    r = client.post("/login/", {"username": spelling, "password": "right-password-1"})
    assert r.status_code == 429
    assert "_auth_user_id" not in client.session


def test_wrong_passwords_sent_through_variant_spellings_count_against_the_one_account(
    client, django_user_model
):
    django_user_model.objects.create_user("ann", password="right-password-1")
    for spelling in ["ann ", "ann\t", "ann\u00a0", "\uff41\uff4e\uff4e", " ann"]:
        _fail(client, spelling)
    assert set(
        AuditEvent.objects.filter(action="login_failed").values_list("detail__username", flat=True)
    ) == {"ann"}
    r = client.post("/login/", {"username": "ann", "password": "right-password-1"})
    assert r.status_code == 429


def test_behind_the_proxy_one_clients_failures_do_not_lock_out_the_others(
    client, django_user_model, settings
):
    settings.EVALDASH_BEHIND_TLS_PROXY = True
    django_user_model.objects.create_user("bob", password="right-password-2")
    proxy = {"REMOTE_ADDR": "10.0.0.1"}
    for n in range(20):
        _fail(client, f"guess{n}", HTTP_X_FORWARDED_FOR="203.0.113.9", **proxy)
    r = client.post(
        "/login/",
        {"username": "bob", "password": "right-password-2"},
        HTTP_X_FORWARDED_FOR="198.51.100.7",
        **proxy,
    )
    assert r.status_code == 302
    # The guessing client itself is refused, whatever it puts in front of the proxy's entry.
    r = client.post(
        "/login/",
        {"username": "bob", "password": "right-password-2"},
        HTTP_X_FORWARDED_FOR="198.51.100.7, 203.0.113.9",
        **proxy,
    )
    assert r.status_code == 429


def test_behind_the_proxy_without_a_forwarded_address_it_locks_per_account_only(
    client, django_user_model, settings
):
    settings.EVALDASH_BEHIND_TLS_PROXY = True
    django_user_model.objects.create_user("bob", password="right-password-2")
    for n in range(25):
        _fail(client, f"guess{n}", REMOTE_ADDR="10.0.0.1")
    r = client.post(
        "/login/", {"username": "bob", "password": "right-password-2"}, REMOTE_ADDR="10.0.0.1"
    )
    assert r.status_code == 302


def test_without_a_proxy_a_forwarded_header_is_the_clients_own_text_and_ignored(
    client, django_user_model
):
    django_user_model.objects.create_user("bob", password="right-password-2")
    for n in range(20):
        _fail(client, f"guess{n}", REMOTE_ADDR="192.0.2.5", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    r = client.post(
        "/login/",
        {"username": "bob", "password": "right-password-2"},
        REMOTE_ADDR="192.0.2.5",
        HTTP_X_FORWARDED_FOR="198.51.100.99",
    )
    assert r.status_code == 429


# --- a large attempt -----------------------------------------------------------------------------

BIG = "<b>tag</b> & text " * 3_000  # 54,000 characters, escaping lengthens it


def _big_attempt(turns: int = 25):
    lines = [line("attempt")]
    for i in range(1, turns + 1):
        lines.append(
            line(
                "turn",
                index=i,
                blocks=[
                    {"kind": "text", "text": f"turn {i} says " + BIG},
                    {"kind": "tool_call", "tool": "t", "arguments": {"q": BIG}, "call_id": f"c{i}"},
                ],
            )
        )
        lines.append(line("call", turn=i, index=i, result={"data": BIG}, text=f"read {i} " + BIG))
    lines += [line("verify"), line("session"), line("run")]
    report = ingest_bytes(("modeleval-big.jsonl", encode(lines)))
    assert not report.refused
    return Attempt.objects.get()


def test_a_large_attempts_page_is_bounded_and_pages_its_turns(client, viewer):
    attempt = _big_attempt()
    stored = sum(len(BIG) * 4 for _ in range(25))
    r = client.get(f"/attempts/{attempt.pk}/")
    html = r.content.decode()
    assert len(html) < stored / 8
    assert "page 1 of 2" in html and "turn 1 says" in html and "turn 21 says" not in html
    assert "&lt;b&gt;tag&lt;/b&gt;" in html and "<b>tag" not in html
    later = client.get(f"/attempts/{attempt.pk}/?page=2").content.decode()
    assert "turn 21 says" in later and "turn 25 says" in later and "turn 1 says" not in later
    # htmx asks for the trace alone when paging.
    part = client.get(
        f"/attempts/{attempt.pk}/?page=2", headers={"HX-Request": "true", "HX-Target": "trace"}
    ).content.decode()
    assert part.startswith('<div id="trace"') and "turn 21 says" in part


def test_each_body_a_page_cuts_short_is_whole_at_its_own_address(client, viewer):
    attempt = _big_attempt(turns=1)
    turn, call = Turn.objects.get(), Call.objects.get()
    html = client.get(f"/attempts/{attempt.pk}/").content.decode()
    block_url = f"/attempts/{attempt.pk}/turns/{turn.pk}/blocks/0/"
    text_url = f"/attempts/{attempt.pk}/calls/{call.pk}/text/"
    assert f'hx-get="{block_url}"' in html and f'hx-get="{text_url}"' in html
    whole = client.get(block_url, headers={"HX-Request": "true"}).content.decode()
    assert whole.startswith("<pre") and whole.count("&lt;b&gt;tag&lt;/b&gt;") == 3_000
    page = client.get(text_url).content.decode()
    assert "<html" in page and page.count("&lt;b&gt;tag&lt;/b&gt;") == 3_000
    assert client.get(f"/attempts/{attempt.pk}/calls/{call.pk}/secret/").status_code == 404


def _peak_while_reading(client, url: str) -> tuple[int, bytes]:
    tracemalloc.start()
    try:
        r = client.get(url)
        assert r.streaming
        # Only the CSV is kept (it is small): keeping the JSON would measure the test's memory.
        body = [piece for piece in r.streaming_content if url.endswith(".csv")]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, b"".join(body)


def test_a_large_attempts_exports_hold_a_few_lines_at_a_time(client, viewer):
    attempt = _big_attempt(turns=40)
    stored = 40 * 4 * len(BIG)
    peak, _ = _peak_while_reading(client, f"/attempts/{attempt.pk}.json")
    assert peak < stored / 2
    peak, body = _peak_while_reading(client, f"/attempts/{attempt.pk}.csv")
    assert peak < stored / 2 and body.count(b"\n") == 41


def test_a_large_attempts_exports_stream_every_line_whole(client, viewer):
    attempt = _big_attempt()
    r = client.get(f"/attempts/{attempt.pk}.json")
    assert r.streaming
    doc = json.loads(b"".join(r.streaming_content))
    assert [t["turn"] for t in doc["turns"]] == list(range(1, 26))
    assert doc["turns"][24]["blocks"][0]["text"] == "turn 25 says " + BIG
    assert doc["turns"][24]["calls"][0]["text"] == "read 25 " + BIG
    assert doc["verify"][0]["name"] == "the issue exists"
    r = client.get(f"/attempts/{attempt.pk}.csv")
    assert r.streaming
    rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert [row["call_index"] for row in rows] == [str(i) for i in range(1, 26)]


def test_a_turn_without_calls_does_not_drop_the_call_columns_from_the_csv(client, viewer):
    lines = [line("attempt"), line("turn", index=1), line("turn", index=2), line("call", turn=2)]
    lines += [line("session"), line("run")]
    ingest_bytes(("modeleval-x.jsonl", encode(lines)))
    body = b"".join(client.get(f"/attempts/{Attempt.objects.get().pk}.csv").streaming_content)
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert [(r["turn"], r["call_index"]) for r in rows] == [("1", ""), ("2", "1")]


# --- bidi controls in names ----------------------------------------------------------------------


def _hostile_run():
    # A right-to-left override (written \u202e) inside every text the shard supplies.
    rlo = (FIXTURES / "modelrecord" / "modeleval-rlo.jsonl").read_bytes()
    report = ingest_bytes(("modeleval-rlo.jsonl", rlo))
    assert not report.refused, report.refused
    return Run.objects.get()


def test_every_text_a_shard_wrote_is_isolated_on_every_page_of_its_run(client, viewer):
    run = _hostile_run()
    attempt = run.attempts.get()
    pages = ["/", f"/runs/{run.pk}/", f"/attempts/{attempt.pk}/"]
    pages += [f"/runs/{run.pk}/{tab}/" for tab in ("scores", "cost", "attempts", "sessions")]
    seen, unisolated = 0, {}
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, url
        html = r.content.decode()
        seen += html.count(RLO)
        parser = Unisolated()
        parser.feed(html)
        if parser.found:
            unisolated[url] = parser.found
    assert unisolated == {}
    assert seen > 20


def test_names_that_differ_only_by_invisible_characters_or_normalisation_are_marked(client, viewer):
    models = ["fake:perfect", "fake:per\u200bfect", "\uff46ake:perfect", "fake:other"]
    lines = [line("attempt", id=f"a{n}", model=m) for n, m in enumerate(models)]
    lines += [line("session"), line("run")]
    assert not ingest_bytes(("modeleval-alike.jsonl", encode(lines))).refused
    run = Run.objects.get()
    for url in ["/", f"/runs/{run.pk}/attempts/"]:
        html = client.get(url).content.decode()
        assert html.count('class="badge warn lookalike"') == 3, url
        assert "U+200B" in html and "U+FF46" in html
    assert "fake:other</bdi></code> <span" not in html


def test_a_name_alone_in_its_table_carries_no_look_alike_marker():
    from records.templatetags.evaldash import lookalike, lookalikes

    assert lookalikes(["a\u200bb", "ab", "c"]) == {"a\u200bb", "ab"}
    assert lookalike("c", ["a\u200bb", "ab", "c"]) == ""
