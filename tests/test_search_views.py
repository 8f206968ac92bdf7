"""`/search/`, `/search.json` and `/search.csv`: one query's parameters on all three, errors a
user can cause as 400s naming the parameter, untrusted text escaped, a constant number of
queries."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import override_settings
from django.urls import reverse

from records.models import Attempt
from tests.searched import refused

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("store")]

PUBLIC = override_settings(EVALDASH_PUBLIC_READ=True)


@PUBLIC
def test_the_json_answer_names_each_attempt_and_its_matching_calls(client, store):
    attempts, calls = store.select(call=lambda c: c["outcome"] == "refused:invalid_params")
    got = client.get("/search.json", {"outcome": "refused:invalid_params", "per_page": 500})
    assert got.status_code == 200
    body = got.json()
    assert body["count"] == len(attempts) and body["calls"] == len(calls)
    listed = {(a["run_id"], a["attempt"], i) for a in body["attempts"] for i in a["calls"]}
    assert listed == calls
    first = body["attempts"][0]
    assert set(first) == {
        "run_id",
        "attempt",
        "case",
        "model",
        "surface",
        "repeat",
        "url",
        "calls",
        "labels",
    }
    pk = Attempt.objects.get(run__run_id=first["run_id"], key=first["attempt"]).pk
    assert first["url"] == f"http://testserver{reverse('records:attempt', args=[pk])}"
    assert body["facets"]["outcome"] == {"refused:invalid_params": len(calls)}
    assert body["next"] is None


@PUBLIC
def test_the_json_answer_pages_with_a_next_address(client, store):
    attempts, _ = store.select(call=refused)
    first = client.get("/search.json", {"outcome": "refused", "per_page": 7}).json()
    assert len(first["attempts"]) == 7 and first["count"] == len(attempts)
    seen = []
    url = first["next"]
    seen += [(a["run_id"], a["attempt"]) for a in first["attempts"]]
    while url:
        page = client.get(url.removeprefix("http://testserver")).json()
        seen += [(a["run_id"], a["attempt"]) for a in page["attempts"]]
        url = page["next"]
    assert sorted(seen) == sorted(attempts) and len(seen) == len(set(seen))


@PUBLIC
@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"colour": "red"}, "colour"),
        ({"observed": "maybe"}, "observed"),
        ({"page": "0"}, "page"),
        ({"page": str(10**18)}, "page"),  # past what the database's OFFSET takes
        ({"per_page": "501"}, "per_page"),
        ({"verdict": "great"}, "verdict"),
        ({"turn_status": "sleepy"}, "turn_status"),
    ],
)
def test_it_refuses_an_unknown_or_malformed_parameter_naming_it(client, query, named):
    answer = client.get("/search.json", query)
    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/json"
    assert named in answer.json()["error"]
    for address in ("/search/", "/search.csv"):
        page = client.get(address, query)
        assert page.status_code == 400
        assert named in page["X-Error"]


@PUBLIC
def test_the_csv_lists_every_matching_call_beside_its_attempt(client, store):
    _, calls = store.select(q="default branch")
    answer = client.get("/search.csv", {"q": "default branch"})
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    assert {(r["run_id"], r["attempt"], int(r["call"])) for r in rows if r["call"]} == calls
    assert all("branch" in r["snippet"].lower() for r in rows if r["call"])


@PUBLIC
@pytest.mark.parametrize("batch_rows", [4000, 5])
@pytest.mark.parametrize("params", [{"q": "default branch"}, {"q": "project"}, {}])
def test_the_csv_is_its_groups_written_whoever_folds_the_snippets(
    client, monkeypatch, batch_rows, params
):
    # The snippets are found in the request and folded where the rows are written: by the
    # writer process (batches of 5 rows) or in line; the bytes of the groups folded here.
    from records import csv_writer
    from records.formats.spreadsheet import group_lines
    from records.queries.search import ATTEMPT_COLUMNS, CALL_COLUMNS, Search, SearchQuery

    monkeypatch.setattr(csv_writer, "BATCH_ROWS", batch_rows)
    answer = client.get("/search.csv", params)
    body = b"".join(answer.streaming_content).decode()
    groups = list(Search(SearchQuery(**params)).groups())
    header = [*ATTEMPT_COLUMNS, *CALL_COLUMNS]
    assert body == "".join(group_lines(groups, len(CALL_COLUMNS), header))
    snippets = [row[-1] for _, rows in groups for row in rows]
    assert all(isinstance(s, str) for s in snippets)
    assert any(snippets) == bool(params)


@PUBLIC
def test_the_page_escapes_and_isolates_untrusted_text_in_snippets(client):
    page = client.get("/search/", {"q": "alert timeout", "run": "run-hostile"})
    html = page.content.decode()
    assert page.status_code == 200
    assert "<script>alert" not in html
    assert "&lt;script&gt;<mark>alert</mark>" in html
    assert "<bdi>&lt;script&gt;<mark>alert</mark>(&quot;pwn&quot;)&lt;/script&gt;" in html
    assert 'href="/attempts/' in html and '#call-2"' in html


@PUBLIC
def test_a_facet_value_links_to_the_query_narrowed_by_it(client, store):
    page = client.get("/search/", {"outcome": "refused"})
    facets = {f["key"]: f for f in page.context["facets"]}
    tool = facets["tool"]["values"][0]
    narrowed = client.get(f"/search/?{tool['query']}")
    attempts, _ = store.select(call=lambda c: refused(c) and c["tool"] == tool["value"])
    assert narrowed.context["count"] == len(attempts) == tool["count"] or tool["count"] >= len(
        attempts
    )
    assert f'href="/search/?{tool["query"].replace("&", "&amp;")}"' in page.content.decode()


@PUBLIC
def test_the_page_reads_the_same_number_of_queries_for_one_run_and_for_all(
    client, django_assert_num_queries
):
    client.get("/search/", {"q": "project"})  # warm: sessions, content types
    with django_assert_num_queries(3) as everything:
        client.get("/search/", {"q": "project", "outcome": "ok"})
    with django_assert_num_queries(len(everything.captured_queries)):
        client.get("/search/", {"q": "project", "outcome": "ok", "run": "run-2026-11-23-f00dfa"})


@PUBLIC
def test_an_htmx_request_gets_the_results_alone(client):
    page = client.get("/search/", {"q": "project"}, headers={"HX-Request": "true"})
    html = page.content.decode()
    assert html.lstrip().startswith('<section id="search-results"')
    assert page["Vary"] and "HX-Request" in page["Vary"]


@PUBLIC
def test_a_page_past_the_last_shows_the_last_page_or_an_empty_json_page(client, store):
    every = client.get("/search.json", {"per_page": 500}).json()["count"]
    last = -(-every // 25)
    html = client.get("/search/", {"page": 999_999})
    assert html.status_code == 200
    assert html.context["page"].number == last
    answer = client.get("/search.json", {"page": 999_999, "per_page": 25}).json()
    assert answer["count"] == every and answer["attempts"] == [] and answer["next"] is None
