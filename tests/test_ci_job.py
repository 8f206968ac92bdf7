"""The README's CI job, run as written (bash, curl, jq) against a live gunicorn and task worker.

The job is read from README.md between its markers, so the two cannot drift. The shard is over
1 MiB with its run line last (as the runner writes it). Which of these answers rest on the gate's
"no earlier comparable run passes" rule is said where it is asserted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from records.devtools.servers import ROOT, free_port, stop, wait_until_answering
from records.devtools.synth import demo_key, write_demo_key, write_run
from records.models import ApiToken
from tests.servers import start_worker, task_env

pytestmark = [
    pytest.mark.load,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not (shutil.which("jq") and shutil.which("curl")), reason="needs jq, curl"),
]
NANO_META = ("openai:gpt-5.4-nano", "meta")
FIXTURES = Path(__file__).parent / "fixtures"


def ci_job_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- ci-job -->\n```yaml\n(.*?)```\n<!-- /ci-job -->", readme, re.S)
    assert block, "README.md has no CI job between <!-- ci-job --> markers"
    lines = [ln.strip()[2:] for ln in block.group(1).splitlines() if ln.strip().startswith("- ")]
    assert 1 <= len(lines) <= 3, lines
    # Each is a plain YAML scalar, as GitLab reads the list: ": " or " #" would make it a key
    # or cut it at a comment.
    assert not [ln for ln in lines if ": " in ln or " #" in ln or ln[0] in "'\"{[&*!|>%@`"], lines
    return lines


def _artifact(path: Path, run_id: str, seed: int, days: int, regress=None) -> Path:
    shard = path.parent / "modeleval-run.jsonl"
    with open(shard, "wb") as fh:
        write_run(
            fh,
            demo_key(),
            run_id=run_id,
            commit=f"{seed:040x}",
            started_at=datetime(2026, 11, 1, 9) + timedelta(days=days),
            seed=seed,
            repeat=2,
            regress=regress or {},
        )
    data = shard.read_bytes()
    # The case the old recipe failed on: the run line past the first MiB.
    assert len(data) > 1024 * 1024 and b'"type":"run"' not in data[: 1024 * 1024]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(shard, shard.name)
    return path


@pytest.fixture
def live(tmp_path):
    env = task_env()
    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "evaldash.wsgi", "--worker-class", "gthread"]
            + ["--workers", "1", "--threads", "8", "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        ),
        start_worker(env, interval=0.2, log=log),
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(base + "/login/", procs[0], log=tmp_path / "server.log")
        yield base, env
    finally:
        for p in procs:
            stop(p)
        log.close()


def test_the_readme_ci_job_gates_first_regressed_noisy_and_retried_uploads(live, tmp_path):
    base, env = live
    _, raw = ApiToken.issue("gitlab-ci")
    commands = ci_job_commands()
    key_file = write_demo_key(tmp_path)  # 16 cases: enough for a regression to show
    key = subprocess.run(
        ["curl", "-sS", "-H", f"Authorization: Bearer {raw}", "-F", f"file=@{key_file}"]
        + [f"{base}/api/v1/uploads?wait=60"],
        capture_output=True,
        text=True,
    )
    assert '"status": "done"' in key.stdout or '"status":"done"' in key.stdout, key.stdout

    def job(artifact: Path) -> subprocess.CompletedProcess:
        work = tmp_path / artifact.stem
        work.mkdir(exist_ok=True)
        shutil.copy(artifact, work / "artifact.zip")
        script = "set -eo pipefail\n" + "\n".join(commands) + "\n"
        return subprocess.run(
            ["bash", "-c", script],
            cwd=work,
            env={**env, "EVALDASH_TOKEN": raw, "EVALDASH_URL": base},
            capture_output=True,
            text=True,
            timeout=300,
        )

    made = tmp_path / "made"
    made.mkdir()
    # The demo's seeds: 23 regressed against 11 is a regression with evidence, 37 is noise.
    first = _artifact(made / "first.zip", "ci-first", 11, 0)
    regressed = _artifact(made / "regressed.zip", "ci-regressed", 23, 7, {NANO_META: 0.35})
    noisy = _artifact(made / "noisy.zip", "ci-noisy", 37, 8)

    # Rests on the gate passing with no earlier comparable run ("baseline": null).
    r = job(first)
    assert r.returncode == 0, r.stdout + r.stderr
    r = job(regressed)
    assert r.returncode != 0 and "failed" in r.stdout, r.stdout + r.stderr
    r = job(noisy)
    assert r.returncode == 0, r.stdout + r.stderr
    # A retried job finds its shard present and still gates it against its previous run.
    r = job(noisy)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "already_present" in (tmp_path / "noisy" / "upload.json").read_text()

    # A refused artifact fails the job at its first command, and the log names what was refused.
    refused = made / "refused.zip"
    with zipfile.ZipFile(refused, "w") as z:
        z.write(FIXTURES / "hostile" / "modeleval-unknown-field.jsonl", "modeleval-bad.jsonl")
    r = job(refused)
    assert r.returncode != 0, r.stdout + r.stderr
    assert (
        "refused artifact.zip!modeleval-bad.jsonl, line 1, field attempt.score - unknown field"
        in r.stdout
    )
    assert "the gate failed" not in r.stdout + r.stderr  # stopped before the gate was asked
