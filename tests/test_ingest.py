"""Every way a shard arrives, one ingest entry point behind them, and every refusal."""

from __future__ import annotations

import io
import tarfile
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from records import models as m
from records.formats.rows import RunRow, SessionRow
from records.formats.shard import PAYLOADS
from tests.builders import FIXTURE_SHARD, MINIMAL, encode, ingest_bytes, line, shard

pytestmark = pytest.mark.django_db

GOOD = FIXTURE_SHARD.read_bytes()


def _zip(entries: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = 0o120777 << 16
            z.writestr(info, "/etc/passwd")
    return buf.getvalue()


def _tgz(entries: dict[str, bytes], *, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for info in extra or []:
            t.addfile(info)
    return buf.getvalue()


def test_the_fixture_shard_is_stored_with_every_record_and_its_totals():
    report = ingest_bytes(("modeleval-dynamic.jsonl", GOOD))
    assert report.ok and len(report.stored) == 1
    run = m.Run.objects.get()
    assert (run.run_id, run.tier, run.corpus_digest, run.repeat) == (
        "run-fixture-dynamic",
        "ultimate",
        "fixture-corpus",
        1,
    )
    assert run.started_at.isoformat() == "2026-09-16T09:00:00+00:00"
    assert m.Session.objects.get().surface == "dynamic"
    assert (
        m.Attempt.objects.count() == 2
        and m.Turn.objects.count() == 5
        and m.Call.objects.count() == 3
    )
    perfect = m.Attempt.objects.get(model="fake:perfect")
    assert (perfect.turn_count, perfect.try_count, perfect.call_count) == (3, 3, 2)
    assert (perfect.input_tokens, perfect.output_tokens, perfect.cache_read_tokens) == (
        4600,
        124,
        2700,
    )
    assert perfect.session.label == "dynamic-default" and perfect.effective_mode == "default"
    call = m.Call.objects.get(attempt=perfect, index=2)
    assert call.result == {
        "project": {
            "id": 42,
            "path_with_namespace": "eval-group/eval-project",
            "default_branch": "main",
        }
    }
    assert call.arguments["params"]["project_id"] == "eval-group/eval-project"
    rows = {s.model: s for s in m.SurfaceSummary.objects.all()}
    assert rows["fake:wrong-args"].input_tokens == 2600 and rows["fake:wrong-args"].turns == 2
    assert run.attempt_count == 2 and run.input_tokens == 7200


def test_the_same_content_is_stored_once_and_reported_as_already_present():
    ingest_bytes(("modeleval-dynamic.jsonl", GOOD))
    report = ingest_bytes(("modeleval-copy.jsonl", GOOD))
    assert report.stored == [] and report.present[0]["file"] == "modeleval-copy.jsonl"
    assert m.ShardFile.objects.count() == 1 and m.Attempt.objects.count() == 2


def test_a_bad_shard_stores_nothing_of_itself_and_the_good_shard_beside_it_is_stored():
    bad = shard(line("turn", attempt="ghost"))
    report = ingest_bytes(("modeleval-bad.jsonl", bad), ("modeleval-good.jsonl", GOOD))
    assert [s["file"] for s in report.stored] == ["modeleval-good.jsonl"]
    assert report.refused == [
        {
            "file": "modeleval-bad.jsonl",
            "line": 5,
            "field": "turn.attempt",
            "message": report.refused[0]["message"],
        }
    ]
    assert m.Run.objects.count() == 1 and m.Attempt.objects.count() == 2


def test_an_error_on_the_last_line_leaves_no_row_of_the_shard_behind():
    big = [line("attempt", id=f"a{i}") for i in range(3000)]
    big += [line("turn", attempt=f"a{i}") for i in range(3000)]  # more than one write batch
    big += [line("session"), '{"schema":1,"type":"run","run":{"run_id":"r","repeat":0}}']
    report = ingest_bytes(("modeleval-late.jsonl", encode(big)))
    assert report.refused[0]["line"] == 6002 and report.refused[0]["field"] == "run.repeat"
    for model in (
        m.ShardFile,
        m.Run,
        m.Attempt,
        m.Turn,
        m.Call,
        m.Verify,
        m.Session,
        m.Provider,
        m.SurfaceSummary,
    ):
        assert not model.objects.exists(), model


def test_lines_that_come_before_their_attempt_line_are_joined_to_it():
    data = encode(
        [line("turn"), line("call"), line("verify"), line("attempt"), line("session"), line("run")]
    )
    ingest_bytes(("modeleval-o.jsonl", data))
    a = m.Attempt.objects.get()
    assert (a.turns.count(), a.calls.count(), a.verifies.count()) == (1, 1, 1)
    assert (a.try_count, a.call_count) == (1, 1)


def test_providers_and_prices_are_stored_from_the_run_line():
    price = {
        "input_per_million_usd": 1.0,
        "output_per_million_usd": 5.0,
        "cache_write_per_million_usd": 1.25,
        "cache_read_per_million_usd": 0.1,
        "retrieved_on": "2026-09-16",
    }
    run = line(
        "run",
        providers=[
            {
                "spec": "anthropic:claude",
                "name": "anthropic",
                "model": "claude",
                "options": {"temperature": "provider default"},
                "price": price,
            },
            {"spec": "qwen:flash", "name": "qwen", "model": "flash"},
        ],
    )
    ingest_bytes(("modeleval-p.jsonl", encode([line("attempt"), line("session"), run])))
    priced, unpriced = m.Provider.objects.order_by("position")
    assert priced.price == (1.0, 5.0, 1.25, 0.1) and priced.retrieved_on == "2026-09-16"
    assert priced.options == {"temperature": "provider default"}
    assert unpriced.price is None


def test_the_run_and_session_rows_keep_every_plain_field_of_their_lines():
    written = {
        "run": {
            "package": "test/e2e/modeleval",
            "commit": "c0ffee",
            "started_at": "2026-11-01T10:00:00+00:00",
            "edition": "ee",
            "gitlab_version": "19.3.0",
            "tier_confirmed": True,
            "filter": "MS-",
            "contract_digest": "k1",
            "budget_usd": 2.5,
        },
        "session": {
            "meta_param_schema": "opaque",
            "tier_pin": "premium",
            "slice_size": 24,
            "token_scopes": ["api", "read_repository"],
            "tool_schema_digests": {"fake:perfect": "t1"},
        },
    }
    full = [line("attempt"), line("session", **written["session"]), line("run", **written["run"])]
    ingest_bytes(("modeleval-full.jsonl", encode(full)))
    run = m.Run.objects.get()
    session = run.sessions.get()
    stored = {"run": run, "session": session}
    for typ, row in (("run", RunRow), ("session", SessionRow)):
        # Every plain field of the line is a column (a nested list has a table of its own) ...
        assert set(row.__struct_fields__) == {"line", *PAYLOADS[typ].types}
        # ... and keeps what the line says.
        for name, value in {**MINIMAL[typ], **written[typ]}.items():
            kept = getattr(stored[typ], name)
            assert (kept.isoformat() if isinstance(kept, datetime) else kept) == value, name
    assert (run.line, session.line) == (3, 2)


def test_a_field_the_line_leaves_out_is_its_zero_value_or_unknown():
    ingest_bytes(("modeleval-bare.jsonl", encode([line("attempt"), line("session"), line("run")])))
    run = m.Run.objects.get()
    session = run.sessions.get()
    assert (run.package, run.tier_confirmed, run.started_at, run.budget_usd) == (
        "",
        False,
        None,
        None,
    )
    assert (session.tier_pin, session.slice_size, session.token_scopes) == ("", None, [])
    assert session.tool_schema_digests == {}


def test_sessionless_skips_join_the_single_candidate_with_their_model_and_surface():
    skip = line("attempt", id="a2", session="", ended_by="skipped", reason="needs ultimate")
    ingest_bytes(("modeleval-s.jsonl", shard(skip)))
    a2 = m.Attempt.objects.get(key="a2")
    assert (
        a2.session is None and a2.effective_mode == "default" and a2.effective_surface == "dynamic"
    )
    assert m.SurfaceSummary.objects.get().skipped == 1


def test_a_completed_attempt_with_a_reason_is_stored_with_a_warning_the_shard_keeps():
    report = ingest_bytes(
        ("modeleval-w.jsonl", encode([line("attempt", reason="42."), line("session"), line("run")]))
    )
    assert report.stored[0]["warnings"] == 1
    sf = m.ShardFile.objects.get()
    assert sf.warning_count == 1 and sf.warnings[0]["field"] == "attempt.reason"
    assert m.Attempt.objects.get().completed_with_reason


class TestArchives:
    def test_a_zip_artifact_stores_its_shards_and_ignores_other_files(self):
        data = _zip(
            {"ce/modeleval-1.jsonl": GOOD, "ce/e2e-calls/calls-1.jsonl": b"{}", "README.md": b"hi"}
        )
        report = ingest_bytes(("artifact.zip", data))
        assert [s["file"] for s in report.stored] == ["artifact.zip!ce/modeleval-1.jsonl"]
        assert {i["file"] for i in report.ignored} == {
            "artifact.zip!ce/e2e-calls/calls-1.jsonl",
            "artifact.zip!README.md",
        }

    def test_a_tar_gz_artifact_stores_its_shards(self):
        report = ingest_bytes(("artifact.tar.gz", _tgz({"ee/modeleval-2.jsonl": GOOD})))
        assert len(report.stored) == 1 and m.Run.objects.count() == 1

    @pytest.mark.parametrize(
        "name", ["../modeleval-1.jsonl", "/abs/modeleval-1.jsonl", "a/../../modeleval-1.jsonl"]
    )
    def test_entries_that_escape_the_archive_are_refused(self, name):
        report = ingest_bytes(("a.zip", _zip({name: GOOD, "ok/modeleval-3.jsonl": GOOD})))
        assert report.refused[0]["file"] == f"a.zip!{name}"
        assert "path" in report.refused[0]["message"]
        assert len(report.stored) == 1

    def test_symlinks_in_zip_files_are_refused(self):
        report = ingest_bytes(
            ("a.zip", _zip({"modeleval-1.jsonl": GOOD}, symlink="modeleval-l.jsonl"))
        )
        assert "symbolic link" in report.refused[0]["message"]

    @pytest.mark.parametrize(
        "kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE]
    )
    def test_links_and_devices_in_tar_files_are_refused(self, kind):
        info = tarfile.TarInfo("modeleval-dev.jsonl")
        info.type = kind
        info.linkname = "/etc/passwd"
        report = ingest_bytes(("a.tar.gz", _tgz({"modeleval-1.jsonl": GOOD}, extra=[info])))
        assert report.refused[0]["file"] == "a.tar.gz!modeleval-dev.jsonl"
        assert len(report.stored) == 1

    def test_an_archive_without_a_shard_is_refused(self):
        report = ingest_bytes(("empty.zip", _zip({})))
        assert "holds no shard" in report.refused[0]["message"]

    def test_a_file_that_is_not_what_its_name_says_is_refused(self):
        assert "not a zip archive" in ingest_bytes(("x.zip", GOOD)).refused[0]["message"]
        assert "not a gzip-compressed tar" in ingest_bytes(("x.tar.gz", GOOD)).refused[0]["message"]
        gz = _tgz({"modeleval-1.jsonl": GOOD})
        err = ingest_bytes(("modeleval-9.jsonl", gz)).refused[0]
        assert err["line"] == 1 and "not valid JSON" in err["message"]

    def test_a_zip_bomb_by_ratio_is_refused(self, settings):
        settings.EVALDASH_MAX_ARCHIVE_RATIO = 10
        bomb = _zip({"modeleval-bomb.jsonl": b"\n" * (8 * 1024 * 1024)})
        report = ingest_bytes(("bomb.zip", bomb))
        assert "compressed size" in report.refused[0]["message"] and not report.stored

    def test_a_zip_bomb_by_total_size_is_refused(self, settings):
        settings.EVALDASH_MAX_ARCHIVE_BYTES = 2 * 1024 * 1024
        bomb = _zip({f"modeleval-{i}.jsonl": b"\n" * (1024 * 1024) for i in range(3)})
        report = ingest_bytes(("bomb.zip", bomb))
        assert "expands beyond" in report.refused[-1]["message"]
        assert report.refused[-1]["file"] == "bomb.zip"

    def test_other_files_are_refused_by_name(self):
        assert "neither a shard" in ingest_bytes(("notes.txt", b"x")).refused[0]["message"]


class TestCommand:
    def test_it_ingests_a_file_a_directory_and_an_archive(self, tmp_path: Path, capsys):
        (tmp_path / "ce").mkdir()
        (tmp_path / "ce" / "modeleval-1.jsonl").write_bytes(GOOD)
        (tmp_path / "ce" / "calls-1.jsonl").write_bytes(b"{}")
        call_command("ingest", str(tmp_path), "--quiet")
        assert "1 shard stored (2 attempts, 12 lines)" in capsys.readouterr().out
        other = tmp_path / "modeleval-2.jsonl"
        other.write_bytes(encode([line("attempt"), line("session"), line("run", run_id="r2")]))
        archive = tmp_path / "a.tar.gz"
        archive.write_bytes(_tgz({"modeleval-3.jsonl": shard(line("attempt", id="a9"))}))
        call_command("ingest", str(other), str(archive), "--quiet")
        assert "2 shards stored" in capsys.readouterr().out
        assert m.Run.objects.count() == 3

    def test_it_fails_naming_what_it_refused(self, tmp_path: Path, capsys):
        bad = tmp_path / "modeleval-bad.jsonl"
        bad.write_bytes(b"{\n")
        with pytest.raises(CommandError):
            call_command("ingest", str(bad), "--quiet")
        assert "refused: modeleval-bad.jsonl line 1" in capsys.readouterr().err

    def test_names_carry_no_path_of_this_machine(self, tmp_path: Path, client, viewer):
        (tmp_path / "ee").mkdir()
        (tmp_path / "ee" / "modeleval-2.jsonl").write_bytes(GOOD)
        call_command("ingest", str(tmp_path), "--quiet")
        shard = m.ShardFile.objects.get()
        assert shard.name == "ee/modeleval-2.jsonl"
        for url in (f"/runs/{shard.run.pk}/sessions/", f"/uploads/{shard.upload_id}/"):
            html = client.get(url).content.decode()
            assert "ee/modeleval-2.jsonl" in html and str(tmp_path) not in html, url

    def test_an_empty_directory_is_an_error(self, tmp_path: Path):
        with pytest.raises(CommandError):
            call_command("ingest", str(tmp_path), "--quiet")


class TestUploadPage:
    def test_several_files_upload_at_once_and_the_report_names_each(self, client, uploader):
        bad = SimpleUploadedFile("modeleval-bad.jsonl", b'{"schema":3}\n')
        good = SimpleUploadedFile("modeleval-good.jsonl", GOOD)
        r = client.post("/upload/", {"files": [good, bad]}, headers={"HX-Request": "true"})
        assert r.status_code == 422
        html = r.content.decode()
        assert "modeleval-good.jsonl" in html and "run-fixture-dynamic" in html
        assert "modeleval-bad.jsonl" in html and "schema 3 is not 1" in html
        assert "<html" not in html  # the partial only
        up = m.Upload.objects.get()
        assert up.user == uploader and up.source == "web" and len(up.summary["stored"]) == 1

    def test_uploading_needs_the_permission(self, client):
        client.force_login(User.objects.create_user("bo", password="pw-123456789"))
        r = client.post("/upload/", {"files": [SimpleUploadedFile("modeleval-1.jsonl", GOOD)]})
        assert r.status_code == 403 and not m.Run.objects.exists()

    def test_anonymous_users_are_sent_to_log_in(self, client):
        assert client.get("/upload/").status_code == 302


class TestApi:
    def post(self, client, token: str | None, *files: tuple[str, bytes]):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        data = {"file": [SimpleUploadedFile(n, d) for n, d in files]}
        return client.post("/api/v1/uploads", data, headers=headers)

    def test_a_token_uploads_and_the_answer_says_what_was_stored(self, client):
        token, raw = m.ApiToken.issue("ci")
        r = self.post(client, raw, ("artifact.zip", _zip({"modeleval-1.jsonl": GOOD})))
        assert r.status_code == 200
        body = r.json()
        assert body["stored"][0]["run_id"] == "run-fixture-dynamic" and body["refused"] == []
        r = self.post(client, raw, ("modeleval-1.jsonl", GOOD))
        assert r.json()["already_present"][0]["file"] == "modeleval-1.jsonl"
        token.refresh_from_db()
        assert token.last_used_at is not None
        assert m.Upload.objects.filter(token=token).count() == 2

    def test_refusals_come_back_as_422_with_file_line_and_field(self, client):
        _, raw = m.ApiToken.issue("ci")
        r = self.post(client, raw, ("modeleval-1.jsonl", b"\n{\n"))
        assert r.status_code == 422
        assert r.json()["refused"][0] | {"message": ""} == {
            "file": "modeleval-1.jsonl",
            "line": 2,
            "field": None,
            "message": "",
        }

    def test_a_wrong_token_gets_401_and_stores_nothing(self, client):
        m.ApiToken.issue("ci")
        assert self.post(client, "evd_wrong", ("modeleval-1.jsonl", GOOD)).status_code == 401
        assert self.post(client, None, ("modeleval-1.jsonl", GOOD)).status_code == 401
        assert not m.Run.objects.exists() and not m.Upload.objects.exists()

    def test_a_revoked_token_gets_403_and_stores_nothing(self, client):
        from django.utils import timezone

        token, raw = m.ApiToken.issue("ci")
        token.revoked_at = timezone.now()
        token.save()
        assert self.post(client, raw, ("modeleval-1.jsonl", GOOD)).status_code == 403
        assert not m.Run.objects.exists()

    def test_tokens_are_stored_hashed(self):
        token, raw = m.ApiToken.issue("ci")
        assert raw not in (token.digest, token.hint) and len(token.digest) == 64
        assert m.ApiToken.authenticate(raw) == token

    def test_the_upload_limit_answers_413(self, client, settings):
        settings.EVALDASH_MAX_UPLOAD_BYTES = 100
        _, raw = m.ApiToken.issue("ci")
        assert self.post(client, raw, ("modeleval-1.jsonl", GOOD)).status_code == 413

    def test_the_create_token_command_prints_the_token_once(self, capsys):
        call_command("create_token", "ci-bot")
        out = capsys.readouterr().out
        raw = out.split()[-1]
        assert m.ApiToken.authenticate(raw).name == "ci-bot"


class TestAccessAndAudit:
    def test_deleting_a_run_needs_the_permission_and_is_recorded(self, client):
        from records.models import AuditEvent

        ingest_bytes(("modeleval-dynamic.jsonl", GOOD))
        run = m.Run.objects.get()
        user = User.objects.create_user("del", password="pw-123456789")
        client.force_login(user)
        assert client.post(f"/runs/{run.pk}/delete/").status_code == 403
        assert m.Run.objects.exists()
        user.user_permissions.add(Permission.objects.get(codename="delete_run"))
        user = User.objects.get(pk=user.pk)
        client.force_login(user)
        assert client.post(f"/runs/{run.pk}/delete/").status_code == 302
        assert (
            not m.Run.objects.exists()
            and not m.Attempt.objects.exists()
            and not m.Turn.objects.exists()
        )
        event = AuditEvent.objects.get()
        assert (event.user, event.action, event.detail["run_id"]) == (
            user,
            "delete-run",
            "run-fixture-dynamic",
        )
        # The shard may be uploaded again afterwards.
        assert ingest_bytes(("modeleval-dynamic.jsonl", GOOD)).stored

    def test_check_deploy_is_clean_with_production_settings(self):
        import os
        import secrets
        import subprocess
        import sys

        from django.conf import settings

        dev_only = ("DEBUG", "EVALDASH_INSECURE_DEV_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")
        env = {k: v for k, v in os.environ.items() if k not in dev_only}
        env.update(
            DEBUG="0",
            SECRET_KEY=secrets.token_urlsafe(60),
            ALLOWED_HOSTS="evaldash.example",
            EVALDASH_HSTS_SECONDS="31536000",
            EVALDASH_SSL_REDIRECT="1",
        )
        out = subprocess.run(
            [
                sys.executable,
                str(settings.BASE_DIR / "manage.py"),
                "check",
                "--deploy",
                "--fail-level",
                "WARNING",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "no issues" in out.stdout

    def test_settings_refuse_malformed_values_naming_the_variable(self):
        import os
        import subprocess
        import sys

        from django.conf import settings

        env = {**os.environ, "DEBUG": "perhaps"}
        out = subprocess.run(
            [sys.executable, str(settings.BASE_DIR / "manage.py"), "check"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode != 0 and "DEBUG='perhaps' is not a boolean" in out.stderr

    def test_an_ingest_that_fails_part_way_leaves_nothing_and_can_be_repeated(self, monkeypatch):
        from records.bulk import tables

        calls = {"n": 0}
        real = tables.Table.flush

        def failing(self, cursor):
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("the disk went away")
            return real(self, cursor)

        monkeypatch.setattr(tables.Table, "flush", failing)
        (refused,) = ingest_bytes(("modeleval-dynamic.jsonl", GOOD)).refused
        assert "unexpected RuntimeError (the disk went away)" in refused["message"]
        for model in (m.ShardFile, m.Run, m.Attempt, m.Turn, m.Call):
            assert not model.objects.exists()
        monkeypatch.setattr(tables.Table, "flush", real)
        assert ingest_bytes(("modeleval-dynamic.jsonl", GOOD)).stored


# ANALYZE samples a few thousand of a table's pages: after the suite's earlier tests (rolled back,
# their dead rows left in place) it likely sampled none of this shard's five turns at times, and
# wrote no statistics. The tables start empty here: the shard's rows are all there is to sample.
@pytest.mark.django_db(transaction=True)
def test_after_a_large_load_postgresql_samples_only_the_columns_plans_use():
    """The columns sampled are read from the ANALYZE statements themselves: pg_stats and
    pg_class also show what autovacuum sampled or counted, which the test cannot hold still."""
    import re

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from records.bulk.tables import analyze_if_large

    if connection.vendor != "postgresql":
        pytest.skip("statistics are refreshed on PostgreSQL only")
    with connection.cursor() as cur:  # a new, empty file for each (and what refers to them)
        tables = ", ".join(connection.ops.quote_name(t._meta.db_table) for t in (m.Attempt, m.Turn))
        cur.execute(f"TRUNCATE {tables} CASCADE")
    assert ingest_bytes(("modeleval-dynamic.jsonl", GOOD)).stored
    assert m.Attempt.objects.exists() and m.Turn.objects.exists()
    with CaptureQueriesContext(connection) as queries:
        analyze_if_large(10**6, (m.Attempt, m.Turn))
    sampled = {}
    for query in queries.captured_queries:
        if found := re.fullmatch(r'ANALYZE "(\w+)" \(([^)]*)\)', query["sql"]):
            sampled[found[1]] = set(re.findall(r'"(\w+)"', found[2]))
    attempts, turns = sampled[m.Attempt._meta.db_table], sampled[m.Turn._meta.db_table]
    assert {"run_id", "case"} <= attempts and "stimulus" not in attempts
    assert "attempt_id" in turns and "blocks" not in turns
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tablename, attname FROM pg_stats WHERE tablename IN (%s, %s)",
            [m.Attempt._meta.db_table, m.Turn._meta.db_table],
        )
        statistics = set(cur.fetchall())
    assert {(m.Attempt._meta.db_table, c) for c in attempts} <= statistics
    assert {(m.Turn._meta.db_table, c) for c in turns} <= statistics


def _compression_of(columns: dict[str, tuple[str, ...]]) -> dict[tuple[str, str], str]:
    """PostgreSQL: each named column's compression method (`l` for lz4), by (table, column)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("column compression is PostgreSQL's")
    got = {}
    with connection.cursor() as cur:
        for table, names in columns.items():
            cur.execute(
                "SELECT attname, attcompression FROM pg_attribute "
                "WHERE attrelid = %s::regclass AND attname = ANY(%s)",
                [table, list(names)],
            )
            got.update({(table, c): m for c, m in cur.fetchall()})
    return got


def test_on_postgresql_the_bulky_columns_are_compressed_with_lz4():
    got = _compression_of(
        {"records_call": ("result", "arguments", "text"), "records_turn": ("blocks",)}
    )
    assert len(got) == 4 and set(got.values()) == {"l"}, got


def test_on_postgresql_a_compression_the_server_refuses_otherwise_is_not_passed_over():
    from django.db import DatabaseError, connection

    from records.bulk.tables import compress_columns

    if connection.vendor != "postgresql":
        assert not compress_columns(connection, {"records_call": ("text",)}, "lz4")
        return
    assert compress_columns(connection, {"records_call": ("text",)}, "lz4")
    # Only a server without the method keeps its default quietly; a wrong name is an error.
    with pytest.raises(DatabaseError, match="invalid compression method"):
        compress_columns(connection, {"records_call": ("text",)}, "lz5")


@pytest.mark.parametrize("parser", ["in line", "second process"])
def test_a_value_past_a_32_bit_column_refuses_the_shard_alike_on_both_databases(parser, settings):
    # A turn index fits 64 bits but not PostgreSQL's 32-bit column (SQLite's would hold it):
    # the reader refuses it, so both databases answer alike, by the shard's line and field.
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 10**12 if parser == "in line" else 0
    data = encode(
        [line("attempt"), line("turn", index=3_000_000_000), line("session"), line("run")]
    )
    report = ingest_bytes(("modeleval-big-index.jsonl", data))
    (refused,) = report.refused
    assert refused["file"] == "modeleval-big-index.jsonl"
    assert (refused["line"], refused["field"]) == (2, "turn.index")
    assert "32 bits" in refused["message"]
    assert not m.ShardFile.objects.exists() and not m.Attempt.objects.exists()
    assert ingest_bytes(("modeleval-dynamic.jsonl", GOOD)).stored
