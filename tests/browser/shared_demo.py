"""One live server and one load of the demo data per test module, for modules whose tests only
read: loading the demo and starting a server for every test would cost more than the tests do.

A module uses it by importing `site` and `pg` as fixtures and marking its tests
`django_db` (not transactional): the data is committed once, before any test's transaction, read
by every test (the server thread sees what was committed) and flushed when the module ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.test import override_settings

from records.devtools.synth import demo_files
from records.ingest import ingest, inputs_from_paths
from records.models import Upload


@dataclass
class Site:
    base: str
    runs: dict  # run_id -> Run


@pytest.fixture(scope="module")
def site(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Site]:
    from pytest_django.live_server_helper import LiveServer

    from records.models import Run

    with (
        django_db_blocker.unblock(),
        override_settings(EVALDASH_PUBLIC_READ=True, ALLOWED_HOSTS=["localhost"]),
    ):
        ingest(
            inputs_from_paths(demo_files(tmp_path_factory.mktemp("demo"))),
            Upload.objects.create(source="demo"),
        )
        server = LiveServer("localhost")
        try:
            yield Site(base=server.url, runs={r.run_id: r for r in Run.objects.all()})
        finally:
            server.stop()
            call_command("flush", interactive=False, verbosity=0)


@contextmanager
def watched_page(browser, base: str, runs: dict) -> Iterator[object]:
    """A fresh page (its own cookies) on the server at `base`, 1440 px wide; `page.problems`
    collects script errors, `page.base` and `page.runs` say where it is and what is there."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.problems = problems
    page.base = base
    page.runs = runs
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def pg(browser, site) -> Iterator[object]:
    """A fresh page on the module's server."""
    with watched_page(browser, site.base, site.runs) as page:
        yield page


def run_pk(site: Site, run_id: str) -> int:
    return site.runs[run_id].pk
