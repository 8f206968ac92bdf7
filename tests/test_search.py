"""Search across runs: each parameter's results held to what reading the shards directly gives,
the index written with the shard and removed with its run, and text matched as words only."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records.models import Run, Scoring, Verdict
from records.queries.search import CALL_COUNT, Search, SearchQuery
from records.search import engine
from tests.builders import encode, ingest_bytes, line
from tests.searched import refused

pytestmark = pytest.mark.django_db


def _found(query: SearchQuery) -> tuple[set, set, Search]:
    search = Search(query)
    attempts = search.page(1, 100_000)
    found = {(a.run.run_id, a.key) for a in attempts}
    calls = {(a.run.run_id, a.key, c.index) for a in attempts for c in a.matched}
    assert search.count() == len(found)
    assert search.call_count() == len(calls)
    return found, calls, search


CASES = {
    "everything": ({}, {}),
    "one run": (
        {"runs": ["run-2026-11-23-f00dfa"]},
        {"attempt": lambda a: a["run"]["run_id"] == "run-2026-11-23-f00dfa"},
    ),
    "digest prefix": (
        {"digest": "fixture"},
        {"attempt": lambda a: a["run"].get("corpus_digest", "").startswith("fixture")},
    ),
    "commit prefix": (
        {"commit": "f00d"},
        {"attempt": lambda a: a["run"].get("commit", "").startswith("f00d")},
    ),
    "model substring": ({"model": "nano"}, {"attempt": lambda a: "nano" in a["model"]}),
    "surface": ({"surface": "meta"}, {"attempt": lambda a: a["effective_surface"] == "meta"}),
    "case": ({"case": "MT-002"}, {"attempt": lambda a: a["case"] == "MT-002"}),
    "ended_by": (
        {"ended_by": "no_tool_call"},
        {"attempt": lambda a: a["ended_by"] == "no_tool_call"},
    ),
    "tool": (
        {"tool": "gitlab_execute_action"},
        {"call": lambda c: c["tool"] == "gitlab_execute_action"},
    ),
    "action either side": (
        {"action": "project.get"},
        {
            "call": lambda c: (
                "project.get" in (c.get("requested_action"), c.get("dispatched_action"))
            )
        },
    ),
    "every refusal": ({"outcome": "refused"}, {"call": refused}),
    "one refusal reason": (
        {"outcome": "refused:invalid_params"},
        {"call": lambda c: c["outcome"] == "refused:invalid_params"},
    ),
    "refused and executed on one call": (
        {"outcome": "refused:invalid_params", "tool": "gitlab_execute_action"},
        {
            "call": lambda c: (
                c["outcome"] == "refused:invalid_params" and c["tool"] == "gitlab_execute_action"
            )
        },
    ),
    "unobserved": ({"observed": False}, {"call": lambda c: not c.get("dispatch_observed", False)}),
    "truncated": (
        {"truncated": True},
        {"call": lambda c: c.get("result_truncated", False) or c.get("text_truncated", False)},
    ),
    "turn status": (
        {"turn_status": "rate_limited"},
        {"attempt": lambda a: any(t["status"] == "rate_limited" for t in a["turns"])},
    ),
    "failed verify": (
        {"verify_failed": True},
        {"attempt": lambda a: any(not v["passed"] for v in a["verifys"])},
    ),
    "words": ({"q": "default branch"}, {"q": "default branch"}),
    "words in a call's result": ({"q": "Default Branch 42"}, {"q": "Default Branch 42"}),
    "words and a call condition": (
        {"q": "project", "tool": "gitlab_find_action"},
        {"q": "project", "call": lambda c: c["tool"] == "gitlab_find_action"},
    ),
    "words split by punctuation": ({"q": "issue.create"}, {"q": "issue.create"}),
    "words with a surface": (
        {"q": "look action", "surface": "dynamic"},
        {"q": "look action", "attempt": lambda a: a["effective_surface"] == "dynamic"},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_parameter_selects_what_the_shards_hold(store, name):
    params, expect = CASES[name]
    attempts, calls = store.select(**expect)
    found, found_calls, _ = _found(SearchQuery(**params))
    assert found == attempts
    assert found_calls == calls
    if name != "everything":
        assert attempts, f"the store holds no attempt for {name}: the case would prove nothing"


# Call conditions narrowed to one run, by its run_id (`/search/?run=`) or its pk (its Attempts
# tab): the run's own calls, read by the calls' run. The demo's other runs hold the same cases,
# tools and outcomes, so a call of another run counted in would show.
NARROWED_RUN = "run-2026-11-23-f00dfa"
RUN_NARROWED = {
    "tool": ({"tool": "gitlab_execute_action"}, lambda c: c["tool"] == "gitlab_execute_action"),
    "action either side": (
        {"action": "project.get"},
        lambda c: "project.get" in (c.get("requested_action"), c.get("dispatched_action")),
    ),
    "every refusal": ({"outcome": "refused"}, refused),
    "a refusal and a tool": (
        {"outcome": "refused:invalid_params", "tool": "gitlab_execute_action"},
        lambda c: c["outcome"] == "refused:invalid_params" and c["tool"] == "gitlab_execute_action",
    ),
    "unobserved": ({"observed": False}, lambda c: not c.get("dispatch_observed", False)),
    "words and a tool": ({"q": "project", "tool": "gitlab_find_action"}, None),
}


def _narrowed(by: str, run_id: str = NARROWED_RUN) -> dict:
    return {"runs": [run_id]} if by == "runs" else {"run_pk": Run.objects.get(run_id=run_id).pk}


def test_a_call_condition_narrowed_to_a_run_selects_that_runs_calls(store):
    # One test over every case, on one store: each store written and rolled back leaves the
    # database's tables that much to vacuum.
    for name, (params, call) in RUN_NARROWED.items():
        if call is None:
            call = lambda c, tool=params["tool"]: c["tool"] == tool  # noqa: E731
        attempts, calls = store.select(
            attempt=lambda a: a["run"]["run_id"] == NARROWED_RUN, call=call, q=params.get("q", "")
        )
        assert attempts, f"the run holds no attempt for {name}: the case would prove nothing"
        for by in ("runs", "run_pk"):
            found, found_calls, _ = _found(SearchQuery(**params, **_narrowed(by)))
            assert (found, found_calls) == (attempts, calls), (name, by)


def _call_reads(statements: list[dict]) -> list[tuple[str, str]]:
    """How each statement reads the calls' filtered columns, in SQLite's plan: (the index, the
    columns it is searched by)."""
    reads = []
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute("EXPLAIN QUERY PLAN " + statement["sql"])
            for row in cursor.fetchall():
                read = re.search(r"SEARCH \w+ USING (?:COVERING )?INDEX (\w+) \((.*)\)", row[3])
                if read and read.group(1).startswith(("search_call", "records_searchcall")):
                    reads.append((read.group(1), read.group(2)))
    return reads


def test_a_run_narrowed_call_condition_reads_the_calls_by_their_run(store):
    for by in ("runs", "run_pk"):
        query = SearchQuery(tool="gitlab_execute_action", outcome="refused", **_narrowed(by))
        with CaptureQueriesContext(connection) as captured:
            search = Search(query)
            search.summary()
            search.page(1, 50)
        assert search.count() > 0
        statements = [q for q in captured.captured_queries if "records_searchcall" in q["sql"]]
        assert statements and all('"run_id"' in q["sql"] for q in statements), by
        if connection.vendor == "postgresql":
            # Its plan follows its statistics of the few runs stored here, which the tests
            # before leave as they happen to: the plan is checked where it is the same each time.
            continue
        reads = _call_reads(statements)
        # Every read of the calls searches an index by their run, none reads the store's calls.
        assert reads and all("run_id" in searched for _, searched in reads), (by, reads)
        assert not any(index == "search_call_tool" for index, _ in reads), (by, reads)


def _answer(query: SearchQuery) -> tuple:
    found, found_calls, search = _found(query)
    return found, found_calls, search.facets()


def test_the_other_runs_in_the_store_leave_a_run_narrowed_answer_as_it_was(store):
    queries = [
        SearchQuery(**params, **_narrowed(by))
        for params, _ in RUN_NARROWED.values()
        for by in ("runs", "run_pk")
    ]
    among_others = [_answer(q) for q in queries]
    # The demo's other runs hold the same cases, tools and outcomes as this one.
    others = Run.objects.exclude(run_id=NARROWED_RUN)
    assert others.filter(run_id__startswith="run-2026-").exists()
    for run in others:
        run.delete()
    assert [_answer(q) for q in queries] == among_others
    alone = _found(SearchQuery(tool="gitlab_execute_action"))[0]
    assert alone and {run_id for run_id, _ in alone} == {NARROWED_RUN}


def test_verdict_and_clean_read_each_runs_latest_scoring(store):
    latest = {}
    for s in Scoring.objects.filter(verdict_count__gt=0).order_by("run", "-created_at", "-id"):
        latest.setdefault(s.run_id, s.pk)
    verdicts = Verdict.objects.filter(scoring__in=latest.values()).select_related("attempt__run")
    failed = {(v.attempt.run.run_id, v.attempt.key) for v in verdicts if v.outcome == "failed"}
    clean = {(v.attempt.run.run_id, v.attempt.key) for v in verdicts if v.clean}
    assert failed and clean
    assert _found(SearchQuery(verdict="failed"))[0] == failed
    assert _found(SearchQuery(clean=True))[0] == clean


def test_facets_count_the_attempts_and_calls_the_query_matches(store):
    attempts, calls = store.select(call=refused)
    facets = _found(SearchQuery(outcome="refused"))[2].facets()
    by_run: dict[str, int] = {}
    for run_id, _ in attempts:
        by_run[run_id] = by_run.get(run_id, 0) + 1
    assert facets["run"] == by_run
    outcomes: dict[str, int] = {}
    for run_id, key, index in calls:
        c = next(c for c in store.attempts[(run_id, key)]["calls"] if c["index"] == index)
        outcomes[c["outcome"]] = outcomes.get(c["outcome"], 0) + 1
    assert facets["outcome"] == outcomes
    assert sum(facets["model"].values()) == len(attempts)


def test_query_syntax_in_words_is_never_an_operator(store):
    for q in ['"default', "default OR", "NOT branch*", "body:main", "a) AND (b", "-42 & |"]:
        attempts, calls = store.select(q=q)
        found, found_calls, _ = _found(SearchQuery(q=q))
        assert (found, found_calls) == (attempts, calls), q


def test_a_shard_is_searchable_once_stored_and_forgotten_with_its_run(store):
    query = SearchQuery(q="eval group some other project")
    key = "MT-002/dynamic/2"
    assert _found(query)[0] == {("run-fixture-dynamic", key), ("run-hostile", key)}
    Run.objects.get(run_id="run-fixture-dynamic").delete()
    assert _found(query)[0] == {("run-hostile", key)}
    everything = _found(SearchQuery(q="project"))[0]
    assert everything and all(run_id != "run-fixture-dynamic" for run_id, _ in everything)


def test_the_rebuild_command_indexes_runs_stored_before_the_index(store, capsys):
    query = SearchQuery(q="default branch")
    expected = _found(query)[:2]
    engine.forget_everything()
    assert _found(query)[0] == set()
    call_command("search_index")
    assert "indexed 5 runs" in capsys.readouterr().out
    assert _found(query)[:2] == expected
    call_command("search_index", "run-fixture-dynamic")  # again: no document twice
    assert _found(query)[:2] == expected


def test_a_rebuild_refreshes_the_statistics_of_the_calls_and_documents_it_indexed(
    store, monkeypatch
):
    # A large rebuild leaves the calls' statistics as a large ingest does: refreshed, with the
    # number of calls it wrote (PostgreSQL analyzes past a threshold; SQLite needs none), and
    # the documents' too (a text query's plan rests on how common its words are).
    from records.search import index
    from records.search.models import SearchCall, SearchEntry

    asked = []
    monkeypatch.setattr(
        index, "analyze_if_large", lambda rows, models: asked.append((rows, models))
    )
    call_command("search_index")
    assert asked == [(SearchCall.objects.count(), (SearchCall, SearchEntry))]
    assert asked[0][0] > 0


def test_after_a_large_index_postgresql_samples_the_documents_words(store):
    # A text query's plan rests on how common its words are: the documents' statistics must
    # cover their words (`body`), read here from the ANALYZE statements themselves.
    import re

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from records.bulk.tables import analyze_if_large
    from records.search.index import INDEX_TABLES

    if connection.vendor != "postgresql":
        pytest.skip("statistics are refreshed on PostgreSQL only")
    with CaptureQueriesContext(connection) as queries:
        analyze_if_large(10**6, INDEX_TABLES)
    (entry,) = [q["sql"] for q in queries.captured_queries if "records_searchentry" in q["sql"]]
    sampled = re.fullmatch(r'ANALYZE "records_searchentry"(?: \((.*)\))?', entry)
    assert sampled and (sampled[1] is None or '"body"' in sampled[1])


def test_a_huge_text_is_stored_and_searchable_by_its_head_alike_on_both_databases(db):
    # Three turns of 800 kB of distinct words: an attempt's text of 2.4 MB, whose words alone
    # would make a tsvector past PostgreSQL's 1 MB limit if it were indexed whole.
    words = [f"w{i:07d}" for i in range(240_000)]
    turns = [
        line("turn", index=n + 1, blocks=[{"kind": "text", "text": " ".join(chunk)}])
        for n, chunk in enumerate(words[k : k + 80_000] for k in range(0, 240_000, 80_000))
    ]
    lines = [line("attempt"), *turns, line("call"), line("verify"), line("session"), line("run")]
    report = ingest_bytes(("modeleval-huge.jsonl", encode(lines)))
    assert report.ok and len(report.stored) == 1

    def found(q: str) -> set[str]:
        return set(Search(SearchQuery(q=q)).attempts.values_list("key", flat=True))

    # What is indexed is the document's first INDEXED_CHARS characters, after a few of its
    # own these words (nine characters each with the space): a word well inside them matches,
    # one past them does not, on either database.
    width = len(words[0]) + 1
    inside, past = (engine.INDEXED_CHARS - 900) // width, (engine.INDEXED_CHARS + 900) // width
    assert found(words[0]) == found(words[inside]) == {"a1"}
    assert found(words[past]) == found(words[-1]) == set()


@pytest.mark.parametrize(
    "sort", ["", "-line", "case", "-model", "surface", "-input_tokens", "calls"]
)
@pytest.mark.parametrize(
    "params", [{}, {"tool": "gitlab_execute_action"}, {"q": "project"}, {"q": "main"}]
)
def test_a_page_cut_by_the_summary_is_the_page_the_list_gives(store, sort, params):
    # The page a results page or /search.json shows comes with the summary's one statement;
    # it must be the very attempts, in the very order, the list itself would give that page.
    query = SearchQuery(sort=sort, **params)
    per_page = 7
    every = [a.pk for a in Search(query).page(1, 100_000)]
    assert len(every) > 2 * per_page, "too few matches to cut pages from"
    pages = -(-len(every) // per_page)
    for number in (1, 2, pages):
        windowed = Search(query, window=(number, per_page))
        with CaptureQueriesContext(connection) as captured:
            shown = [a.pk for a in windowed.page(number, per_page)]
        assert shown == every[(number - 1) * per_page : number * per_page]
        # One statement chose the page and summed the facets; the attempts were then read by
        # key, not matched again.
        summary, read = captured.captured_queries[:2]
        assert "FROM m ORDER BY o0" in summary["sql"]
        assert "records_searchcall" not in read["sql"]
        assert "records_searchentry" not in read["sql"]
        assert windowed.count() == len(every)
    # Another page than the window's is chosen by the list, as before.
    other = Search(query, window=(1, per_page))
    assert [a.pk for a in other.page(2, per_page)] == every[per_page : 2 * per_page]


@pytest.mark.parametrize(
    "params",
    [
        {"tool": "gitlab_execute_action", "outcome": "refused"},
        {"q": "project"},
        {"tool": "gitlab_execute_action", "q": "project"},
    ],
)
def test_the_summary_selects_the_matching_calls_once(store, params):
    # The calls that match are selected once (k): the attempts listed are theirs, and the calls
    # counted are k's of those attempts, not the listed attempts' calls matched a second time
    # (on PostgreSQL with statistics, that second match read the store's attempts in full).
    search = Search(SearchQuery(**params))
    with CaptureQueriesContext(connection) as captured:
        summary = search.summary()
    (statement,) = captured.captured_queries
    assert statement["sql"].count('FROM "records_searchcall"') == 1, statement["sql"]
    assert summary[CALL_COUNT] > 0


def test_runs_that_share_a_run_id_are_counted_together_in_the_run_facet(db):
    # Two stored runs of one run_id (two shards of it, each stored): the facet shows the run_id
    # once, with every attempt of both, as selecting it (`run=`) lists them.
    def shard(attempts: list[str], commit: str) -> bytes:
        lines = []
        for key in attempts:
            lines += [line("attempt", id=key), line("call", attempt=key)]
        return encode([*lines, line("session"), line("run", run_id="run-twice", commit=commit)])

    report = ingest_bytes(
        ("modeleval-a.jsonl", shard(["a1", "a2"], "a" * 40)),
        ("modeleval-b.jsonl", shard(["b1"], "b" * 40)),
    )
    assert report.ok and Run.objects.filter(run_id="run-twice").count() == 2
    for query in (SearchQuery(), SearchQuery(tool="gitlab_find_action")):
        search = Search(query, window=(1, 25))
        assert search.facets()["run"] == {"run-twice": 3}
        assert len(search.page(1, 25)) == search.count() == 3
    assert Search(SearchQuery(runs=["run-twice"])).count() == 3


@pytest.mark.parametrize(
    "params", [{}, {"tool": "gitlab_execute_action"}, {"q": "project"}, {"q": "main"}]
)
def test_the_exports_rows_read_chunk_by_chunk_are_the_lists_rows_in_its_order(store, params):
    from operator import attrgetter

    from records.queries.search import ATTEMPT_COLUMNS, CALL_COLUMNS, CALL_SOURCES, attempt_identity

    # The export reads plain values; the page reads model instances: the same rows.
    query = SearchQuery(sort="-model", **params)
    expected = []
    for a in Search(query).page(1, 100_000):
        base = {
            **attempt_identity(a),
            "ended_by": a.ended_by,
            "verdict": a.outcome or "",
            "labels": " ".join(a.labels),
        }
        if not a.matched:
            expected.append({**base, **dict.fromkeys(CALL_COLUMNS, "")})
        for c in a.matched:
            call = {name: attrgetter(source)(c) for name, source in CALL_SOURCES}
            snippet = "".join(text for text, _ in c.pieces)
            expected.append({**base, **call, "snippet": snippet})
    assert len(expected) > 14
    blank = [""] * len(CALL_COLUMNS)
    groups = Search(query).groups(chunk=7)
    columns = [*ATTEMPT_COLUMNS, *CALL_COLUMNS]
    rows = [
        dict(zip(columns, [*a, *c], strict=True)) for a, calls in groups for c in calls or [blank]
    ]
    assert rows == expected
