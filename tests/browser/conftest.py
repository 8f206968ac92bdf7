"""The pages in a real Chromium (Debian's, driven by Playwright), under the pages' real CSP, on the
demo's three runs. Each module is one family of pages; the checks every page must pass at a
desktop's 1440 px and a phone's 390 px are here, written once."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from records.devtools.synth import demo_files
from records.ingest import ingest, inputs_from_paths
from records.models import Upload
from tests.browser.shared_demo import watched_page

CHROMIUM = os.environ.get("EVALDASH_CHROMIUM", "/usr/bin/chromium")
REQUIRED = os.environ.get("EVALDASH_REQUIRE_BROWSER") == "1"
WIDTHS = (1440, 390)

if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
    if REQUIRED:
        raise RuntimeError(f"EVALDASH_REQUIRE_BROWSER=1 but there is no Chromium at {CHROMIUM}")
    collect_ignore_glob = ["test_*.py"]

# Playwright's sync API runs an event loop in this thread; the ORM calls in these tests are
# plain set-up, not concurrent work.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def demo_data(tmp_path) -> dict[str, object]:
    from records.models import Run

    ingest(inputs_from_paths(demo_files(tmp_path)), Upload.objects.create(source="demo"))
    return {r.run_id: r for r in Run.objects.all()}


@pytest.fixture
def page(browser, live_server, settings, demo_data):
    settings.EVALDASH_PUBLIC_READ = True
    with watched_page(browser, live_server.url, demo_data) as pg:
        yield pg


def log_in(page, name: str, *permissions: str) -> None:
    """Make an account holding `permissions` (codenames) and log in with it, as a person would."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(name, password="pw-123456789-x")
    user.user_permissions.add(*Permission.objects.filter(codename__in=permissions))
    page.goto(page.base + "/login/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", "pw-123456789-x")
    page.click("form.login-form button[type=submit]")
    page.wait_for_load_state("networkidle")


def send_files(page, *files: tuple[str, bytes]) -> None:
    """Choose `files` (name, bytes) in the upload page's form and send them, as a person would."""
    page.set_input_files(
        "#upload-form input[type=file]",
        [{"name": name, "mimeType": "application/json", "buffer": data} for name, data in files],
    )
    page.click("#upload-form button[type=submit]")


def shoot(page, url: str, name: str, folder: str, *, full: bool = True) -> None:
    """Photograph `url` at 1440 and 390 px into `folder` (nothing when it is empty): the page
    (whole, with `full`) as NAME-WIDTH.png and its first screen as NAME-WIDTH-top.png."""
    if not folder:
        return
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(page.base + url)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=os.path.join(folder, f"{name}-{width}.png"), full_page=full)
        page.screenshot(path=os.path.join(folder, f"{name}-{width}-top.png"))
    page.set_viewport_size({"width": 1440, "height": 1000})


def settled(page) -> None:
    """Wait until htmx has swapped and settled what it loaded."""
    busy = page.locator(".htmx-request, .htmx-swapping, .htmx-settling")
    for _ in range(200):  # locators, not evaluated script: the pages' CSP forbids eval
        if busy.count() == 0:
            break
        page.wait_for_timeout(20)
    page.wait_for_timeout(50)


# Read off the page by one function each (Playwright passes a function, never a string to eval).
_LAYOUT = """() => {
  const doc = document.documentElement;
  const numbers = Array.from(document.querySelectorAll("td.num, th.num"))
    .filter(el => el.offsetParent !== null)
    .map(el => getComputedStyle(el).textAlign);
  const headers = Array.from(document.querySelectorAll(".scroll table.data thead th"))
    .filter(el => el.offsetParent !== null)
    .map(el => getComputedStyle(el).position);
  return {width: doc.scrollWidth, viewport: window.innerWidth, numbers, headers};
}"""


def check_layout(page, url: str, widths: tuple[int, ...] = WIDTHS) -> dict[int, dict]:
    """Open `url` at each width and hold the rules every page keeps: nothing scrolls sideways,
    numbers are right-aligned, the headers of tables in scroll boxes are sticky, no script
    error. The readings, per width."""
    out = {}
    for width in widths:
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(page.base + url)
        page.wait_for_load_state("networkidle")
        got = page.evaluate(_LAYOUT)
        assert got["width"] <= got["viewport"], f"{url} is {got['width']} px wide at {width} px"
        assert set(got["numbers"]) <= {"right", "end"}, (url, width, set(got["numbers"]))
        assert set(got["headers"]) <= {"sticky"}, (url, width, set(got["headers"]))
        out[width] = got
    assert page.problems == [], page.problems
    return out
