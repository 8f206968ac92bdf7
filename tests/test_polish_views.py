"""What a new user tripped on, at the view: the upload page's list of recent uploads catching up,
the conformance matrix's failures first, the surfaces comparison's choice, the runs comparison's
unchanged rows folded away."""

from __future__ import annotations

import re

import pytest

from records.models import Upload

pytestmark = pytest.mark.django_db


def test_a_finished_poll_from_the_upload_page_brings_its_recent_uploads(client, viewer):
    up = Upload.objects.create(source="web", status="done", summary={"refused": [{"file": "x"}]})
    polled = client.get(f"/uploads/{up.pk}/progress/?recent=1", HTTP_HX_REQUEST="true")
    body = polled.content.decode()
    assert '<section id="recent-uploads" hx-swap-oob="true">' in body
    # An upload's own page has no such list: its poll answers the state alone.
    alone = client.get(f"/uploads/{up.pk}/progress/", HTTP_HX_REQUEST="true")
    assert 'id="recent-uploads"' not in alone.content.decode()


def test_an_unfinished_poll_asks_again_for_the_recent_uploads_but_brings_none_yet(client, viewer):
    up = Upload.objects.create(source="web", status="queued")
    body = client.get(f"/uploads/{up.pk}/progress/?recent=1").content.decode()
    assert f'hx-get="/uploads/{up.pk}/progress/?recent=1"' in body
    assert 'id="recent-uploads"' not in body


def test_the_surfaces_comparison_keeps_the_surfaces_chosen_against_the_baseline_chosen(
    client, viewer, demo
):
    from records.queries.compare import compare_surfaces

    run = demo["run-2026-11-16-a1b2c3"]
    every = compare_surfaces(run)
    assert any({s.row.surface for s in g.sides} >= {"dynamic", "meta"} for g in every)
    chosen = compare_surfaces(run, ["meta", "dynamic"], "meta")
    assert chosen and all(
        [s.row.surface for s in g.sides] in (["meta", "dynamic"], ["meta"], ["dynamic"])
        for g in chosen
    )
    two = [g for g in chosen if len(g.sides) == 2]
    assert two and all(g.sides[0].row.surface == "meta" for g in two)
    # The page: its state in the address, the choice shown in its form.
    url = f"/compare/?kind=surfaces&run={run.pk}&surface=meta&surface=dynamic&baseline_surface=meta"
    html = client.get(url).content.decode()
    assert 'value="meta" checked' in html and 'value="individual">' in html
    assert re.search(r'<option value="meta"\s+selected>meta</option>', html)
    assert re.search(r"Δ is against <strong\s*>meta</strong>, the\s+baseline surface", html)


def test_a_baseline_surface_not_among_those_chosen_is_a_bad_request(client, viewer, demo):
    run = demo["run-2026-11-16-a1b2c3"]
    r = client.get(f"/compare/?kind=surfaces&run={run.pk}&surface=dynamic&baseline_surface=meta")
    assert r.status_code == 400 and "baseline_surface" in r["X-Error"]
    assert client.get(f"/compare/?kind=surfaces&run={run.pk}&surface=sideways").status_code == 400


def test_a_hit_names_the_runners_ending_and_the_scorers_verdict_apart(client, viewer, demo):
    html = client.get("/search/?verdict=completed").content.decode()
    assert ">runner:</span>" in html and ">scorer:</span>" in html
    assert ">verdict</span>" not in html and ">ended</span>" not in html
    assert "Ended by (runner)" in html and "Verdict (scorer)" in html
