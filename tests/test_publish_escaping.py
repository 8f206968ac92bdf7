"""Text a run supplied cannot become Markdown in the managed blocks evaldash publishes: wherever a
value lands in them, in `scores.md` and `publish/blocks.md`, a link, an image, an HTML tag,
emphasis, a pipe, a line break or a backtick in it adds no syntax the same row with a plain value
lacks. The report lines after the blocks carry it as upstream prints it (refusal.String, main.go's
Fprintf), one line per row."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter

import pytest

from records.formats.markdown import markdown_code, markdown_text
from records.formats.model_results import BLOCKS, Row, refused_line, render_block
from records.models import Run
from records.scoring.publish import Publication, Refusal
from tests.builders import SAMPLE_KEY, ingest_bytes, line, published_session, published_shard
from tests.test_publish_render import two_models

VECTORS = {
    "link": "[x](https://evil.example/) www.evil.example",
    "image": "![](https://tracker.example/p.png)",
    "html": "<img src=x onerror=alert(1)><b>",
    "emphasis": "*strong* _em_ __both__ ~~gone~~",
    "pipe": "a|b\\|c",
    "newline": "x\n\n# heading\r\n- item\u2028y",
    "backtick": "`` ` ```",
    "reference": "@all #1 !2 &3 &amp; %m $4",
}
PLAIN = "plain"

# Every place a row carries run-supplied text, as (part, field).
PLACES = [
    *(
        ("key", f)
        for f in (
            "model",
            "mode",
            "tier",
            "tier_pin",
            "meta_param_schema",
            "corpus_digest",
            "contract_digest",
            "tool_schema_digest",
        )
    ),
    *(
        ("provenance", f)
        for f in ("provider", "commit", "date", "gitlab_version", "edition", "token_scopes")
    ),
    ("options", "name"),
    ("options", "value"),
]


def with_value(row: Row, part: str, name: str, value: str) -> Row:
    out = copy.deepcopy(row)
    if part == "key":
        out.key[name] = value
        if name == "tier":
            out.provenance["tier"] = value
    elif name == "token_scopes":
        out.provenance["token_scopes"] = ["api", value]
    elif part == "provenance":
        out.provenance[name] = value
    elif name == "name":
        out.provenance["request_options"] = {value: "1"}
    else:
        out.provenance["request_options"] = {"temperature": value}
    return out


def published(row: Row) -> str:
    """Every block drawn from the row and a meta row agreeing with it (so a cross-surface note
    names both)."""
    peer = copy.deepcopy(row)
    peer.key.update(surface="meta", meta_param_schema=row.key.get("meta_param_schema") or "opaque")
    peer.key["tier"] = row.key["tier"]
    blocks = [render_block(b, [row, peer], 10) for b in BLOCKS if not b.legend]
    return "\n\n".join(blocks) + "\n"


def outside_code_spans(text: str) -> str:
    """The text CommonMark reads as markup: code spans and backslash escapes taken out."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            i += 2
            continue
        if text[i] == "`":
            fence = re.match("`+", text[i:])[0]
            close = re.compile(f"(?<!`){fence}(?!`)").search(text, i + len(fence))
            if close:
                i = close.end()
                continue
            out.append(fence)
            i += len(fence)
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


ACTIVE = re.compile(
    r"[\[\]<>*~`]|&(?!lt;|gt;)|(?<![^\W_])_|_(?![^\W_])|[@#!%$](?=[\w\"])|https?:|www\."
)


def cell_ends(line: str) -> int:
    """How many pipes GFM's cell scanner splits the line at (a backslash pair is one escape)."""
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line))


def syntax_of(text: str) -> tuple[int, list[int], Counter]:
    """What a renderer would make structure of: lines, cells per table line, active markup."""
    lines = text.split("\n")
    active = Counter(m[0] for line in lines for m in ACTIVE.finditer(outside_code_spans(line)))
    cells = [cell_ends(line) for line in lines if line.startswith("|")]
    return len(lines), cells, active


def assert_inert(got: str, plain: str) -> None:
    lines, cells, active = syntax_of(got)
    want_lines, want_cells, want_active = syntax_of(plain)
    assert lines == want_lines, "a value started a line of its own"
    assert cells == want_cells, "a value ended a table cell"
    assert active == want_active, f"a value added markup: {active - want_active}"


@pytest.mark.parametrize("vector", VECTORS)
def test_a_hostile_value_adds_no_markdown_wherever_a_row_carries_it(vector):
    row = two_models()[0]
    for part, name in PLACES:
        got = published(with_value(row, part, name, VECTORS[vector]))
        plain = published(with_value(row, part, name, PLAIN))
        try:
            assert_inert(got, plain)
        except AssertionError as exc:
            raise AssertionError(f"{part}.{name}: {exc}") from None


@pytest.mark.parametrize("vector", VECTORS)
def test_the_report_lines_carry_a_value_as_upstream_prints_it_one_line_per_row(vector):
    row = two_models()[0]
    value = VECTORS[vector]
    odd = with_value(row, "key", "surface", value)
    merged = f"merged into the published row {row.name}: ok"
    report = Publication(
        rows=[odd], printed=[Refusal(row.name, "fake-provider", f"{value} is fake"), merged]
    ).report()
    # Raw but for what would end the line, and no tag a shard wrote (`<` `>` as entities).
    ends = {"\n": "\\u000a", "\r": "\\u000d", "\u2028": "\\u2028", "<": "&lt;", ">": "&gt;"}
    shown = "".join(ends.get(c, c) for c in value)
    assert report == [
        f"refused [fake-provider] {row.name}: {shown} is fake",
        merged,
        f"no managed block publishes the row {odd.name.replace(value, shown)}",
    ]
    assert all(len(one.splitlines()) == 1 for one in report)


def test_a_refusal_keeps_markdowns_punctuation_as_upstream_prints_it():
    assert refused_line(
        "model=o1_mini_ x", "filtered-run", 'with -run "MT-0.*" & [x] #1 @a ~b'
    ) == ('refused [filtered-run] model=o1_mini_ x: with -run "MT-0.*" & [x] #1 @a ~b')


def test_the_checker_sees_what_raw_text_would_inject():
    # The property above is worth something only if raw text fails it.
    for vector, value in VECTORS.items():
        if vector == "reference":
            continue
        raw = f"| `m` | {value} |"
        with pytest.raises(AssertionError):
            assert_inert(raw, "| `m` | plain |")


def test_a_plain_value_is_written_as_it_came():
    for value in ("anthropic:claude-3.5", "read_api, api", "19.3.0 ee", "2026-11-01"):
        assert markdown_text(value) == value
        assert markdown_code(value, in_table=True) == f"`{value}`"


def test_a_backslash_before_a_pipe_cannot_end_a_table_cell():
    for value in ("a|b", "a\\|b", "a\\\\|b"):
        assert cell_ends(f"| {markdown_code(value, in_table=True)} |") == 2
        assert cell_ends(f"| {markdown_text(value)} |") == 2


@pytest.fixture
def key(db):
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()))


def hostile_shard(value: str) -> bytes:
    """A shard publishable upstream whose run and session lines carry `value` everywhere a
    string is free text."""
    session = published_session(token_scopes=["api", value])
    data = json.loads(published_shard(line("attempt"), session).decode().splitlines()[-1])
    run = data["run"]
    run.update(gitlab_version=value, edition=value, contract_digest=value)
    run["providers"][0].update(name=value, options={value: value})
    lines = published_shard(line("attempt"), session).decode().splitlines()
    return ("\n".join([*lines[:-1], json.dumps(data)]) + "\n").encode()


@pytest.mark.parametrize("vector", VECTORS)
def test_the_exports_carry_a_hostile_run_inertly(client, viewer, key, vector):
    report = ingest_bytes(("modeleval-h.jsonl", hostile_shard(VECTORS[vector])))
    assert report.ok, report.refused
    hostile = Run.objects.get()
    report = ingest_bytes(("modeleval-p.jsonl", hostile_shard(PLAIN)))
    assert report.ok, report.refused
    plain = Run.objects.exclude(pk=hostile.pk).get()
    for url in ("/runs/{}/scores.md", "/publish/blocks.md?run={}"):
        got = client.get(url.format(hostile.pk)).content.decode()
        want = client.get(url.format(plain.pk)).content.decode()
        assert "Compared as one table" in got
        assert_inert(got, want)
