"""How the templates and the template tags are written: rows of HTML live in templates, at a
readable width, naming what they show, with titles from the one vocabulary."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.template import engines
from django.template.loader import get_template

from tests.isolation import RLO, Unisolated

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))
TAGS = sorted((ROOT / "records" / "templatetags").glob("*.py"))
APP_JS = ROOT / "static" / "evaldash" / "app.js"

# A variable or tag argument reaching into a tuple by position: `h.0`, `pair.1`, `g.rows.0.x`.
POSITIONAL = re.compile(r"\b[A-Za-z_]\w*(?:\.\w+)*\.\d+\b")
DJANGO_PARTS = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def test_there_are_templates_to_check():
    assert len(TEMPLATES) > 40 and TAGS


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_template_line_is_wider_than_120_characters(path):
    wide = [
        (n, len(line)) for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 120
    ]
    assert not wide, wide


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_templates_name_what_they_show_never_a_position(path):
    found = [
        hit
        for part in DJANGO_PARTS.findall(path.read_text())
        for hit in POSITIONAL.findall(re.sub(r"\"[^\"]*\"|'[^']*'", "", part))
        if not re.fullmatch(r"[\d.]+", hit)
    ]
    assert not found, found


def test_the_positional_check_would_catch_an_index():
    part = "{{ h.0 }} {% if c.clean.1 %} {{ g.rows.0.repeats.k }} {{ x|floatformat:2 }}"
    assert POSITIONAL.findall(part) == ["h.0", "c.clean.1", "g.rows.0"]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_template_compiles(path):
    get_template(str(path.relative_to(ROOT / "templates")))


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_one_line_comment_spans_lines(path):
    """`{# #}` is a one-line comment in Django: one spanning lines reaches the page as text."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for start in (m.start() for m in re.finditer(r"\{#", line)):
            assert "#}" in line[start:], (path.name, n)


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == name
    ]


@pytest.mark.parametrize("path", TAGS, ids=lambda p: p.name)
def test_template_tags_build_no_rows_and_mark_no_markup_safe(path):
    source = path.read_text()
    tree = ast.parse(source)
    assert "<tr" not in source, "a table row is built in Python"
    for call in _calls(tree, "mark_safe"):
        text = ast.unparse(call)
        assert "<" not in text, f"mark_safe over markup: {text}"
    # What remains is at most the one URL the score cell passes through as it is.
    assert len(_calls(tree, "mark_safe")) <= 1


def test_template_tags_import_public_names_only():
    for path in TAGS:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("records"):
                for alias in node.names:
                    assert not alias.name.startswith("_"), (path.name, alias.name)
                    assert not (alias.asname or "").startswith("_"), (path.name, alias.asname)
    tree = ast.parse((ROOT / "records" / "templatetags" / "evaldash.py").read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "records.queries.cost"
        for alias in node.names
        if alias.asname is None
    }
    assert "usd" in imported


def test_the_usd_filter_writes_money_as_the_cost_module_does():
    from records.queries.cost import usd

    render = engines["django"].from_string("{% load evaldash %}{{ v|usd }} {{ v|usd:2 }}").render
    assert (
        render({"v": 1234.5}) == f"{usd(1234.5)} {usd(1234.5, digits=2)}" == "$1,234.5000 $1,234.50"
    )
    assert render({"v": None}) == "unknown unknown"


def test_htmx_request_ends_have_one_document_handler_each():
    js = APP_JS.read_text()
    for event in ("htmx:beforeRequest", "htmx:afterRequest"):
        assert js.count(f'document.addEventListener("{event}"') == 1, event


def test_the_models_table_takes_its_column_titles_from_the_vocabulary():
    from records.scoring.vocabulary import COLUMN_TITLES

    text = (ROOT / "templates" / "records" / "compare" / "page.html").read_text()
    for title in COLUMN_TITLES:
        assert f">{title}</th>" not in text, title


# --- untrusted names isolated on every page family ----------------------------------------------


def _unisolated(client, urls):
    seen, found = {}, {}
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200, url
        html = r.content.decode()
        seen[url] = html.count(RLO)
        parser = Unisolated()
        parser.feed(html)
        if parser.found:
            found[url] = parser.found
    return seen, found


def test_the_isolation_check_finds_a_bare_name():
    parser = Unisolated()
    parser.feed(f"<td><code>fake:{RLO}evil</code></td><td><bdi>ok{RLO}</bdi></td>")
    assert parser.found == [f"fake:{RLO}evil"]


@pytest.fixture
def hostile_scored(db):
    """Two scored runs of the demo corpus whose models and run ids carry U+202E, uploaded
    under a file name that carries it too."""
    from records.devtools.synth import ModelSpec
    from records.models import Run
    from tests.builders import demo_key, ingest_bytes, synth_run

    models = (
        ModelSpec(f"fake:{RLO}evil-a", 0.9, (1.0, 2.0, 0.0, 0.1)),
        ModelSpec(f"fake:{RLO}evil-b", 0.6, (1.0, 2.0, 0.0, 0.1)),
    )
    report = ingest_bytes(("key.json", demo_key()))
    assert not report.refused
    for seed, run_id in ((3, f"run-{RLO}one"), (4, f"run-{RLO}two")):
        data = synth_run(run_id, seed, models=models, max_attempts=60)
        report = ingest_bytes((f"modeleval-{RLO}{seed}.jsonl", data))
        assert not report.refused, report.refused
    runs = list(Run.objects.order_by("started_at"))
    assert len(runs) == 2 and all(r.scorings.exists() for r in runs)
    return runs


def test_untrusted_names_are_isolated_on_compare_history_case_search_and_upload_pages(
    client, viewer, hostile_scored
):
    from records.models import ScoreRow, Upload

    base, cand = hostile_scored
    row = ScoreRow.objects.filter(scoring__run=cand, surface="dynamic").order_by("model").first()
    before = ScoreRow.objects.filter(scoring__run=base, model=row.model, surface="dynamic").first()
    case = cand.attempts.filter(model=row.model).order_by("case").first().case
    digest = cand.corpus_digest
    compare_case = "/compare/case/?" + urlencode(
        {
            "baseline": base.pk,
            "candidate": cand.pk,
            "a": before.row_key,
            "b": row.row_key,
            "case": case,
        }
    )
    history = "/history/?" + urlencode(
        {"digest": digest, "model": row.model, "surface": "dynamic", "column": "Clean"}
    )
    urls = [
        f"/compare/?kind=runs&baseline={base.pk}&candidate={cand.pk}",
        f"/compare/?kind=surfaces&run={cand.pk}",
        f"/compare/?kind=models&run={cand.pk}",
        compare_case,
        history,
        f"/cases/?digest={digest}",
        "/cases/case/?" + urlencode({"digest": digest, "case": case}),
        "/search/?" + urlencode({"model": row.model}),
        f"/runs/{cand.pk}/matrix/?surface=dynamic",
        "/upload/",
        *(f"/uploads/{u.pk}/" for u in Upload.objects.all()),
    ]
    seen, found = _unisolated(client, urls)
    assert found == {}, found
    # The pages about these runs show their names, so the check above had something to check.
    quiet = {
        f"/cases/?digest={digest}",
        "/upload/",
        f"/uploads/{Upload.objects.order_by('pk').first().pk}/",
    }
    assert all(seen[url] for url in urls if url not in quiet), seen


def test_replay_and_conformance_names_are_isolated(client, viewer, tmp_path):
    """A replay's names are bounded by its reader (identities are [A-Za-z0-9._:-]), so a bidi
    control never reaches its pages; a conformance run's adapter, cases and failures may carry
    one, and are isolated."""
    import copy
    import json

    from django.core.management import call_command

    from records.ingest import bytes_input, ingest
    from records.models import ConformanceRun, ObsReplay, Upload

    def upload(name, body):
        data = json.dumps(body).encode()
        return ingest([bytes_input(name, data)], Upload.objects.create()).as_dict()

    doc = json.loads((ROOT / "tests" / "fixtures" / "obscorpus" / "replay.json").read_text())
    hostile = copy.deepcopy(doc["corpus"])
    hostile["subjects"][0]["id"] += RLO
    assert "not bounded" in upload("bad.json", hostile)["refused"][0]["message"]
    doc = copy.deepcopy(doc)
    doc.pop("want")
    doc["results"][0]["telemetry"]["identity"] = f"turn-{RLO}1"
    assert not upload("replay.json", doc)["refused"]
    replay = ObsReplay.objects.get()

    out = tmp_path / "out.jsonl"
    FAILURE = "memory message 0 is not marked untrusted"  # noqa: N806 (one of the judge's texts)
    result = {"case": f"a_{RLO}case", "rule": f"r{RLO}", "passed": False, "failures": [FAILURE]}
    summary = {"suite": "taisce-conformance/v1", "cases": 1, "failed": 1}
    out.write_text(
        "".join(
            json.dumps(x, separators=(",", ":"), ensure_ascii=False) + "\n"
            for x in (result, summary)
        )
    )
    call_command("ingest_conformance", str(out), "--adapter", f"py/{RLO}lang", "--exit-status", "1")
    run = ConformanceRun.objects.get()
    replay_pages = ["/replays/", f"/replays/{replay.pk}/", f"/replays/corpus/{replay.corpus_id}/"]
    conformance_pages = [
        "/conformance/",
        f"/conformance/runs/{run.pk}/",
        "/conformance/failures/",
        "/conformance/adapter/?" + urlencode({"name": run.adapter}),
    ]
    seen, found = _unisolated(client, replay_pages + conformance_pages)
    assert found == {}, found
    assert not any(seen[url] for url in replay_pages), seen
    assert all(seen[url] for url in conformance_pages), seen


def test_look_alike_models_are_marked_in_the_score_cost_and_overview_tables(client, viewer):
    from records.devtools.synth import ModelSpec
    from records.models import Run
    from tests.builders import demo_key, ingest_bytes, synth_run

    alike = ("fake:perfect", "fake:per\u200bfect", "fake:other")
    models = tuple(ModelSpec(m, 0.8, (1.0, 2.0, 0.0, 0.1)) for m in alike)
    ingest_bytes(("key.json", demo_key()))
    report = ingest_bytes(
        ("modeleval-a.jsonl", synth_run("run-alike", 5, models=models, max_attempts=60))
    )
    assert not report.refused
    run = Run.objects.get()
    marker = 'class="badge warn lookalike"'
    for url, table in (
        (f"/runs/{run.pk}/scores/", 'class="data scores"'),
        (f"/runs/{run.pk}/cost/", 'id="cost-table"'),
        (f"/runs/{run.pk}/", 'class="data board-table"'),
        (f"/runs/{run.pk}/sessions/", 'id="endings-table"'),
    ):
        html = client.get(url).content.decode()
        start = html.index(table)
        shown = html[start : html.index("</table>", start)]
        # The two that look alike are marked in the table, with their code points; the third not.
        assert shown.count(marker) >= 2 and shown.count(marker) % 2 == 0, url
        assert "U+200B" in shown, url
        assert not re.search(r"fake:other</bdi></code>\s*<span class=\"badge warn lookalike", shown)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_title_written_over_lines_reaches_the_page_on_one(path):
    """A tooltip keeps no line break of the template: a title spanning lines is squashed."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for m in re.finditer(r'\btitle="', line):
            rest = DJANGO_PARTS.sub("", line[m.end() :])
            assert '"' in rest or line[m.end() :].startswith("{% filter squash %}"), (path.name, n)


def test_squash_writes_an_attribute_on_one_line():
    text = '{% load evaldash %}<a title="{% filter squash %}a {{ v }}\n    c{% endfilter %}">'
    render = engines["django"].from_string(text).render
    assert render({"v": "<b>"}) == '<a title="a &lt;b&gt; c">'
