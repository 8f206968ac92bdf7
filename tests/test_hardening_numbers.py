"""One integer parser for every number a request names (issue 45, B16-B18): Unicode digits, a
power written out, a number past what the databases hold are each a 400 (JSON on the API) or a
404 for an address, never a 500, on every address the site has."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver

from records.formats.numbers import MAX_WHOLE, NotWhole, parse_whole
from records.models import Annotation, ApiToken, Attempt, Run, Upload
from tests.builders import FIXTURE_SHARD, ingest_bytes

HOSTILE = ["²", "٣", "10^20", "99999999999999999999", "9223372036854775808", "-1", " "]
# Every parameter that names a number somewhere on the site.
NUMBER_PARAMETERS = [
    "wait", "start", "run", "page", "per_page", "before", "after", "key", "baseline", "candidate",
    "attempt",
]  # fmt: skip
# Addresses the POST walk leaves alone: logging out ends the walk's session, the login form is
# throttled per account, and a run's deletion (which reads no number) would delete the run.
NOT_POSTED = {"logout", "login", "run-delete"}


@pytest.mark.parametrize("raw", ["²", "٣", "１", "10^20", "1e3", "+1", "-1", "", "0x10", "1_000"])
def test_the_parser_takes_ascii_digits_only(raw):
    with pytest.raises(NotWhole):
        parse_whole(raw)


def test_the_parser_is_bounded_to_what_both_databases_hold():
    assert parse_whole(str(MAX_WHOLE)) == MAX_WHOLE < 2**63
    with pytest.raises(NotWhole, match="from 0 to 1000000000000000000"):
        parse_whole(str(MAX_WHOLE + 1))
    with pytest.raises(NotWhole):
        parse_whole("9" * 5000)  # refused before any conversion
    assert parse_whole(" 42 ") == 42 and parse_whole("-5", minimum=-10) == -5


def _patterns(resolvers=None, prefix: str = ""):
    """Every address of the site as (route, pattern name)."""
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        route = str(entry.pattern)
        if isinstance(entry, URLResolver):
            if route.startswith("admin/"):
                continue  # Django's own admin site (its login is covered by the throttle tests)
            yield from _patterns(entry.url_patterns, prefix + route)
        elif isinstance(entry, URLPattern):
            yield prefix + route, entry.name


PART = re.compile(r"<(\w+):(\w+)>")


def _address(route: str, values: dict[str, str], ids: str | None = None) -> str:
    """The route with its parts filled: ids (and turns, calls, blocks) from `values` or `ids`."""

    def fill(m: re.Match) -> str:
        kind, name = m.groups()
        if kind == "id":
            return ids or values.get(route.split("/")[0], "1") if name == "pk" else ids or "1"
        if kind.endswith("_tab"):
            return kind.removesuffix("_tab")
        return {"fmt": "json", "raw_field": "arguments", "run_id": values["run_id"]}.get(
            kind, "arguments"
        )

    return "/" + PART.sub(fill, route)


@pytest.fixture
def site(client, django_user_model, db):
    ingest_bytes(("modeleval-1.jsonl", FIXTURE_SHARD.read_bytes()))
    run, attempt = Run.objects.get(), Attempt.objects.first()
    client.force_login(django_user_model.objects.create_superuser("root", "r@x.org", "pw"))
    _, raw = ApiToken.issue("ci")
    values = {
        "runs": str(run.pk),
        "attempts": str(attempt.pk),
        "uploads": str(Upload.objects.get().pk),
        "run_id": run.run_id,
    }
    return client, {"Authorization": f"Bearer {raw}"}, values


def _refused_well(r, path: str) -> str | None:
    """Why an answer to a hostile number is wrong, or None."""
    if r.status_code >= 500:
        return f"{r.status_code}"
    if path.startswith("/api/") and r["Content-Type"] != "application/json":
        return f"{r.status_code} as {r['Content-Type']}"
    return None


def test_every_address_answers_hostile_numbers_in_its_parameters_without_a_5xx(site):
    client, bearer, values = site
    wrong = []
    for route, name in _patterns():
        path = _address(route, values)
        for parameter in NUMBER_PARAMETERS:
            for value in HOSTILE:
                r = client.get(path, {parameter: value}, headers=bearer)
                if why := _refused_well(r, path):
                    wrong.append(f"{name} {path}?{parameter}={value!r}: {why}")
    assert wrong == []


def test_every_address_answers_hostile_numbers_posted_in_a_form_or_a_json_body_without_a_5xx(site):
    client, bearer, values = site
    wrong = []
    for route, name in _patterns():
        if name in NOT_POSTED:
            continue
        path = _address(route, values)
        for value in HOSTILE:
            # Every number the site reads at once, as a form and (for the API) as a JSON body;
            # the annotation form's target needs its attempt, so that field is read too.
            fields = dict.fromkeys(NUMBER_PARAMETERS, value) | {"target": "attempt", "note": "n"}
            sent = [client.post(path, fields, headers=bearer)]
            if path.startswith("/api/"):
                sent.append(
                    client.post(path, fields, content_type="application/json", headers=bearer)
                )
            for r in sent:
                if why := _refused_well(r, path):
                    wrong.append(f"POST {name} {path} with {value!r}: {why}")
    assert wrong == []


# Every integer a form of the site reads from a request, by address and field: each hostile
# value is a 400 there (JSON naming the field on the API), never a 500, never taken as a number.
INTEGER_FIELDS = [
    ("/api/v1/annotations", "attempt"),
    ("/api/v1/annotations", "page"),
    ("/api/v1/annotations", "per_page"),
    ("/review/", "page"),
    ("/failures/", "page"),
    ("/failures.json", "page"),
    ("/failures.csv", "page"),
]
REFUSED = [v for v in HOSTILE if v.strip()] + ["１", "+1", "1e3", "0"]


@pytest.mark.parametrize(("path", "field"), INTEGER_FIELDS)
def test_each_integer_a_query_string_names_is_refused_400_for_every_hostile_value(
    site, path, field
):
    client, bearer, _ = site
    wrong = []
    for value in REFUSED:
        r = client.get(path, {field: value}, headers=bearer)
        if r.status_code != 400:
            wrong.append(f"{path}?{field}={value!r}: {r.status_code}")
        elif path.startswith("/api/") and field not in r.json()["fields"]:
            wrong.append(f"{path}?{field}={value!r}: {r.json()} does not name {field}")
    assert wrong == []


def test_a_hostile_attempt_posted_to_the_annotation_form_is_a_400_and_stores_nothing(site):
    client, _, values = site
    wrong = []
    for value in REFUSED:
        for headers in ({}, {"HX-Request": "true"}):
            r = client.post(
                "/annotations/",
                {"target": "attempt", "attempt": value, "note": "n", "next": "/"},
                headers=headers,
            )
            expected = 422 if headers else 400
            if r.status_code != expected:
                wrong.append(f"attempt={value!r} {headers}: {r.status_code}")
    assert wrong == []
    assert not Annotation.objects.exists()
    # A valid attempt is still written, as before.
    r = client.post(
        "/annotations/", {"target": "attempt", "attempt": values["attempts"], "note": "n"}
    )
    assert r.status_code == 302 and Annotation.objects.get().attempt_id == int(values["attempts"])


@pytest.mark.parametrize("value", [*REFUSED, 10**20, -1, 0, 2**63])
def test_a_hostile_attempt_in_the_apis_json_body_is_a_json_400_naming_attempt(site, value):
    client, bearer, _ = site
    r = client.post(
        "/api/v1/annotations",
        {"target": "attempt", "attempt": value, "note": "n"},
        content_type="application/json",
        headers=bearer,
    )
    assert r.status_code == 400 and r["Content-Type"] == "application/json"
    assert "attempt" in r.json()["fields"] and "attempt" in r.json()["error"]
    assert not Annotation.objects.exists()


def test_the_annotations_api_still_takes_and_lists_a_valid_attempt(site):
    client, bearer, values = site
    attempt = int(values["attempts"])
    for sent in (attempt, str(attempt)):
        r = client.post(
            "/api/v1/annotations",
            {"target": "attempt", "attempt": sent, "note": f"n {sent!r}"},
            content_type="application/json",
            headers=bearer,
        )
        assert r.status_code == 201 and r.json()["attempt"] == attempt
    r = client.get(
        "/api/v1/annotations", {"attempt": str(attempt), "per_page": "1"}, headers=bearer
    )
    assert r.status_code == 200 and r.json()["count"] == 2 and len(r.json()["annotations"]) == 1
    assert "page=2" in r.json()["next"]


def test_every_address_answers_hostile_numbers_in_its_path_without_a_5xx(site):
    client, bearer, values = site
    wrong = []
    for route, name in _patterns():
        if "<id:" not in route:
            continue
        for value in ["99999999999999999999", "9223372036854775807", str(MAX_WHOLE)]:
            path = _address(route, values, ids=value)
            r = client.get(path, headers=bearer)
            if why := _refused_well(r, path):
                wrong.append(f"{name} {path}: {why}")
            elif not 400 <= r.status_code < 500:
                wrong.append(f"{name} {path}: {r.status_code}, not a refusal")
    assert wrong == []


@pytest.mark.parametrize("value", ["²", "٣", "99999999999999999999"])
def test_a_hostile_wait_is_a_json_400_naming_wait_on_the_upload_addresses(site, value):
    client, bearer, values = site
    r = client.get(f"/api/v1/uploads/{values['uploads']}", {"wait": value}, headers=bearer)
    assert r.status_code == 400 and r.json()["field"] == "wait"
    before = Upload.objects.count()
    r = client.post(
        f"/api/v1/uploads?wait={value}",
        {"file": [SimpleUploadedFile("modeleval-2.jsonl", b"{}")]},
        headers=bearer,
    )
    assert r.status_code == 400 and r.json()["field"] == "wait"
    assert Upload.objects.count() == before


@pytest.mark.parametrize(
    "path",
    [
        "/attempts/{attempts}/turns/1/items/?start=10^20",
        "/attempts/{attempts}/turns/1/items/?start=100000000000000000000",
        "/publish/blocks.md?run=²",
        "/publish/blocks.md?run=99999999999999999999",
        "/publish/model-results.json?run=٣",
        "/runs/{runs}/flips/?before=99999999999999999999",
        "/compare/?baseline=99999999999999999999",
        "/attempts/{attempts}/?page=²",
    ],
)
def test_the_numbers_the_issue_names_are_refused_400_naming_the_field(site, path):
    client, _, values = site
    r = client.get(path.format(**values))
    assert r.status_code == 400
    assert "whole number" in r.content.decode() or "a run number" in r.content.decode()
