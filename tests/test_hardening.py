"""What an attacker or a careless CI job sends: bodies over the limit, NUL characters, deep
values, repeated password guesses. Each is refused cleanly, the same way on both databases."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http.multipartparser import MultiPartParser

from records.models import ApiToken, AuditEvent, ConformanceSuite, CorpusKey, Run, Upload
from tests.builders import FIXTURE_SHARD, FIXTURES, SAMPLE_KEY, encode, ingest_bytes, line, shard

pytestmark = pytest.mark.django_db
GOOD = FIXTURE_SHARD.read_bytes()
SUITE = (FIXTURES / "conformance" / "cases.json").read_bytes()
TWO_FAIL = (FIXTURES / "conformance" / "run-two-failures.jsonl").read_bytes()


@pytest.fixture
def never_parsed(monkeypatch):
    """Fails the test if any request body is parsed (and so spooled to disk)."""
    monkeypatch.setattr(MultiPartParser, "parse", lambda self: pytest.fail("the body was read"))


# --- request bodies ------------------------------------------------------------------------------


def test_a_large_post_to_the_login_page_is_refused_from_its_length_unread(client, never_parsed):
    r = client.post("/login/", {"username": "x"}, CONTENT_LENGTH=str(2 * 1024**3))
    assert r.status_code == 413
    assert "EVALDASH_MAX_REQUEST_BYTES" in r.content.decode()


def test_an_upload_over_the_limit_is_refused_before_the_token_is_even_read(
    client, settings, never_parsed
):
    settings.EVALDASH_MAX_UPLOAD_BYTES = 1000
    r = client.post("/api/v1/uploads", {"file": "x"}, CONTENT_LENGTH="1001")
    assert r.status_code == 413 and "EVALDASH_MAX_UPLOAD_BYTES" in r.json()["error"]
    assert not Upload.objects.exists()


def test_the_upload_page_refuses_an_over_limit_body_unread(
    client, settings, uploader, never_parsed
):
    settings.EVALDASH_MAX_UPLOAD_BYTES = 1000
    r = client.post("/upload/", {"file": "x"}, CONTENT_LENGTH="5000")
    assert r.status_code == 413 and not Upload.objects.exists()


def test_an_upload_page_takes_a_body_larger_than_other_pages_do(client, settings, uploader):
    settings.EVALDASH_MAX_REQUEST_BYTES = 1024
    r = client.post("/upload/", {"file": SimpleUploadedFile("modeleval-a.jsonl", GOOD)})
    assert r.status_code == 200 and Run.objects.count() == 1


def test_an_uploaded_file_is_parsed_into_the_storage_and_leaves_nothing_behind(
    client, settings, uploader, tmp_path, monkeypatch, upload_dir
):
    # Nothing goes to the temporary directory; the file waits in the storage's own incoming
    # directory only while the request has it (a part a killed server left there is swept by
    # the workers, tests/test_upload_speed.py), and is gone once the upload is done.
    from records.views import uploads as views

    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "temporary")
    os.mkdir(settings.FILE_UPLOAD_TEMP_DIR)
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    seen: list[list[str]] = []
    real = views.keep_files

    def looking(files, *args, **kwargs):
        seen.append(os.listdir(upload_dir / ".incoming"))
        return real(files, *args, **kwargs)

    monkeypatch.setattr(views, "keep_files", looking)
    r = client.post("/upload/", {"file": SimpleUploadedFile("modeleval-a.jsonl", GOOD)})
    assert r.status_code == 200 and Run.objects.count() == 1
    assert len(seen) == 1 and len(seen[0]) == 1  # the one file, while the request had it
    assert os.listdir(settings.FILE_UPLOAD_TEMP_DIR) == []
    assert [f for _, _, names in os.walk(upload_dir) for f in names] == []


# --- NUL characters: refused by name on both databases ------------------------------------------


@pytest.mark.parametrize(
    "url", ["/?model=a%00b", "/conformance/adapter/?name=x%00", "/runs.csv?surface=%00"]
)
def test_a_nul_in_a_query_parameter_is_a_bad_request_naming_it(client, url, settings):
    settings.EVALDASH_PUBLIC_READ = True
    r = client.get(url)
    assert r.status_code == 400
    assert "holds a NUL character" in r.content.decode()


def test_a_nul_in_a_shard_string_is_refused_with_its_line_and_field():
    data = shard(line("verify", name="ok", detail="a\u0000b", passed=False))
    (refused,) = ingest_bytes(("modeleval-nul.jsonl", data)).refused
    assert (refused["line"], refused["field"]) == (5, "verify.detail")
    assert "NUL" in refused["message"] and not Run.objects.exists()


def test_a_nul_in_a_corpus_key_source_is_refused_naming_the_field():
    doc = json.loads(SAMPLE_KEY.read_bytes())
    doc["source"] = "a\u0000b"
    (refused,) = ingest_bytes(("key.json", json.dumps(doc).encode())).refused
    assert refused["field"] == "source" and not CorpusKey.objects.exists()


def test_a_nul_in_a_conformance_failure_text_or_field_is_refused_naming_it(client):
    ingest_bytes(("cases.json", SUITE))
    assert ConformanceSuite.objects.exists()
    _, raw = ApiToken.issue("ci")
    auth = {"Authorization": f"Bearer {raw}"}
    text = TWO_FAIL.decode().replace(
        "memory message 0 is not marked untrusted", "bad\\u0000text", 1
    )
    r = client.post(
        "/api/v1/conformance",
        {"output": SimpleUploadedFile("o.jsonl", text.encode()), "adapter": "a", "exit_status": 1},
        headers=auth,
    )
    assert r.status_code == 422
    refused = r.json()["refused"][0]
    assert refused["line"] and "NUL" in refused["message"] and refused["field"]
    r = client.post(
        "/api/v1/conformance",
        {"output": SimpleUploadedFile("o.jsonl", TWO_FAIL), "adapter": "a\x00", "exit_status": 1},
        headers=auth,
    )
    assert r.status_code == 422 and r.json()["refused"][0]["field"] == "adapter"


def test_invalid_utf8_is_reported_with_the_byte_where_it_starts():
    data = shard(line("verify", name="ok")).replace(b'"name": "ok"', b'"name": "o\xffk"')
    (refused,) = ingest_bytes(("modeleval-bad.jsonl", data)).refused
    assert "invalid UTF-8 at byte" in refused["message"]
    assert "surrogates" not in refused["message"]


# --- pages ---------------------------------------------------------------------------------------


def test_pages_for_a_logged_in_reader_are_private_to_caches(client, uploader):
    r = client.get("/")
    assert r.status_code == 200 and "private" in r["Cache-Control"]


def test_token_names_are_shown_to_staff_only(client, django_user_model):
    token, raw = ApiToken.issue("deploy-bot")
    client.post(
        "/api/v1/uploads",
        {"file": SimpleUploadedFile("modeleval-a.jsonl", GOOD)},
        headers={"Authorization": f"Bearer {raw}"},
    )
    up = Upload.objects.get()
    reader = django_user_model.objects.create_user("r", password="pw-123456789")
    client.force_login(reader)
    html = client.get(f"/uploads/{up.pk}/").content.decode()
    assert "deploy-bot" not in html and "an upload token" in html
    reader.is_staff = True
    reader.save()
    assert "deploy-bot" in client.get(f"/uploads/{up.pk}/").content.decode()


def test_csv_cells_that_start_a_formula_after_white_space_are_neutralised():
    from records.formats.spreadsheet import csv_safe

    assert csv_safe("  =HYPERLINK(1)") == "'  =HYPERLINK(1)"
    assert csv_safe("\u00a0+1") == "'\u00a0+1"
    assert csv_safe("plain = fine") == "plain = fine"


def test_a_rows_cells_are_taken_in_the_headers_order_each_made_safe():
    from django.utils.safestring import mark_safe

    from records.formats.spreadsheet import csv_cells

    row = {"b": mark_safe("=1+1"), "a": "@SUM(A1)", "c": 7, "d": "é=1", "e": ""}
    cells = csv_cells(row, ["a", "b", "c", "d", "e", "missing"])
    # A subclass of text (a marked-safe string) is text too.
    assert cells == ["'@SUM(A1)", "'=1+1", 7, "é=1", "", None]


# Rows in one batch are written by the request; in batches of 5, by the CSV writer process.
@pytest.mark.parametrize("batch_rows", [4000, 5])
def test_rows_written_in_groups_are_the_bytes_of_the_rows_written_one_by_one(
    monkeypatch, batch_rows
):
    from records import csv_writer
    from records.formats.spreadsheet import CSV_BATCH
    from records.views.exports import export, export_groups

    monkeypatch.setattr(csv_writer, "BATCH_ROWS", batch_rows)

    def body(response):
        return b"".join(response.streaming_content)

    heads = [{"a": f"=x{i}", "b": 'say "hi",\nthen', "c": i} for i in range(CSV_BATCH + 3)]
    tails = [[], [{"d": "", "e": "-1"}], [{"d": "@", "e": None}, {"d": "é", "e": 2.5}]]
    groups = [(h, tails[i % 3]) for i, h in enumerate(heads)]
    blank = {"d": "", "e": ""}
    rows = [{**h, **t} for h, ts in groups for t in ts or [blank]]
    cells = [([h[c] for c in "abc"], [[t[c] for c in "de"] for t in ts]) for h, ts in groups]
    grouped = body(export_groups("x", ["a", "b", "c"], ["d", "e"], iter(cells)))
    assert grouped == body(export("csv", "x", iter(rows)))
    assert (
        grouped.count(b"'=x") == len(rows) > len(heads) and b"'-1" in grouped and b"'@" in grouped
    )
    # Nothing found: no header either, as for every export.
    assert body(export_groups("x", ["a", "b"], ["d", "e"], iter([]))) == b""
    with pytest.raises(ValueError):
        export_groups("x", ["a", "b"], ["d"], iter(cells))


def test_logins_are_refused_for_a_while_after_repeated_failures(client, django_user_model):
    django_user_model.objects.create_user("ann", password="right-password-1")
    for _ in range(5):
        r = client.post("/login/", {"username": "ann", "password": "wrong"})
        assert r.status_code == 200
    r = client.post("/login/", {"username": "ann", "password": "right-password-1"})
    assert r.status_code == 429 and "Too many failed logins" in r.content.decode()
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action="login_failed").count() == 5
    # Another account is not locked by ann's failures.
    django_user_model.objects.create_user("bob", password="right-password-2")
    r = client.post("/login/", {"username": "bob", "password": "right-password-2"})
    assert r.status_code == 302


# --- a trace with a value too deep to indent -----------------------------------------------------


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def test_a_deeply_nested_argument_renders_bounded_with_its_raw_value_a_click_away(
    client, django_user_model
):
    arguments = {"a": [_deep(1000) for _ in range(100)]}
    data = encode(
        [
            line("attempt"),
            line("turn", blocks=[{"kind": "tool_call", "tool": "t", "arguments": arguments}]),
            line("call", arguments=arguments, result=arguments),
            line("session"),
            line("run"),
        ]
    )
    assert ingest_bytes(("modeleval-deep.jsonl", data)).ok
    client.force_login(django_user_model.objects.create_user("v", password="pw-123456789"))
    run = Run.objects.get()
    attempt = run.attempts.get()
    page = client.get(f"/attempts/{attempt.pk}/")
    assert page.status_code == 200
    assert len(page.content) < 1_000_000  # was 191 MiB
    html = page.content.decode()
    turn = attempt.turns.get()
    call = attempt.calls.get()
    block_url = f"/attempts/{attempt.pk}/turns/{turn.pk}/blocks/0.json"
    result_url = f"/attempts/{attempt.pk}/calls/{call.pk}/result.json"
    assert block_url in html and result_url in html
    for url in (block_url, result_url, f"/attempts/{attempt.pk}/calls/{call.pk}/arguments.json"):
        raw = client.get(url)
        assert raw.status_code == 200 and json.loads(raw.content) == arguments
    export = client.get(f"/attempts/{attempt.pk}.json")
    assert export.streaming
    body = b"".join(export.streaming_content)
    assert len(body) < 2 * len(data)  # compact: indentation would be 190 MiB
    doc = json.loads(body)
    assert doc["turns"][0]["calls"][0]["result"] == arguments
    assert doc["verify"] == [] and doc["attempt"] == "a1"


# --- production server -------------------------------------------------------------------------


def test_the_production_command_in_the_readme_starts_and_serves(tmp_path):
    import re
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    command = re.search(r"```sh\n(gunicorn [^`]+?)\n```", readme)
    assert command, "the README shows no gunicorn command"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = command.group(1).replace("\\\n", " ").split()
    at = args.index("--bind")
    args[at + 1] = f"127.0.0.1:{port}"
    env = {
        **os.environ,
        "SECRET_KEY": "x" * 50,
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "EVALDASH_SECURE_COOKIES": "0",
    }
    bindir = Path(sys.executable).parent
    proc = subprocess.Popen(
        [str(bindir / args[0]), *args[1:]],
        cwd=Path(__file__).parent.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5) as r:
                    assert r.status == 200 and b"Log in" in r.read()
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "gunicorn did not answer in 30 s"
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_collected_static_files_are_named_by_hash_and_compressed(tmp_path, settings):
    """After `collectstatic` (as the demo and a deployment run it), pages name static files by
    their content hash, so browsers keep them for good, and a compressed copy sits beside each;
    plotly.js is the official basic bundle, not the 4.8 MB full one."""
    from django.core.management import call_command
    from django.templatetags.static import static

    settings.STATIC_ROOT = tmp_path
    settings.EVALDASH_PLAIN_STATIC = False
    call_command("collectstatic", "--noinput", verbosity=0)
    url = static("vendor/plotly/plotly-basic.min.js")
    assert url != "/static/vendor/plotly/plotly-basic.min.js" and url.endswith(".js")
    name = url.removeprefix("/static/")
    assert (tmp_path / name).exists() and (tmp_path / (name + ".gz")).exists()
    assert (tmp_path / (name + ".gz")).stat().st_size < 500_000
    settings.EVALDASH_PLAIN_STATIC = True  # the tests' own setting: plain names, from the sources
    assert (
        static("vendor/plotly/plotly-basic.min.js") == "/static/vendor/plotly/plotly-basic.min.js"
    )
