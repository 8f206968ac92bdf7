"""What a new user tripped on, at the view: the upload page's list of recent uploads catching up,
the conformance matrix's failures first, the surfaces comparison's choice, the runs comparison's
unchanged rows folded away."""

from __future__ import annotations

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
