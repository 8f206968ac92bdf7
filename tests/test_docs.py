"""The front door holds: the README's commands work as written in a checkout that has served the
demo, a missing key is one line, and docs/ matches the code it describes."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import get_resolver, resolve

from records.devtools.schema import schema_markdown

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
DEV_ONLY = ("SECRET_KEY", "DEBUG", "EVALDASH_INSECURE_DEV_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")


def readme_commands() -> list[str]:
    """The manage.py commands of the README's shell blocks, as written."""
    blocks = re.findall(r"^```sh\n(.*?)^```", README, flags=re.S | re.M)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(".venv/bin/python manage.py ")]


def run(command: str, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    argv[0] = sys.executable  # the interpreter of this test run is the checkout's .venv
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, **kwargs
    )


@pytest.fixture
def served_checkout(tmp_path):
    """The environment of a reader's shell after `scripts/serve` has run once: no key and no
    DEBUG in the environment, the key file written by the script's own step, a fresh database
    migrated (the tests' database is not touched)."""
    key_file = tmp_path / "var" / "secret_key"
    env = {k: v for k, v in os.environ.items() if k not in DEV_ONLY}
    env.update(
        EVALDASH_SECRET_KEY_FILE=str(key_file),
        DATABASE_URL=f"sqlite:///{tmp_path / 'evaldash.sqlite3'}",
    )
    subprocess.run(
        # $0 as scripts/serve has it, which _env.sh finds the checkout by.
        ["bash", "-c", "source scripts/_env.sh && ensure_secret_key", "scripts/serve"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=60,
    )
    assert len(key_file.read_text().strip()) >= 50
    assert key_file.stat().st_mode & 0o077 == 0
    migrate = run(".venv/bin/python manage.py migrate --verbosity 0", env)
    assert migrate.returncode == 0, migrate.stderr
    return env


def test_the_readme_shows_the_follow_on_commands():
    commands = readme_commands()
    for name in ("createsuperuser", "create_token", "ingest"):
        assert any(f" manage.py {name}" in c for c in commands), name


def test_every_readme_command_that_needs_no_server_works_as_written(served_checkout):
    env = served_checkout
    for command in readme_commands():
        if " createsuperuser" in command:
            # It asks its questions on a terminal; its answers come the way Django reads them
            # without one.
            command += " --noinput"
            env = {
                **env,
                "DJANGO_SUPERUSER_USERNAME": "admin",
                "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
                "DJANGO_SUPERUSER_PASSWORD": "a-long-pass-phrase-1",
            }
        out = run(command, env)
        assert out.returncode == 0, f"{command}\n{out.stdout}{out.stderr}"
        assert "Traceback" not in out.stderr, command
    # What they did is in the database the key file's checkout serves.
    token = run(".venv/bin/python manage.py create_token second", env)
    assert "shown once" in token.stdout


def test_a_missing_key_is_one_line_naming_what_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in DEV_ONLY}
    env["EVALDASH_SECRET_KEY_FILE"] = str(tmp_path / "absent")
    out = run(".venv/bin/python manage.py createsuperuser", env)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "evaldash: SECRET_KEY is not set: export SECRET_KEY=<a long random string>, "
        "or run scripts/serve once to keep a local key in var/secret_key"
    ]


def test_a_key_in_the_environment_wins_over_the_key_file(tmp_path):
    key_file = tmp_path / "secret_key"
    key_file.write_text("from-the-file-" + "x" * 50)
    env = {k: v for k, v in os.environ.items() if k not in DEV_ONLY}
    env.update(
        EVALDASH_SECRET_KEY_FILE=str(key_file), SECRET_KEY="from-the-environment-" + "y" * 50
    )
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    out = run(f".venv/bin/python manage.py shell --no-imports -c {shlex.quote(code)}", env)
    assert out.stdout.strip() == "from-the-environment-" + "y" * 50
    env.pop("SECRET_KEY")
    out = run(f".venv/bin/python manage.py shell --no-imports -c {shlex.quote(code)}", env)
    assert out.stdout.strip() == "from-the-file-" + "x" * 50


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 150
    for heading in ("Getting results in", "CI", "Configuration", "Production"):
        assert f"\n## {heading}\n" in README, heading
    assert "docs/screenshots/runs-1440.png" in README


def test_every_docs_page_the_readme_links_to_exists():
    links = set(re.findall(r"\]\((docs/[^)#]+)", README))
    assert {"docs/api.md", "docs/schema.md", "docs/architecture.md"} <= links
    for link in links:
        assert (ROOT / link).exists(), link


def test_the_schema_page_is_what_the_models_declare():
    written = (ROOT / "docs" / "schema.md").read_text()
    assert written == schema_markdown(), "docs/schema.md is stale: run manage.py schema_doc"


def test_the_schema_page_lists_every_table_and_its_constraints():
    from django.apps import apps

    text = schema_markdown()
    for model in apps.get_app_config("records").get_models():
        assert f"## `{model._meta.db_table}`" in text
        for field in model._meta.local_concrete_fields:
            assert f"| `{field.column}` |" in text
    assert "unique `attempt_key_unique_in_run` (run_id, key)" in text
    assert "`records_run.id`, on delete cascade, *no constraint*" in text


# The heading of each address's example in docs/api.md, for every address that answers JSON or
# takes uploads; the address is the heading's path with 1 for each parameter.
API_HEADINGS = """
POST /api/v1/uploads
GET /api/v1/uploads/<pk>
POST /api/v1/conformance
POST /api/v1/annotations
GET /api/v1/runs/<run_id>/gate
GET /runs.json
GET /runs/<pk>/scores.json
GET /runs/<pk>/attempts.json
GET /compare.json
GET /attempts/<pk>.json
GET /attempts/<pk>/calls/<call>/arguments.json
GET /attempts/<pk>/turns/<turn>/blocks/<block>.json
GET /replays/<pk>/report.json
GET /conformance.json
POST /upload/
POST /upload/conformance/
GET /uploads/<pk>/progress/
""".strip().splitlines()


def test_the_api_page_has_an_example_for_every_address_that_answers_json_or_takes_uploads():
    api = (ROOT / "docs" / "api.md").read_text()
    shown = set()
    for heading in API_HEADINGS:
        assert heading in api, heading
        shown.add(resolve(re.sub(r"<[^>]+>", "1", heading.split(" ", 1)[1])).url_name)
    # A new address of that kind must be added above, and so to the page.
    names = {p.name for p in get_resolver("records.urls").url_patterns if getattr(p, "name", None)}
    kind = {
        n for n in names if n.startswith(("api-", "upload")) or n.endswith(("-export", "-report"))
    }
    assert kind - {"upload-detail"} <= shown
    assert len(shown) == len(API_HEADINGS)  # no two headings name one address


def test_the_api_examples_are_json():
    api = (ROOT / "docs" / "api.md").read_text()
    examples = re.findall(r"^```json\n(.*?)^```", api, flags=re.S | re.M)
    assert len(examples) >= 15
    for example in examples:
        json.loads(example)
