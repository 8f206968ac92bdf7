"""One integer parser for every number a request names (issue 45, B16-B18): Unicode digits, a
power written out, a number past what the databases hold are each a 400 (JSON on the API) or a
404 for an address, never a 500, on every address the site has."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver

from records.formats.numbers import MAX_WHOLE, NotWhole, parse_whole
from records.models import ApiToken, Attempt, Run, Upload
from tests.builders import FIXTURE_SHARD, ingest_bytes

HOSTILE = ["²", "٣", "10^20", "99999999999999999999", "9223372036854775808", "-1", " "]
# Every parameter that names a number somewhere on the site.
NUMBER_PARAMETERS = [
    "wait", "start", "run", "page", "per_page", "before", "after", "key", "baseline", "candidate",
]  # fmt: skip


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
