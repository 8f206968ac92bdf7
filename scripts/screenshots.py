"""Screenshots of the main pages, from the demo data, in Chromium: the README's pictures.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--width 1440 --width 390]
                                            [--only runs --only run ...] [--whole]

A fresh SQLite database in a temporary folder gets the demo runs; the dashboard is served from it
(read access open) and each page is photographed at each width: its first screen (900 px
high), or the whole page with --whole. A page that scrolls
sideways is named on the way. Chromium is taken from $EVALDASH_CHROMIUM (default
/usr/bin/chromium).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from records.devtools.servers import (  # noqa: E402 (the checkout is put on the path first)
    ROOT,
    child_env,
    free_port,
    manage,
    stop,
    wait_until_answering,
)


def _pages() -> dict[str, str]:
    """Page name -> path, looked up in the demo data."""
    from records.models import Attempt, CaseFigure, FailureCount, Run

    runs = list(Run.objects.order_by("started_at"))
    first, regressed = runs[0], runs[1]
    failed = (
        Attempt.objects.filter(run=regressed, verdicts__outcome="failed").order_by("line").first()
    )
    pages = {
        "runs": "/",
        "run": f"/runs/{regressed.pk}/",
        "run-scores": f"/runs/{regressed.pk}/scores/",
        "run-cost": f"/runs/{regressed.pk}/cost/",
        "run-attempts": f"/runs/{regressed.pk}/attempts/",
        "run-sessions": f"/runs/{regressed.pk}/sessions/",
        "compare-runs": f"/compare/?kind=runs&baseline={first.pk}&candidate={regressed.pk}",
        "compare-models": f"/compare/?kind=models&run={regressed.pk}",
        "compare-surfaces": f"/compare/?kind=surfaces&run={regressed.pk}",
        "history": (
            f"/history/?digest={regressed.corpus_digest}"
            "&model=openai:gpt-5.4-nano&surface=meta&column=Completion"
        ),
        "upload": "/upload/",
        "search": "/search/?outcome=refused",
        "cases": f"/cases/?digest={regressed.corpus_digest}&sort=-discrimination",
    }
    case = CaseFigure.objects.filter(scoring__run=regressed).order_by("case").first()
    if case:
        pages["case"] = f"/cases/case/?digest={regressed.corpus_digest}&case={case.case}"
    if failed:
        pages["attempt"] = f"/attempts/{failed.pk}/"
    pages["failures"] = f"/failures/?digest={regressed.corpus_digest}"
    pages["review"] = "/review/"
    mode = FailureCount.objects.filter(scoring__run=regressed).order_by("-attempts").first()
    if mode:
        pages["failure-mode"] = f"/failures/{mode.mode}/?digest={regressed.corpus_digest}"
    from urllib.parse import urlencode

    from records.queries.compare import compare_runs

    rows, _ = compare_runs(first, regressed)
    if rows and rows[0].flips:
        row = rows[0]
        pages["compare-case"] = "/compare/case/?" + urlencode(
            {
                "baseline": first.pk,
                "candidate": regressed.pk,
                "a": row.baseline.row.row_key,
                "b": row.candidate.row.row_key,
                "case": row.flips[0].case,
            }
        )
    return pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--width", type=int, action="append")
    parser.add_argument("--only", action="append", help="page names to take (default: all)")
    parser.add_argument("--whole", action="store_true", help="the whole page, not its first screen")
    args = parser.parse_args()
    widths = args.width or [1440, 390]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    tmp = tempfile.mkdtemp(prefix="evaldash-shots-")
    env = child_env(
        f"sqlite:///{tmp}/demo.sqlite3",
        DEBUG="1",
        EVALDASH_PUBLIC_READ="1",
        DJANGO_SETTINGS_MODULE="evaldash.settings",
    )
    subprocess.run(manage("migrate", "--verbosity", "0"), env=env, check=True, cwd=ROOT)
    subprocess.run(manage("demo"), env=env, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    os.environ.update(env)
    import django

    django.setup()
    pages = _pages()
    if args.only:
        pages = {k: v for k, v in pages.items() if k in args.only}

    port = free_port()
    server = subprocess.Popen(
        manage("runserver", "--noreload", f"127.0.0.1:{port}"),
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(base + "/", server)
        from playwright.sync_api import sync_playwright

        chromium = os.environ.get("EVALDASH_CHROMIUM", "/usr/bin/chromium")
        wide = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium)
            for width in widths:
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name, path in pages.items():
                    page.goto(base + path)
                    page.wait_for_load_state("networkidle")
                    page.wait_for_timeout(300)  # the charts' first frame
                    scroll = page.evaluate("document.documentElement.scrollWidth")
                    if scroll > width:
                        wide.append(f"{name} at {width} px is {scroll} px wide")
                    page.screenshot(path=str(out / f"{name}-{width}.png"), full_page=args.whole)
                page.close()
            browser.close()
        for line in wide:
            print("scrolls sideways:", line)
        print(f"{len(pages) * len(widths)} screenshots in {out}")
        return 1 if wide else 0
    finally:
        stop(server)


if __name__ == "__main__":
    sys.exit(main())
