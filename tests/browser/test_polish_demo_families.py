"""The demo loads a sealed replay and conformance runs beside its model runs, so a newcomer sees
every family on the first visit."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from records.models import ConformanceRun, ObsReplay, Run, Upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1440, 390])
def test_the_demo_shows_every_family(browser, live_server, settings, width):
    settings.EVALDASH_PUBLIC_READ = True
    call_command("demo", verbosity=0)
    assert Run.objects.count() == 3
    assert ObsReplay.objects.count() == 1 and ConformanceRun.objects.count() == 2
    upload = Upload.objects.get(source="demo")
    assert len(upload.summary["conformance_runs"]) == 2 and len(upload.summary["replays"]) == 1

    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/replays/")
        assert page.locator("main table tbody tr").count() >= 1
        assert "FAIL" in page.locator("main").inner_text()
        page.goto(live_server.url + "/conformance/")
        text = page.locator("main").inner_text()
        assert "python/langgraph" in text and "python/openai-agents" in text
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
        call_command("demo", if_empty=True, verbosity=0)  # a second start loads nothing twice
        assert ConformanceRun.objects.count() == 2 and ObsReplay.objects.count() == 1
    finally:
        context.close()
