"""How the templates and the template tags are written: rows of HTML live in templates, at a
readable width, naming what they show, with titles from the one vocabulary."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.template import engines
from django.template.loader import get_template

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
    from records.scoring.tables import COLUMN_TITLES

    text = (ROOT / "templates" / "records" / "compare" / "page.html").read_text()
    for title in COLUMN_TITLES:
        assert f">{title}</th>" not in text, title
