"""Untrusted text in a page's <title> and in the flips page's crumb is isolated (issue 45,
B14): a title holds no element, so the name sits between FSI and PDI (U+2068, U+2069)."""

from __future__ import annotations

import pytest
from django.template import engines

from records.models import Run
from tests.builders import FIXTURES, ingest_bytes
from tests.isolation import RLO, Unisolated

pytestmark = pytest.mark.django_db


def _render(text: str) -> str:
    return engines["django"].from_string("{% load evaldash %}{{ v|isolated }}").render({"v": text})


def test_the_isolated_filter_encloses_the_text_and_drops_isolate_controls_of_its_own():
    assert _render(f"run{RLO}x") == f"\u2068run{RLO}x\u2069"
    # A PDI of the text's own would end the isolate before its override.
    assert _render(f"\u2069{RLO}<b>") == f"\u2068{RLO}&lt;b&gt;\u2069"


def test_the_check_finds_an_override_bare_in_a_title():
    parser = Unisolated()
    parser.feed(f"<title>Run {RLO}evil · evaldash</title><title>Run \u2068{RLO}ok\u2069</title>")
    assert parser.found == [f"<title>Run {RLO}evil · evaldash"]


def test_every_page_of_a_hostile_run_isolates_its_names_in_its_title_and_crumbs(
    client, django_user_model
):
    rlo = (FIXTURES / "modelrecord" / "modeleval-rlo.jsonl").read_bytes()
    assert not ingest_bytes(("modeleval-rlo.jsonl", rlo)).refused
    run = Run.objects.get()
    attempt = run.attempts.get()
    client.force_login(django_user_model.objects.create_superuser("root", "r@x.org", "pw"))
    pages = [
        f"/runs/{run.pk}/",
        *(f"/runs/{run.pk}/{tab}/" for tab in ("scores", "cost", "attempts", "sessions")),
        f"/runs/{run.pk}/flips/",
        f"/runs/{run.pk}/matrix/",
        f"/runs/{run.pk}/delete/",
        f"/attempts/{attempt.pk}/",
    ]
    found, titled = {}, 0
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, url
        html = r.content.decode()
        title = html.split("<title>", 1)[1].split("</title>", 1)[0]
        titled += RLO in title
        parser = Unisolated()
        parser.feed(html)
        if parser.found:
            found[url] = parser.found
    assert found == {}
    assert titled >= len(pages) - 1  # the names are in the titles the check looked at
