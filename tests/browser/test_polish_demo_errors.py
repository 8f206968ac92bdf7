"""The demo, served with the settings scripts/serve gives it, shows the dashboard's own error
pages: a missing page is the site's "Not found", never Django's debug page listing every URL
pattern (which scrolls sideways on a phone)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]


def demo_environment(addr: str) -> dict[str, str]:
    """The environment scripts/serve runs the server in (its shared settings file, sourced)."""
    assert 'source scripts/demo-env.sh "$addr"' in (ROOT / "scripts" / "serve").read_text()
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "ALLOWED_HOSTS")}
    out = subprocess.run(
        ["bash", "-c", 'source scripts/demo-env.sh "$1" && env -0', "-", addr],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
    ).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"127.0.0.1:{port}"
    env = demo_environment(addr)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'db.sqlite3'}"
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True)
    proc = subprocess.Popen(
        [*manage, "runserver", "--noreload", addr],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://{addr}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/login/", timeout=2)  # noqa: S310 (our server)
                break
            except (urllib.error.URLError, OSError):
                assert proc.poll() is None, "the demo server did not start"
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_demo_runs_without_debug():
    env = demo_environment("127.0.0.1:8000")
    assert env["DEBUG"] == "0"
    assert "127.0.0.1" in env["ALLOWED_HOSTS"].split(",")


@pytest.mark.parametrize("width", [1440, 390])
def test_a_missing_page_on_the_demo_is_the_sites_own_not_found(browser, demo_server, width):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        for path in ("/no-such-page/", "/runs/999999/"):
            answer = page.goto(demo_server + path)
            assert answer.status == 404
            assert page.locator("main h1").inner_text() == "Not found"
            assert page.locator("header.top a.brand").count() == 1  # the site's frame
            body = page.content()
            assert "URLconf" not in body and "DEBUG = True" not in body
            wide = page.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= width
    finally:
        context.close()
