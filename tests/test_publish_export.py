"""A run's upstream-format Markdown holds exactly what `gen_model_results` would publish, drawn
as render.go draws it, and lists what it would refuse as its command reports it (refusals.go's
rules and reasons, render.go's unpublished rows); evaldash's own pages keep every row."""

from __future__ import annotations

import json
import re

import pytest

from records.formats.model_results import APART_SENTENCE, TOKENS_SENTENCE
from records.models import CorpusKey, Run
from tests.builders import SAMPLE_KEY, ingest_bytes, line, published_session, published_shard

pytestmark = pytest.mark.django_db

KEY = (
    "model=fake:perfect surface=dynamic mode=default tier=ultimate corpus=b519a10571ab2192 "
    "contract=k1 tools=t1 repeat=1"
)


def _run(name: str, data: bytes) -> Run:
    report = ingest_bytes((name, data))
    assert report.ok, report.refused
    return Run.objects.get(shard__name=name)


def _md(client, run: Run) -> str:
    r = client.get(f"/runs/{run.pk}/scores.md")
    assert r.status_code == 200
    return r.content.decode()


@pytest.fixture(autouse=True)
def key():
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()))


def test_a_published_row_is_drawn_with_upstreams_words(client, viewer):
    md = _md(client, _run("modeleval-a.jsonl", published_shard(line("attempt"))))
    cases = CorpusKey.objects.get().case_count
    assert re.match(
        "Compared as one table because these rows agree on surface `dynamic`, mode `default`, "
        f"tier `ultimate`, corpus `b519a10571ab2192`, 1 of {cases} cases \\(`[0-9a-f]+`\\), "
        "contract `k1`, tool schemas `t1`, repeat 1\\.\n\n\\| Model ",
        md,
    )
    assert f"\n\n{APART_SENTENCE}\n\n| Model " in md and f"\n\n{TOKENS_SENTENCE}\n\n| Model " in md
    assert "Counted apart" not in md and "every attempt and every try" not in md
    assert "| `fake:perfect` | `real`   | `c0ffee` | 2026-11-01 | 19.3.0 ee |" in md
    assert md.endswith("| `t=0`           |\n") and "refused [" not in md


def test_a_fake_provider_row_is_listed_as_refused_and_kept_on_the_page(client, viewer):
    data = published_shard(line("attempt")).replace(b'"name": "real"', b'"name": "fake"')
    run = _run("modeleval-f.jsonl", data)
    assert _md(client, run) == (
        f'refused [fake-provider] {KEY}: "fake:perfect" is the fake provider, which answers from '
        "the corpus key\n"
    )
    page = client.get(f"/runs/{run.pk}/scores/").content.decode()
    assert "fake-provider" in page and "fake:perfect" in page


def test_a_runs_own_export_is_its_table_once_an_earlier_run_of_its_setup_exists(client, viewer):
    # What gen_model_results prints of the run alone: nothing claims its key in an empty record.
    first = _run("modeleval-a.jsonl", published_shard(line("attempt")))
    again = published_shard(line("attempt")).replace(b'"c0ffee"', b'"c0ffee2"')
    second = _run("modeleval-b.jsonl", again)
    md = _md(client, second)
    assert "refused [" not in md and "| `fake:perfect` | `real`   | `c0ffee2` |" in md
    assert md.startswith("Compared as one table") and md.count("| `fake:perfect` |") == 4
    # Folding it over the earlier run is /publish/'s, as -refold merges it.
    blocks = client.get(f"/publish/blocks.md?run={first.pk}&run={second.pk}").content.decode()
    assert blocks.endswith(
        f"merged into the published row {KEY}: 1 case(s) replaced (MS-001), 0 kept as they stood\n"
    )


def test_a_filtered_run_is_refused_as_upstream_words_it(client, viewer):
    data = published_shard(line("attempt")).replace(
        b'"repeat": 1, "tier"', b'"filter": "TestX", "repeat": 1, "tier"'
    )
    assert b"TestX" in data
    md = _md(client, _run("modeleval-x.jsonl", data))
    assert md == (
        f'refused [filtered-run] {KEY}: the run was filtered with -run "TestX", so it put part '
        "of the corpus and the row would read as the whole of it\n"
    )


def test_incomplete_provenance_names_the_first_empty_field_as_upstream_does(client, viewer):
    data = published_shard(line("attempt"), published_session(token_scopes=[]))
    md = _md(client, _run("modeleval-p.jsonl", data))
    assert md == (
        f'refused [incomplete-provenance] {KEY}: the provenance field "token_scopes" is empty, '
        "so nothing says what the credential could reach\n"
    )


def test_an_unobserved_session_is_refused_as_upstream_words_it(client, viewer):
    data = published_shard(line("attempt"), line("turn"), line("call"))
    md = _md(client, _run("modeleval-u.jsonl", data))
    assert md == (
        f'refused [unobserved-session] {KEY}: session "dynamic/default" made 1 call(s) and the '
        "server's span described none of them\n"
    )


def test_a_stale_corpus_row_is_refused_as_upstream_words_it(client, viewer):
    from records.scoring.run import score_run

    run = _run("modeleval-s.jsonl", published_shard(line("attempt"), corpus="0123456789abcdef"))
    score_run(run, CorpusKey.objects.get())
    md = _md(client, run)
    assert md.startswith("> **Stale corpus**")
    assert md.endswith(
        f"refused [stale-corpus] {KEY.replace('b519a10571ab2192', '0123456789abcdef')}: the run "
        "was put the corpus 0123456789abcdef and the corpus at HEAD is b519a10571ab2192\n"
    )


def test_an_individual_row_is_reported_not_drawn(client, viewer):
    session = published_session(label="individual/default", surface="individual", slice_size=96)
    attempt = line("attempt", surface="individual", session="individual/default", shown_tools=96)
    md = _md(client, _run("modeleval-i.jsonl", published_shard(attempt, session)))
    assert md == (
        "no managed block publishes the row model=fake:perfect surface=individual mode=default "
        "tier=ultimate slice=96 corpus=b519a10571ab2192 contract=k1 tools=t1 repeat=1\n"
    )


def test_the_markdown_reads_the_scoring_its_groups_came_from():
    from records.formats.corpus_key import read_corpus_key
    from records.scoring.markdown import markdown
    from records.scoring.run import score_run
    from records.scoring.tables import score_groups

    run = _run("modeleval-a.jsonl", published_shard(line("attempt")))
    sample = CorpusKey.objects.get()
    first = run.latest_scoring()
    groups = score_groups(first)
    smaller = json.loads(SAMPLE_KEY.read_bytes())
    smaller["cases"] = smaller["cases"][:-1]
    digest = read_corpus_key(json.dumps(smaller).encode(), "k", allow_digest_mismatch=True).digest
    smaller["corpus_digest"] = digest
    assert ingest_bytes(("smaller-key.json", json.dumps(smaller).encode())).ok
    other = CorpusKey.objects.exclude(pk=sample.pk).get()
    assert other.case_count != sample.case_count
    score_run(run, other)  # a rescoring lands after the groups were read
    assert run.latest_scoring().pk != first.pk and run.latest_scoring().stale
    md = markdown(first, groups)
    assert f"1 of {sample.case_count} cases" in md
    assert "Stale corpus" not in md and "stale-corpus" not in md
