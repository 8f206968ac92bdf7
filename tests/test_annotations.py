"""Labels and notes beside the evidence: written on the case and attempt pages (in place with
htmx, by a redirect without it) by those allowed to, kept with a row per change, resolved; read
as a facet and filter of the search and the cases, carried by their exports; written and listed
by the API; what the review queue asks of a person; and the cases a label excuses in the gate."""

from __future__ import annotations

import csv
import importlib
import io
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission

from records.devtools.synth import load_demo_key
from records.formats.notes import note_html
from records.models import Annotation, AnnotationChange, ApiToken, Attempt, CaseFigure, Label, Run
from records.queries.annotations import (
    About,
    Writer,
    edit,
    excused_cases,
    review_items,
    set_resolved,
    write,
)
from records.queries.gate import gate, resolve
from tests.builders import ingest_series

pytestmark = pytest.mark.django_db
KEY = load_demo_key()
DIGEST = KEY.digest
MODE = "0123456789abcdef"
REGRESSED, BEFORE = "run-2026-11-23-f00dfa", "run-2026-11-16-a1b2c3"


@pytest.fixture
def labeller(client, django_user_model):
    """A logged-in account that may write labels and notes."""
    user = django_user_model.objects.create_user("labeller", password="pw-123456789")
    user.user_permissions.add(Permission.objects.get(codename="add_annotation"))
    client.force_login(user)
    return user


@pytest.fixture
def token():
    return {"Authorization": f"Bearer {ApiToken.issue('ci')[1]}"}


@pytest.fixture(autouse=True)
def vocabulary(db):
    """The six words the migration seeds, seeded again: a transactional test that ran before on
    the same worker flushed every table, seeded rows included."""
    from django.apps import apps

    importlib.import_module("records.migrations.0019_annotations").seed_labels(apps, None)


def _label(slug: str) -> Label:
    return Label.objects.get(slug=slug)


def _case_of(demo) -> tuple[str, str]:
    run = demo[REGRESSED]
    return run.corpus_digest, Attempt.objects.filter(run=run).order_by("line").first().case


# --- the note -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        "[click](javascript:alert(1))",
        '[x](https://a.example/" onmouseover="alert(1))',
        "**<b>bold</b>** `<i>code</i>`",
        "&lt;script&gt; &#60;script&#62;",
        "<a href='https://x'>x</a>",
        "https://ok.example/?q=<svg/onload=alert(1)>",
    ],
)
def test_a_note_never_carries_markup_of_its_own(hostile):
    found = Elements()
    found.feed(note_html(hostile))
    # The only elements are those the subset writes, and a link's only address is http(s).
    assert {tag for tag, _ in found.seen} <= {"p", "br", "ul", "li", "code", "strong", "em", "a"}
    for tag, attrs in found.seen:
        names = {name for name, _ in attrs}
        assert names <= ({"href", "rel"} if tag == "a" else set()), (hostile, tag, attrs)
        if tag == "a":
            href = dict(attrs)["href"]
            assert href.startswith(("http://", "https://")) and '"' not in href
    # What was written as markup is there as text, to be read.
    assert "<" not in found.text or "<" in hostile


class Elements(HTMLParser):
    """Every element of a piece of HTML with its attributes, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.seen.append((tag, attrs))

    def handle_data(self, data):
        self.text += data


def test_a_note_keeps_its_small_markdown():
    html = note_html(
        "MT-040 is **flaky**: the health check times out, see https://ci.example/jobs/12.\n\n"
        "- `retry` did not help\n- [ticket](https://t.example/123) and *known*"
    )
    assert "<strong>flaky</strong>" in html
    assert '<a href="https://ci.example/jobs/12" rel="nofollow noopener noreferrer">' in html
    assert "jobs/12</a>." in html  # the sentence's full stop is not the address's
    assert "<ul><li><code>retry</code> did not help</li>" in html
    assert '<a href="https://t.example/123" rel="nofollow noopener noreferrer">ticket</a>' in html
    assert "<em>known</em>" in html


def test_a_direction_control_in_a_note_is_shown_not_obeyed():
    assert "\u202e" not in note_html("evil\u202etxt.exe") and "\\u202e" in note_html("a\u202eb")


# --- writing on the pages -----------------------------------------------------------------------


def test_the_vocabulary_is_seeded_in_its_order():
    assert list(Label.objects.values_list("slug", flat=True)) == [
        "known-flaky",
        "corpus-bug",
        "model-error",
        "harness-error",
        "expected",
        "needs-review",
    ]


def test_a_labeller_labels_a_case_on_its_page_without_javascript(client, labeller, demo):
    digest, case = _case_of(demo)
    page = client.get("/cases/case/", {"digest": digest, "case": case})
    assert page.status_code == 200
    assert 'action="/annotations/"' in page.content.decode()
    r = client.post(
        "/annotations/",
        {
            "target": "case",
            "digest": digest,
            "case": case,
            "label": "known-flaky",
            "note": "health check **times out** <script>x</script>",
            "link": "https://issues.example/123",
            "next": f"/cases/case/?digest={digest}&case={case}",
        },
    )
    assert r.status_code == 302 and r["Location"].startswith("/cases/case/")
    a = Annotation.objects.get()
    assert (a.target, a.digest, a.case, a.label.slug, a.author) == (
        "case",
        digest,
        case,
        "known-flaky",
        "labeller",
    )
    shown = client.get(r["Location"]).content.decode()
    assert "<strong>times out</strong>" in shown and "&lt;script&gt;x&lt;/script&gt;" in shown
    assert "<script>x" not in shown
    assert a.changes.get().action == "created"


def test_htmx_gets_the_panel_back_in_place(client, labeller, demo):
    run = demo[REGRESSED]
    attempt = Attempt.objects.filter(run=run).first()
    r = client.post(
        "/annotations/",
        {"target": "attempt", "attempt": attempt.pk, "label": "model-error", "note": "wrong tool"},
        headers={"HX-Request": "true"},
    )
    body = r.content.decode()
    assert r.status_code == 200 and "<html" not in body
    assert body.lstrip().startswith('<section class="annotations" id="annotations"')
    assert "model-error" in body and "wrong tool" in body
    page = client.get(f"/attempts/{attempt.pk}/").content.decode()
    assert 'id="annotations"' in page and "wrong tool" in page


def test_a_reader_sees_labels_but_may_not_write_them(client, viewer, demo):
    digest, case = _case_of(demo)
    write(About("case", digest, case), Writer("someone"), label=_label("corpus-bug"))
    page = client.get("/cases/case/", {"digest": digest, "case": case}).content.decode()
    assert "corpus-bug" in page and 'action="/annotations/"' not in page
    r = client.post("/annotations/", {"target": "case", "digest": digest, "case": case})
    assert r.status_code == 403 and Annotation.objects.count() == 1


def test_a_refused_form_says_why_and_stores_nothing(client, labeller, demo):
    digest, case = _case_of(demo)
    for fields, why in (
        ({"label": "not-a-label"}, "unknown label"),
        ({"label": "expected", "link": "javascript:alert(1)"}, "http or https"),
        ({}, "give a label or a note"),
    ):
        r = client.post(
            "/annotations/", {"target": "case", "digest": digest, "case": case, **fields}
        )
        assert r.status_code == 400 and why in r.content.decode(), fields
    assert not Annotation.objects.exists()


def test_editing_keeps_a_row_per_change_and_a_label_can_be_resolved(client, labeller, demo):
    digest, case = _case_of(demo)
    a, _ = write(
        About("case", digest, case), Writer.of_user(labeller), label=_label("needs-review")
    )
    r = client.post(
        f"/annotations/{a.pk}/",
        {"label": "harness-error", "note": "the server was down", "link": ""},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200 and "history (2 changes)" in r.content.decode()
    client.post(f"/annotations/{a.pk}/resolve/", {"resolved": "1"})
    a.refresh_from_db()
    assert a.resolved and a.resolved_by == "labeller" and a.label.slug == "harness-error"
    changes = list(AnnotationChange.objects.filter(annotation=a))
    assert [c.action for c in changes] == ["created", "edited", "resolved"]
    assert changes[1].before["label"] == "needs-review"
    assert changes[1].after == {
        "label": "harness-error",
        "note": "the server was down",
        "link": "",
        "resolved": False,
    }
    # Saving it unchanged writes no row; reopening does.
    edit(a, Writer("x"), label=a.label, note=a.note, link=a.link)
    set_resolved(a, Writer("x"), False)
    assert [c.action for c in a.changes.all()][-1] == "reopened" and a.changes.count() == 4


# --- the API ------------------------------------------------------------------------------------


def test_the_api_writes_an_annotation_once_per_client_key(client, demo, token):
    digest, case = _case_of(demo)
    body = {
        "target": "case",
        "digest": digest,
        "case": case,
        "label": "known-flaky",
        "note": "flaky since #123",
        "link": "https://ci.example/1",
        "client_key": "ci-job-77",
    }
    first = client.post("/api/v1/annotations", body, content_type="application/json", headers=token)
    assert first.status_code == 201
    answer = first.json()
    assert set(answer) >= {"id", "target", "label", "note", "link", "author", "created"}
    assert set(answer) >= {"resolved", "url"}
    assert (answer["target"], answer["label"], answer["author"]) == (
        "case",
        "known-flaky",
        "token ci",
    )
    assert answer["resolved"] is False and answer["url"].endswith(
        f"/cases/case/?digest={digest}&case={case}"
    )
    again = client.post(
        "/api/v1/annotations",
        {**body, "note": "changed"},
        content_type="application/json",
        headers=token,
    )
    assert again.status_code == 200 and again.json() == answer
    assert Annotation.objects.count() == 1


def test_the_api_labels_an_attempt_and_a_failure_mode(client, demo, token):
    attempt = Attempt.objects.first()
    r = client.post(
        "/api/v1/annotations",
        {"target": "attempt", "attempt": attempt.pk, "label": "harness-error"},
        content_type="application/json",
        headers=token,
    )
    assert r.status_code == 201 and r.json()["url"].endswith(f"/attempts/{attempt.pk}/")
    r = client.post(
        "/api/v1/annotations",
        {"target": "mode", "mode": MODE, "label": "corpus-bug", "note": "the key is wrong"},
        content_type="application/json",
        headers=token,
    )
    assert r.status_code == 201 and r.json()["url"].endswith(f"/failures/{MODE}/")
    # What names another kind of target is not kept with it.
    r = client.post(
        "/api/v1/annotations",
        {"target": "mode", "mode": MODE, "digest": "ab", "case": "c", "note": "n"},
        content_type="application/json",
        headers=token,
    )
    assert r.status_code == 201 and (r.json()["digest"], r.json()["case"]) == (None, None)
    assert set(Annotation.objects.filter(target="mode").values_list("mode", "digest")) == {
        (MODE, "")
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"target": "thing"}, "target"),
        ({"target": "mode", "mode": "0123456789ABCDEF", "label": "expected"}, "mode"),
        ({"target": "mode", "mode": "0123", "label": "expected"}, "mode"),
        ({"target": "attempt", "attempt": 999999, "label": "expected"}, "attempt"),
        ({"target": "case", "digest": "ab", "label": "expected"}, "case"),
        ({"target": "case", "digest": "ab", "case": "c", "label": "nope"}, "label"),
        ({"target": "case", "digest": "ab", "case": "c", "note": "n", "link": "ftp://x"}, "link"),
        ({"target": "case", "digest": "ab", "case": "c", "note": "n", "colour": "red"}, "colour"),
        ({"target": "case", "digest": "ab", "case": "c", "note": ["a"]}, "note"),
    ],
)
def test_the_api_refuses_in_json_naming_the_field(client, db, token, body, field):
    r = client.post("/api/v1/annotations", body, content_type="application/json", headers=token)
    assert r.status_code == 400 and r["Content-Type"] == "application/json"
    assert field in r.json()["fields"] and not Annotation.objects.exists()


def test_the_api_needs_a_token_and_json(client, db, token):
    assert client.get("/api/v1/annotations").status_code == 401
    assert (
        client.post("/api/v1/annotations", {}, content_type="application/json").status_code == 401
    )
    r = client.post(
        "/api/v1/annotations", "{not json", content_type="application/json", headers=token
    )
    assert r.status_code == 400 and "JSON" in r.json()["error"]
    assert client.put("/api/v1/annotations", headers=token).status_code == 405


def test_the_api_lists_by_target_digest_case_and_label_page_by_page(client, demo, token):
    digest, case = _case_of(demo)
    for n in range(5):
        write(About("case", digest, case), Writer("w"), label=_label("known-flaky"), note=f"n{n}")
    write(About("case", digest, "other"), Writer("w"), label=_label("expected"))
    write(About("mode", mode=MODE), Writer("w"), label=_label("known-flaky"))
    r = client.get(
        "/api/v1/annotations",
        {"target": "case", "digest": digest, "case": case, "label": "known-flaky", "per_page": 2},
        headers=token,
    )
    page = r.json()
    assert page["count"] == 5 and [a["note"] for a in page["annotations"]] == ["n4", "n3"]
    seen = [a["note"] for a in page["annotations"]]
    while page["next"]:
        page = client.get(page["next"], headers=token).json()
        seen += [a["note"] for a in page["annotations"]]
    assert seen == ["n4", "n3", "n2", "n1", "n0"]
    assert (
        client.get("/api/v1/annotations", {"label": "expected"}, headers=token).json()["count"] == 1
    )
    bad = client.get("/api/v1/annotations", {"colour": "red"}, headers=token)
    assert bad.status_code == 400 and "colour" in bad.json()["error"]


# --- search and cases ---------------------------------------------------------------------------


def test_the_search_filters_and_counts_by_label_and_its_exports_carry_them(client, viewer, demo):
    digest, case = _case_of(demo)
    write(About("case", digest, case), Writer("w"), label=_label("known-flaky"))
    other = Attempt.objects.exclude(case=case).order_by("pk").first()
    write(About("attempt", attempt=other.pk), Writer("w"), label=_label("model-error"))
    # A resolved label no longer speaks for its target.
    gone, _ = write(About("attempt", attempt=other.pk), Writer("w"), label=_label("expected"))
    set_resolved(gone, Writer("w"))
    of_case = Attempt.objects.filter(case=case, run__corpus_digest=digest).count()

    every = client.get("/search.json").json()
    assert every["facets"]["label"] == {"known-flaky": of_case, "model-error": 1}
    flaky = client.get("/search.json", {"label": "known-flaky", "per_page": 500}).json()
    assert flaky["count"] == of_case and {a["case"] for a in flaky["attempts"]} == {case}
    assert all(a["labels"] == ["known-flaky"] for a in flaky["attempts"])
    assert client.get("/search.json", {"label": "expected"}).json()["count"] == 0
    page = client.get("/search/", {"label": "model-error"})
    assert page.context["count"] == 1
    assert {f["key"]: f for f in page.context["facets"]}["label"]["values"][0][
        "value"
    ] == "model-error"
    text = b"".join(client.get("/search.csv", {"label": "model-error"}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and {r["labels"] for r in rows} == {"model-error"}
    # A call condition with the label: the calls of the labelled attempts only.
    with_tool = client.get(
        "/search.json", {"label": "model-error", "tool": "gitlab_execute_action"}
    )
    assert with_tool.status_code == 200 and with_tool.json()["count"] <= 1


def test_the_cases_page_and_its_json_filter_and_count_by_label(client, viewer, demo):
    digest, case = _case_of(demo)
    write(About("case", digest, case), Writer("w"), label=_label("corpus-bug"))
    data = client.get("/cases.json", {"digest": digest}).json()
    assert data["facets"]["label"] == {"corpus-bug": 1}
    assert {c["case"]: c["labels"] for c in data["cases"]}[case] == ["corpus-bug"]
    only = client.get("/cases.json", {"digest": digest, "label": "corpus-bug"}).json()
    assert [c["case"] for c in only["cases"]] == [case]
    page = client.get("/cases/", {"digest": digest, "label": "corpus-bug"})
    assert [c.case for c, _ in page.context["lines"]] == [case]
    assert "corpus-bug (1)" in page.content.decode()
    assert client.get("/cases.json", {"digest": digest, "label": "Not A Slug!"}).status_code == 400
    text = b"".join(
        client.get("/cases.csv", {"digest": digest, "label": "corpus-bug"}).streaming_content
    ).decode()
    (row,) = list(csv.DictReader(io.StringIO(text)))
    assert (row["case"], row["labels"]) == (case, "corpus-bug")
    every = b"".join(client.get("/cases.csv", {"digest": digest}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(every)))
    assert len(rows) == len(data["cases"]) and {r["labels"] for r in rows} == {"", "corpus-bug"}


# --- the review queue ---------------------------------------------------------------------------

CASES = [c.id for c in KEY.cases[:3]]
FLIP, FLAKY, STEADY = CASES
RUNS = 6


def _marks(case: str, run: int) -> str:
    if case == FLIP:
        return "1111" if run < RUNS else "0000"
    if case == FLAKY:
        return "1010"
    return "1111"


@pytest.fixture
def queued(db):
    """Six scored runs of the demo corpus, two models, four repeats of three cases: one flips
    in the newest run, one is flaky throughout, one is steady."""
    ingest_series(RUNS, repeat=4, cases=len(CASES))
    runs = list(Run.objects.order_by("started_at"))
    for n, run in enumerate(runs, start=1):
        for f in CaseFigure.objects.filter(scoring=run.latest_scoring()):
            f.marks = _marks(f.case, n)
            f.clean, f.counted, f.total = f.marks.count("1"), 4, 4
            f.save()
    return runs


def _case_items() -> list:
    """The queue's case items (its failure modes new in the newest run aside)."""
    return [i for i in review_items() if i.kind != "mode"]


def test_the_queue_holds_the_newest_flip_and_the_unlabelled_flaky_case(client, viewer, queued):
    items = _case_items()
    assert [(i.kind, i.case) for i in items] == [("flipped", FLIP), ("flaky", FLAKY)]
    assert (
        items[0].run.run_id == "run-6"
        and items[0].url == f"/cases/case/?digest={DIGEST}&case={FLIP}"
    )
    page = client.get("/review/")
    body = page.content.decode()
    assert page.status_code == 200 and body.index(FLIP) < body.index(FLAKY)
    assert f'href="/cases/case/?digest={DIGEST}&amp;case={FLIP}"' in body
    assert 'data-key="1"' not in body  # a reader sees the queue, not the label buttons


def test_labelling_an_item_marks_it_reviewed(client, labeller, queued):
    assert 'data-key="1"' in client.get("/review/").content.decode()
    r = client.post(
        "/annotations/",
        {
            "target": "case",
            "digest": DIGEST,
            "case": FLAKY,
            "label": "known-flaky",
            "next": "/review/",
        },
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200
    assert [i.case for i in _case_items()] == [FLIP]
    client.post(
        "/annotations/",
        {
            "target": "case",
            "digest": DIGEST,
            "case": FLIP,
            "label": "model-error",
            "next": "/review/",
        },
    )
    assert _case_items() == []
    for mode in {i.mode for i in review_items()}:
        write(About("mode", mode=mode), Writer("w"), label=_label("expected"))
    assert review_items() == []
    assert "Nothing to review." in client.get("/review/").content.decode()


def test_a_resolved_label_puts_a_flaky_case_back_in_the_queue(queued):
    a, _ = write(About("case", DIGEST, FLAKY), Writer("w"), label=_label("known-flaky"))
    assert FLAKY not in [i.case for i in review_items()]
    set_resolved(a, Writer("w"))
    assert FLAKY in [i.case for i in review_items()]


def test_the_queue_refuses_a_malformed_digest(client, viewer, db):
    assert client.get("/review/", {"digest": "XYZ"}).status_code == 400


# --- the gate -----------------------------------------------------------------------------------


def test_a_known_flaky_label_excuses_a_planted_regression_and_nothing_else(demo):
    run, baseline = resolve(REGRESSED, BEFORE)
    digest = run.corpus_digest
    result = gate(run, baseline, "Clean")
    (row,) = result.regressed
    regressed = row["cases_regressed"]
    assert regressed and row["cases_regressed_total"] >= len(regressed)
    planted, real = regressed[0], regressed[1:]
    write(About("case", digest, planted), Writer("ci"), label=_label("known-flaky"))
    # A real regression labelled otherwise, or labelled once and resolved, is not excused.
    if real:
        write(About("case", digest, real[0]), Writer("ci"), label=_label("model-error"))
        old, _ = write(About("case", digest, real[0]), Writer("ci"), label=_label("known-flaky"))
        set_resolved(old, Writer("ci"))
    # Another corpus's label on the same case id excuses nothing here.
    write(About("case", "f" * 16, regressed[-1]), Writer("ci"), label=_label("known-flaky"))
    excused = excused_cases(digest, regressed)
    assert list(excused) == [planted] and excused[planted].label.slug == "known-flaky"
    assert not set(real) & set(excused)
    every = len(excused) == row["cases_regressed_total"]
    assert every == (row["cases_regressed_total"] == 1)
    assert excused_cases(digest, []) == {}


def test_a_failure_modes_labels_are_read_by_its_id(db):
    from records.queries.annotations import mode_labels, modes_annotated

    write(About("mode", mode=MODE), Writer("w"), label=_label("corpus-bug"))
    old, _ = write(About("mode", mode=MODE), Writer("w"), label=_label("expected"))
    set_resolved(old, Writer("w"))
    write(About("mode", mode="f" * 16), Writer("w"), note="a note, no label")
    assert mode_labels([MODE, "f" * 16, "e" * 16]) == {MODE: ["corpus-bug"]}
    assert modes_annotated([MODE, "f" * 16, "e" * 16]) == {MODE, "f" * 16}


def test_a_refused_form_sent_by_htmx_comes_back_in_place_saying_why(client, labeller, demo):
    digest, case = _case_of(demo)
    r = client.post(
        "/annotations/",
        {"target": "case", "digest": digest, "case": case, "link": "javascript:alert(1)"},
        headers={"HX-Request": "true"},
    )
    body = r.content.decode()
    assert r.status_code == 422 and body.lstrip().startswith('<section class="annotations"')
    assert "http or https" in body and not Annotation.objects.exists()


def test_the_gates_words_for_excused_cases_keep_each_case_id_in_its_code_span(db):
    from records.queries.annotations import excused_words

    for case in ("MT-040", "a|b`c"):
        write(About("case", "ab", case), Writer("w"), label=_label("known-flaky"))
    words = excused_words(excused_cases("ab", ["MT-040", "a|b`c", "MT-041"]))
    assert words.startswith("`MT-040`") or "`MT-040`" in words
    assert words.endswith("excused as known-flaky") and "MT-041" not in words
    assert "``a|b`c``" in words and excused_words({}) == ""


def test_the_gate_passes_a_row_whose_regressed_cases_are_all_known_flaky_and_says_so(demo, client):
    _, raw = ApiToken.issue("ci")
    auth = {"Authorization": f"Bearer {raw}"}
    run, baseline = resolve(REGRESSED, BEFORE)
    digest = run.corpus_digest
    (row,) = gate(run, baseline, "Clean").regressed
    every = row["cases_fell"]  # the cases whose Clean rate fell
    assert len(every) > 1
    # Labelling all but one is not enough: a real regression still fails the gate.
    for case in every[:-1]:
        write(About("case", digest, case), Writer("ci"), label=_label("known-flaky"))
    assert not gate(run, baseline, "Clean").passed
    # All of them known-flaky: the row is reported, excused, and the gate passes.
    write(About("case", digest, every[-1]), Writer("ci"), label=_label("known-flaky"), note="#123")
    result = gate(run, baseline, "Clean")
    (excused,) = result.regressed
    assert result.passed and excused["excused"] and set(excused["excused_by"]) == set(every)
    assert "excused as known-flaky" in result.markdown() and "#123" in result.markdown()
    answer = client.get(f"/api/v1/runs/{REGRESSED}/gate?baseline={BEFORE}", headers=auth).json()
    assert answer["passed"] is True and answer["regressed"][0]["excused"] is True
    # ignore_labels: the plain answer, as if no label existed.
    plain = client.get(
        f"/api/v1/runs/{REGRESSED}/gate?baseline={BEFORE}&ignore_labels=1", headers=auth
    ).json()
    assert plain["passed"] is False and plain["regressed"][0]["excused"] is False
    assert not gate(run, baseline, "Clean", ignore_labels=True).passed


def test_a_failure_mode_carries_its_labels_on_its_page_and_in_the_failures_filter(
    client, labeller, demo
):
    from records.models import FailureMode

    mode = FailureMode.objects.order_by("id").first()
    assert mode is not None
    page = client.get(f"/failures/{mode.id}/").content.decode()
    assert 'action="/annotations/"' in page  # the panel, to label this mode
    assert client.get("/failures.json", {"label": "corpus-bug"}).json()["count"] == 0
    write(About("mode", mode=mode.id), Writer("w"), label=_label("corpus-bug"), note="a corpus bug")
    found = client.get("/failures.json", {"label": "corpus-bug"}).json()
    assert [m["id"] for m in found["modes"]] == [mode.id]
    assert "a corpus bug" in client.get(f"/failures/{mode.id}/").content.decode()
    csv_text = b"".join(client.get("/failures.csv").streaming_content).decode()
    assert "corpus-bug" in csv_text


def test_a_failure_mode_new_in_the_newest_run_waits_in_the_queue_until_labelled(
    client, labeller, demo
):
    from records.queries.annotations import review_items
    from records.queries.failures import new_failures

    newest = Run.objects.order_by("-started_at").first()
    found = new_failures(newest)
    assert found is not None and found.modes
    queued = [i for i in review_items() if i.kind == "mode"]
    assert {i.mode for i in queued} == {m.id for m in found.modes}
    first = queued[0].mode
    assert first in client.get("/review/").content.decode()
    write(About("mode", mode=first), Writer("w"), label=_label("expected"))
    assert first not in {i.mode for i in review_items() if i.kind == "mode"}
