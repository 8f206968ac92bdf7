"""Corpus keys through every path, stored scores, score pages, re-scoring and what changed."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command

from records.formats.corpus_key import CorpusKeyError, read_corpus_key
from records.models import ApiToken, CorpusKey, KeyCase, Run, ScoreRow, Scoring, Verdict
from records.scoring.run import account
from records.scoring.tables import fnv1a64, score_groups, score_rows
from records.scoring.vocabulary import coverage_caption
from tests.builders import (
    FIXTURE_SHARD,
    SAMPLE_KEY,
    encode,
    ingest_bytes,
    line,
    published_session,
    published_shard,
)

pytestmark = pytest.mark.django_db
KEY_BYTES = SAMPLE_KEY.read_bytes()


def fixture_for_sample_key() -> bytes:
    """The fixture shard with its run line pointing at the sample key (and given providers)."""
    text = FIXTURE_SHARD.read_text().replace('"fixture-corpus"', '"b519a10571ab2192"')
    return text.encode()


class TestKeys:
    def test_the_sample_key_digest_is_reproduced(self):
        assert read_corpus_key(KEY_BYTES, "k.json").digest == "b519a10571ab2192"

    def test_a_changed_key_is_refused_with_both_digests(self):
        doc = json.loads(KEY_BYTES)
        doc["cases"][0]["prompt"] += " please"
        with pytest.raises(CorpusKeyError) as info:
            read_corpus_key(json.dumps(doc).encode(), "k.json")
        assert "declares b519a10571ab2192 but its cases digest to" in info.value.message
        assert info.value.field == "corpus_digest"

    def test_the_operator_override_marks_the_key_not_verified(self):
        doc = json.loads(KEY_BYTES)
        doc["cases"][0]["prompt"] += " please"
        report = ingest_bytes(("key.json", json.dumps(doc).encode()), allow_digest_mismatch=True)
        key = CorpusKey.objects.get()
        assert not key.verified and key.declared_digest == "b519a10571ab2192"
        assert report.keys[0]["verified"] is False

    @pytest.mark.parametrize(
        ("mutate", "field"),
        [
            (lambda d: d.update(format="x/2"), "format"),
            (lambda d: d["cases"][0].update(extra=1), "cases[0].extra"),
            (lambda d: d["cases"][1].update(id="MT-002"), "cases[1].id"),
            (lambda d: d["cases"][0]["steps"][0].update(standalone="x"), "cases[0].steps[0]"),
            (
                lambda d: d["cases"][6]["steps"][1]["args"][1]["truth"].update(fact="x"),
                "cases[6].steps[1].args[1].truth",
            ),
            (
                lambda d: d["cases"][6]["steps"][1]["args"][1]["truth"]["produced"].update(step=2),
                "cases[6].steps[1].args[1].truth.produced.step",
            ),
            (lambda d: d["catalog"].update(gold={}), "catalog.gold"),
        ],
    )
    def test_malformed_keys_are_refused_naming_the_field(self, mutate, field):
        doc = json.loads(KEY_BYTES)
        mutate(doc)
        with pytest.raises(CorpusKeyError) as info:
            read_corpus_key(json.dumps(doc).encode(), "k.json", allow_digest_mismatch=True)
        assert info.value.field == field

    def test_the_override_reaches_the_api(self, client):
        doc = json.loads(KEY_BYTES)
        doc["cases"][0]["prompt"] += " please"
        _, raw = ApiToken.issue("ci")
        headers = {"Authorization": f"Bearer {raw}"}
        r = client.post(
            "/api/v1/uploads",
            {"file": [_file("k.json", json.dumps(doc).encode())]},
            headers=headers,
        )
        assert r.status_code == 422 and not CorpusKey.objects.exists()
        r = client.post(
            "/api/v1/uploads",
            {"file": [_file("k.json", json.dumps(doc).encode())], "allow_digest_mismatch": "1"},
            headers=headers,
        )
        assert r.status_code == 200 and CorpusKey.objects.get().verified is False

    def test_a_key_is_stored_with_its_cases_once(self):
        ingest_bytes(("corpus-key.json", KEY_BYTES))
        report = ingest_bytes(("copy.json", KEY_BYTES))
        assert CorpusKey.objects.count() == 1 and report.keys[0]["created"] is False
        assert list(KeyCase.objects.values_list("case_id", flat=True))[:2] == ["MT-002", "MT-003"]
        ms014 = KeyCase.objects.get(case_id="MS-014")
        assert ms014.steps[1]["args"][1]["truth"] == {"produced": {"step": 1, "field": "iid"}}

    def test_keys_upload_through_the_api_and_the_command(self, client, tmp_path, capsys):
        _, raw = ApiToken.issue("ci")
        r = client.post(
            "/api/v1/uploads",
            {"file": [_file("key.json", KEY_BYTES)]},
            headers={"Authorization": f"Bearer {raw}"},
        )
        assert r.status_code == 200 and r.json()["keys"][0]["digest"] == "b519a10571ab2192"
        CorpusKey.objects.all().delete()
        path = tmp_path / "key.json"
        path.write_bytes(KEY_BYTES)
        call_command("ingest", str(path), "--quiet")
        assert CorpusKey.objects.count() == 1


def _file(name, data):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


class TestScoring:
    def test_a_shard_is_scored_when_its_key_is_already_stored(self):
        ingest_bytes(("key.json", KEY_BYTES))
        report = ingest_bytes(("modeleval-f.jsonl", fixture_for_sample_key()))
        assert report.stored[0]["scored_against"] == "b519a10571ab2192"
        scoring = Scoring.objects.get()
        assert not scoring.stale and scoring.verdict_count == 2

    def test_a_key_arriving_scores_the_runs_that_carry_its_digest(self):
        ingest_bytes(("modeleval-f.jsonl", fixture_for_sample_key()))
        assert not Scoring.objects.exists()
        report = ingest_bytes(("key.json", KEY_BYTES))
        assert report.keys[0]["rescored_runs"] == [Run.objects.get().pk]

    def test_the_stored_rows_are_the_rows_of_spec_f(self):
        ingest_bytes(("key.json", KEY_BYTES), ("modeleval-f.jsonl", fixture_for_sample_key()))
        rows = {r.model: r for r in score_rows(Scoring.objects.get())}
        perfect, wrong = rows["fake:perfect"], rows["fake:wrong-args"]
        assert [p for _, p in perfect.columns] == [
            (1, 1),
            (1, 1),
            (1, 1),
            (1, 1),
            (0, 0),
            (1, 1),
            (1, 1),
        ]
        assert perfect.overhead == "1 / 1 (1 find, 0 invalid_params)"
        assert [p for _, p in wrong.columns] == [
            (0, 1),
            (1, 1),
            (1, 1),
            (0, 1),
            (0, 0),
            (0, 1),
            (0, 1),
        ]
        assert wrong.overhead == "0 / 1 (0 find, 0 invalid_params)"
        f = perfect.figures
        assert (
            f["input_tokens"],
            f["output_tokens"],
            f["cache_created_tokens"],
            f["cache_read_tokens"],
            f["turns"],
        ) == (4600, 124, 0, 2700, 3)
        assert (wrong.figures["input_tokens"], wrong.figures["turns"]) == (2600, 2)

    def test_the_fixture_rows_are_refused_upstream_for_incomplete_provenance(self):
        ingest_bytes(("key.json", KEY_BYTES), ("modeleval-f.jsonl", fixture_for_sample_key()))
        groups = score_groups(Scoring.objects.get())
        (group,) = groups
        assert [r.refusal[0] for r in group.rows] == ["fake-provider"] * 0 + [
            "incomplete-provenance"
        ] * 2
        assert group.caption == (
            "Compared as one table because these rows agree on surface `dynamic`, mode `default`, "
            "tier `ultimate`, corpus `b519a10571ab2192`, 1 of 8 cases (`"
            + fnv1a64(["MT-002"])
            + "`), contract `fixture-contract`, tool schemas `fixture-digest`, repeat 1."
        )

    def test_a_filtered_run_is_refused_first(self):
        ingest_bytes(("key.json", KEY_BYTES))
        data = fixture_for_sample_key().replace(
            b'"repeat":1}}\n', b'"repeat":1,"filter":"TestX"}}\n'
        )
        ingest_bytes(("modeleval-f.jsonl", data))
        rows = score_groups(Scoring.objects.get())[0].rows
        assert rows[0].refusal == ("filtered-run", "the run was filtered with -run 'TestX'")

    def test_scoring_against_another_key_is_fenced_as_stale(self, client, viewer):
        viewer.user_permissions.add(Permission.objects.get(codename="add_scoring"))
        ingest_bytes(("modeleval-f.jsonl", FIXTURE_SHARD.read_bytes()))
        ingest_bytes(("key.json", KEY_BYTES))
        run = Run.objects.get()
        html = client.get(f"/runs/{run.pk}/").content.decode()
        assert "No stored corpus key has this run's digest" in html
        r = client.post(f"/runs/{run.pk}/score/", {"key": CorpusKey.objects.get().pk})
        assert r.status_code == 302
        scoring = Scoring.objects.get()
        assert scoring.stale
        html = client.get(f"/runs/{run.pk}/scores/").content.decode()
        assert "Stale corpus." in html and "stale-corpus" in html
        md = client.get(f"/runs/{run.pk}/scores.md").content.decode()
        assert md.startswith("> **Stale corpus**")

    def test_scoring_by_hand_needs_the_permission(self, client, viewer):
        ingest_bytes(("modeleval-f.jsonl", FIXTURE_SHARD.read_bytes()), ("key.json", KEY_BYTES))
        r = client.post(f"/runs/{Run.objects.get().pk}/score/", {"key": CorpusKey.objects.get().pk})
        assert r.status_code == 403 and not Scoring.objects.exists()

    def test_an_unscoreable_run_says_why_and_stores_no_verdict(self):
        # Only a row upstream would publish is scored, so the run's provenance is complete.
        ingest_bytes(("key.json", KEY_BYTES))
        ingest_bytes(("modeleval-z.jsonl", published_shard(line("attempt", case="ZZ-999"))))
        scoring = Scoring.objects.get()
        assert scoring.verdict_count == 0 and "names case 'ZZ-999'" in scoring.error
        assert not Verdict.objects.exists()

    def test_an_unscoreable_attempt_in_a_row_upstream_refuses_is_left_out_not_fatal(self):
        # A sessionless attempt with no surface forms a row of its own with no session, which
        # the provenance rule refuses before scoring; the run's good row is scored and kept.
        ingest_bytes(("key.json", KEY_BYTES))
        lonely = line("attempt", id="a2", case="MS-001", surface="", session="")
        lonely["attempt"].update(ended_by="skipped", reason="needs a runner")
        ingest_bytes(("modeleval-z.jsonl", published_shard(line("attempt"), lonely)))
        scoring = Scoring.objects.get()
        assert scoring.verdict_count == 1, scoring.error
        assert "1 attempt(s) could not be scored" in scoring.error
        (row,) = score_rows(scoring)
        assert row.row_key.startswith("model=fake:perfect surface=dynamic mode=default")

    def _rows(self, *lines):
        ingest_bytes(("key.json", KEY_BYTES))
        ingest_bytes(("modeleval-r.jsonl", published_shard(*lines)))
        scoring = Scoring.objects.get()
        assert not scoring.error, scoring.error
        return {r.row_key: r for g in score_groups(scoring) for r in g.rows}

    def test_a_sessionless_skip_joins_the_one_row_two_sessions_share(self):
        """C.9: the candidates are rows (distinct row keys), not sessions."""
        skip = line("attempt", id="s1", session="", case="MS-001")
        skip["attempt"].update(ended_by="skipped", reason="needs a runner")
        rows = self._rows(
            line("attempt", id="a1", session="one"),
            line("attempt", id="a2", session="two"),
            skip,
            published_session(label="one"),
            published_session(label="two"),
        )
        (row,) = rows.values()
        assert row.figures["skipped"] == 1 and row.figures["total"] == 3
        # Its account, made again for its page from its own row, does not need the others'.
        told = {v.attempt.key: account(v).told for v in Verdict.objects.select_related("scoring")}
        assert len(told) == 3 and all(told.values()) and told["s1"]["outcome"] == "skipped"

    def test_a_session_with_an_empty_mode_is_its_own_row_which_upstream_refuses(self):
        rows = self._rows(
            line("attempt", id="a1", session="d"),
            line("attempt", id="a2", session="e"),
            published_session(label="d", mode="default"),
            published_session(label="e", mode=""),
        )
        empty = next(r for k, r in rows.items() if " mode= " in k)
        written = next(r for k, r in rows.items() if " mode=default " in k)
        assert empty.refusal == ("incomplete-provenance", "mode is empty")
        assert written.refusal is None

    def test_provenance_reads_the_session_lines_own_surface(self):
        # The attempt names its surface, the session line leaves it empty: upstream refuses.
        (row,) = self._rows(
            line("attempt", session="s"), published_session(label="s", surface="")
        ).values()
        assert row.surface == "dynamic"
        assert row.refusal == ("incomplete-provenance", "surface is empty")

    def test_attempts_naming_retired_cases_are_not_scored(self):
        ingest_bytes(("key.json", KEY_BYTES))
        data = encode(
            [
                line("attempt", case="MT-201"),
                line("attempt", id="a2", case="MT-002"),
                line("session"),
                line("run", corpus_digest="b519a10571ab2192"),
            ]
        )
        ingest_bytes(("modeleval-r.jsonl", data))
        scoring = Scoring.objects.get()
        assert scoring.verdict_count == 1 and "retired" in scoring.error


class TestPages:
    @pytest.fixture
    def scored(self):
        ingest_bytes(("key.json", KEY_BYTES), ("modeleval-f.jsonl", fixture_for_sample_key()))
        return Run.objects.get()

    def test_the_run_page_shows_scores_with_ratios_rates_and_links(self, client, viewer, scored):
        html = client.get(f"/runs/{scored.pk}/scores/").content.decode()
        assert "Compared as one table because" in html
        row = ScoreRow.objects.get(model="fake:perfect").row_key
        assert (
            f"/runs/{scored.pk}/attempts/?row={quote(row, safe='/')}&column=completion&hit=yes"
            in html
        )
        assert '>1 / 1</a> <span class="rate">100%</span>' in html
        assert "incomplete-provenance" in html and "What each column means" in html

    def test_numbers_lead_to_the_attempts_behind_them(self, client, viewer, scored):
        r = client.get(
            f"/runs/{scored.pk}/attempts/?outcome=failed",
            headers={"HX-Request": "true", "HX-Target": "attempt-list"},
        )
        body = r.content.decode()
        assert "MT-002/dynamic/2" in body and "MT-002/dynamic/1" not in body

    def test_scores_export_as_markdown_csv_and_json(self, client, viewer, scored):
        md = client.get(f"/runs/{scored.pk}/scores.md").content.decode()
        # Upstream publishes none of the fixture's rows: they are listed as its command
        # reports them, and drawn as tables on the pages only.
        assert md.startswith("refused [incomplete-provenance] model=fake:perfect surface=dynamic")
        assert "| Model" not in md
        doc = client.get(f"/runs/{scored.pk}/scores.json").json()
        assert doc["rows"][1]["argument_fidelity_numerator"] == 0
        text = b"".join(client.get(f"/runs/{scored.pk}/scores.csv").streaming_content).decode()
        assert "clean_numerator" in text.splitlines()[0]

    def test_the_attempt_page_explains_the_verdict_step_by_step(self, client, viewer, scored):
        a = scored.attempts.get(key="MT-002/dynamic/2")
        html = client.get(f"/attempts/{a.pk}/").content.decode()
        assert "the value is none of the spellings the recipe produced" in html
        assert (
            "<code><bdi>eval-group/some-other-project</bdi></code> · wanted "
            "<code><bdi>eval-group/eval-project or 42</bdi></code>" in html
        )

    def test_an_attempt_page_shows_no_steps_the_stored_verdict_does_not_rest_on(
        self, client, viewer, scored
    ):
        # The steps are scored again when shown, not stored: where that no longer gives the
        # stored verdict (here a count changed behind the scorer's back), none are shown.
        a = scored.attempts.get(key="MT-002/dynamic/2")
        Verdict.objects.filter(attempt=a).update(discovery=7)
        html = client.get(f"/attempts/{a.pk}/").content.decode()
        assert "no longer gives this verdict&#x27;s figures" in html
        assert "<th>Reached by</th>" not in html and " · wanted " not in html

    def test_an_attempt_page_made_by_another_scorer_version_says_so_instead_of_steps(
        self, client, viewer, scored
    ):
        a = scored.attempts.get(key="MT-002/dynamic/2")
        Scoring.objects.update(scorer_version="modelscore-port/0")
        html = client.get(f"/attempts/{a.pk}/").content.decode()
        assert "made by modelscore-port/0, not by today&#x27;s" in html
        assert "<th>Reached by</th>" not in html

    def test_the_matrix_shows_outcomes_per_case_and_model(self, client, viewer, scored):
        r = client.get(f"/runs/{scored.pk}/matrix/?surface=dynamic")
        assert r.context["models"] == ["fake:perfect", "fake:wrong-args"]
        ((case, cells),) = r.context["rows"]
        assert case == "MT-002" and [c["attempts"][0][2] for c in cells] == ["completed", "failed"]

    def test_key_pages_list_cases_and_the_runs_they_score(self, client, viewer, scored):
        key = CorpusKey.objects.get()
        assert "b519a10571ab2192" in client.get("/keys/").content.decode()
        html = client.get(f"/keys/{key.pk}/").content.decode()
        assert "MS-014" in html and "produced by step 1 at <code>iid</code>" in html
        assert scored.run_id in html

    def test_a_changed_key_rescore_lists_the_attempts_that_flipped(
        self, client, viewer, scored, capsys
    ):
        doc = json.loads(KEY_BYTES)
        # The corrected key accepts the other project too: a literal instead of the fact.
        doc["cases"][0]["steps"][0]["args"][0]["truth"] = {
            "literal": "eval-group/some-other-project"
        }
        ingest_bytes(("key-v2.json", json.dumps(doc).encode()), allow_digest_mismatch=True)
        call_command(
            "rescore", "--run", str(scored.pk), "--key", str(CorpusKey.objects.latest("id").pk)
        )
        assert "1 run scored" in capsys.readouterr().out
        r = client.get(f"/runs/{scored.pk}/flips/")
        changed = {f["key"]: (f["before"], f["after"]) for f in r.context["flips"]}
        assert changed == {
            "MT-002/dynamic/1": ("completed", "failed"),
            "MT-002/dynamic/2": ("failed", "completed"),
        }
        assert "No longer completed" in r.content.decode()


def test_coverage_captions_follow_e4():
    assert coverage_caption(0, "", 8) == ""
    assert (
        coverage_caption(8, fnv1a64([f"C{i}" for i in range(8)]), 8) == "the whole corpus (8 cases)"
    )
    assert coverage_caption(1, fnv1a64(["MT-002"]), 8) == f"1 of 8 cases (`{fnv1a64(['MT-002'])}`)"
    # FNV-1a 64 over "a\0": offset basis xor 'a', times prime, xor 0, times prime.
    h = 0xCBF29CE484222325
    for b in b"a\x00":
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    assert fnv1a64(["a"]) == format(h, "x")
    assert fnv1a64(["b", "a"]) == fnv1a64(["a", "b"])  # sorted before hashing
