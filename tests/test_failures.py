"""Failure modes across runs: the signature rule (pure), the modes found in seeded runs with
planted failures, `/failures/`, its JSON and CSV, a mode's page, and the run overview's line."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import time
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records.models import FailureCount, Label, Run, ScoreRow, Scoring, Verdict
from records.queries.failures import new_modes_since
from records.scorer.score import (
    OUTCOMES,
    SIGNATURE_PARTS,
    AttemptInput,
    AttemptVerdict,
    StepVerdict,
    failure_signature,
    mode_id,
    normalise_message,
)
from records.scoring.run import score_run
from tests.builders import SAMPLE_KEY, encode, ingest_bytes, line

GOOD, WEAK = "fake:good", "fake:weak"
PROJECT = "eval-group/eval-project"
RUNS = 4
REPEATS = 2
CASES = ("MT-002", "MT-003", "MT-040")
ACTIONS = {"MT-002": "project.get", "MT-003": "project.list", "MT-040": "server.health_check"}


# --- the rule, pure ----------------------------------------------------------------------------


def test_numbers_ids_quoted_values_and_paths_become_placeholders():
    assert normalise_message("project 42 not found") == normalise_message("project 97 not found")
    assert normalise_message("project 42 not found") == "project <n> not found"
    assert normalise_message('no field "iid" at /api/v4/projects/9') == "no field <q> at <path>"
    assert normalise_message("trace 3f9a2b1c7d of eval-group/x") == "trace <id> of <path>"
    assert normalise_message("see https://gitlab.example/a.git  now") == "see <path> now"
    # An action's name, a call outcome and an argument's name are kept as they are.
    kept = "the call was answered refused:invalid_params for project.get (project_id)"
    assert normalise_message(kept) == kept


def test_a_passed_verdict_has_no_signature_and_a_recorded_ending_is_its_own_kind():
    attempt = AttemptInput("a", "c", "m", "dynamic", "", "", "completed")
    assert failure_signature(attempt, _verdict("completed")) is None
    ended = AttemptInput("a", "c", "m", "dynamic", "", "", "provider_error", "answered 529 x3")
    sig = failure_signature(ended, _verdict("provider_error"))
    assert sig == {
        **dict.fromkeys(SIGNATURE_PARTS),
        "outcome": "provider_error",
        "step": "ending",
        "message": "answered <n> <id>",
    }


def test_a_failed_check_is_named_when_every_step_held():
    attempt = AttemptInput(
        "a", "c", "m", "dynamic", "", "", "completed", failed_checks=["the issue is closed"]
    )
    step = StepVerdict(1, "issue.update", False, reached=True, complete=True)
    verdict = _verdict("failed", [step], verified=False)
    verdict.reason = "a recipe check against GitLab did not hold afterwards"
    sig = failure_signature(attempt, verdict)
    assert (sig["step"], sig["check"], sig["tool"]) == ("check", "the issue is closed", None)


def test_the_mode_id_is_the_agreed_hash_of_the_canonical_signature():
    sig = {**dict.fromkeys(SIGNATURE_PARTS), "outcome": "failed", "step": "call", "tool": "t"}
    text = json.dumps(sig, sort_keys=True, separators=(",", ":"))
    assert mode_id(sig) == hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    # A part left out is null, as the contract spells it.
    assert mode_id({"outcome": "failed", "step": "call", "tool": "t"}) == mode_id(sig)
    assert len(mode_id(sig)) == 16
    # UTF-8, not \uXXXX escapes: a script following the documented rule gets the same id.
    accented = {**sig, "message": "café <n> not found"}
    text = json.dumps(accented, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert "café" in text
    assert mode_id(accented) == hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# Reasons a model or a server could write that a backtracking rule reads again from every
# character: runs of path characters with no slash, unclosed escaped quotes, dotted words.
HOSTILE_MESSAGES = ["-", ".", "~", '"\\', "a.", "'", "a-"]


def _normalising(text: str, times: int) -> float:
    best = float("inf")
    for k in range(7):
        began = time.perf_counter()
        for n in range(times):
            normalise_message(f"{k} {n} {text}")  # not a cached message
        best = min(best, time.perf_counter() - began)
    return best


@pytest.mark.parametrize("unit", HOSTILE_MESSAGES)
def test_the_message_rule_reads_a_long_hostile_reason_in_time_that_does_not_grow_with_it(unit):
    small, large = unit * 500, unit * 200_000
    assert len(normalise_message(large)) <= 200
    # 400 times the text: a rule quadratic in it would take 160,000 times as long, a linear one
    # 400 times; reading only its head, about as long.
    ratio = _normalising(large, 30) / max(_normalising(small, 30), 1e-6)
    assert ratio < 20, f"{ratio:.0f}x the time for 400x the text"


def _verdict(outcome: str, steps=(), verified: bool = True) -> AttemptVerdict:
    return AttemptVerdict("a", "c", outcome, "", list(steps), 0, 0, verified, False, False)


# --- seeded runs with planted failures ----------------------------------------------------------


def _call(aid: str, case: str, project: str = PROJECT, tool: str = "gitlab_execute_action"):
    action = ACTIONS[case]
    params = {"project_id": project} if case == "MT-002" else {}
    outcome = "tool_error" if case == "MT-040" and GOOD not in aid else "ok"
    return line(
        "call",
        attempt=aid,
        tool=tool,
        arguments={"action": action, "params": params},
        requested_action=action if tool == "gitlab_execute_action" else "",
        dispatched_action=action if tool == "gitlab_execute_action" else "",
        dispatched_tool=tool,
        outcome=outcome,
        dispatch_observed=True,
    )


def planted_shard(n: int) -> bytes:
    """Run `n` (1-based) of two models, three cases, two repeats on the dynamic surface, every
    attempt right but: from run 3 on, the weak model sends the wrong project to MT-002; in run
    2 only, the good model's second repeat of MT-003 calls a tool of its own instead of the
    dispatcher; the weak model's MT-040 is refused by GitLab in every run."""
    lines = []
    for model in (GOOD, WEAK):
        for case in CASES:
            for r in range(1, REPEATS + 1):
                aid = f"run-{n}/{model}/{case}/r{r}"
                lines.append(
                    line(
                        "attempt",
                        id=aid,
                        case=case,
                        model=model,
                        repeat=r,
                        facts={"project_path": PROJECT, "project_id": "42"},
                    )
                )
                lines.append(line("turn", attempt=aid))
                if case == "MT-002" and model == WEAK and n >= 3:
                    lines.append(_call(aid, case, project=f"eval-group/other-{n}"))
                elif case == "MT-003" and model == GOOD and n == 2 and r == 2:
                    lines.append(_call(aid, case, tool="gitlab_list_projects"))
                else:
                    lines.append(_call(aid, case))
    session = line("session")
    session["session"]["tool_schema_digests"] = {GOOD: "t1", WEAK: "t1"}
    run = line("run", run_id=f"run-{n}", repeat=REPEATS)
    started = datetime(2026, 11, 1, 9) + timedelta(days=n)
    run["run"]["started_at"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    return encode([*lines, session, run])


@pytest.fixture
def planted(db):
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()))
    for n in range(1, RUNS + 1):
        ingest_bytes((f"modeleval-{n}.jsonl", planted_shard(n)))
    runs = list(Run.objects.order_by("started_at"))
    assert len(runs) == RUNS and all(r.latest_scoring() for r in runs)
    return runs


def _modes(client, **query) -> dict:
    answer = client.get("/failures.json", query)
    assert answer.status_code == 200, answer.content
    return answer.json()


def _by_case(modes: list[dict]) -> dict[tuple[str, ...], dict]:
    return {tuple(m["cases"]): m for m in modes}


def test_each_planted_failure_is_its_own_mode_with_its_first_run_and_counts(
    client, viewer, planted
):
    found = _modes(client)
    assert found["count"] == 3 and found["next"] is None
    modes = _by_case(found["modes"])
    assert set(modes) == {("MT-002",), ("MT-003",), ("MT-040",)}

    wrong_argument = modes[("MT-002",)]
    assert wrong_argument["signature"] == {
        "outcome": "failed",
        "step": "call",
        "tool": "gitlab_execute_action",
        "action": "project.get",
        "call_outcome": "ok",
        "argument": "project_id",
        "check": None,
        "message": "the arguments did not carry the values the case declares: project_id "
        "(the value is none of the spellings the recipe produced)",
    }
    assert wrong_argument["attempts"] == 2 * REPEATS
    assert wrong_argument["first_run"] == "run-3" and wrong_argument["last_run"] == "run-4"
    assert wrong_argument["runs"] == {"run-3": REPEATS, "run-4": REPEATS}
    assert wrong_argument["models"] == {WEAK: 2 * REPEATS}

    wrong_tool = modes[("MT-003",)]
    assert wrong_tool["attempts"] == 1 and wrong_tool["runs"] == {"run-2": 1}
    assert wrong_tool["first_run"] == wrong_tool["last_run"] == "run-2"
    assert wrong_tool["signature"]["tool"] == "gitlab_list_projects"
    assert wrong_tool["signature"]["message"] == "no call named this step"
    assert wrong_tool["models"] == {GOOD: 1}

    always = modes[("MT-040",)]
    assert always["signature"]["outcome"] == "gitlab_refused"
    assert always["signature"]["call_outcome"] == "tool_error"
    assert always["attempts"] == RUNS * REPEATS and always["first_run"] == "run-1"
    assert always["runs"] == {f"run-{n}": REPEATS for n in range(1, RUNS + 1)}
    assert always["models"] == {WEAK: RUNS * REPEATS}
    # The one the most attempts fail in comes first; none first appears in the newest run.
    assert [m["attempts"] for m in found["modes"]] == [8, 4, 1]
    assert not any(m["new"] for m in found["modes"])


def test_the_modes_attempts_sum_to_the_failed_attempts_the_scores_count(client, viewer, planted):
    found = _modes(client)
    failed = 0
    for run in planted:
        for row in ScoreRow.objects.filter(scoring=run.latest_scoring()):
            failed += sum(row.figures[o] for o in OUTCOMES if o != "completed")
    assert failed == 13
    assert sum(m["attempts"] for m in found["modes"]) == failed
    stored = Verdict.objects.filter(scoring__in=[r.latest_scoring() for r in planted])
    assert stored.exclude(outcome="completed").filter(failure_mode="").count() == 0


def test_a_mode_is_new_when_the_newest_run_of_the_filter_first_has_it(client, viewer, planted):
    found = _modes(client, run=["run-1", "run-3"])
    modes = _by_case(found["modes"])
    assert modes[("MT-002",)]["new"] is True
    assert modes[("MT-040",)]["new"] is False
    assert ("MT-003",) not in modes  # run 2 is not chosen
    narrowed = _modes(client, model=GOOD)
    assert [m["cases"] for m in narrowed["modes"]] == [["MT-003"]]
    assert _modes(client, case="MT-040")["count"] == 1


def test_the_new_modes_since_a_baseline_name_each_with_its_attempts(planted):
    second, third = planted[1], planted[2]
    new = new_modes_since(third, second)
    assert [(m.signature["argument"], m.attempts) for m in new] == [("project_id", REPEATS)]
    assert new_modes_since(planted[1], planted[0])[0].signature["tool"] == "gitlab_list_projects"
    assert new_modes_since(second, None) is None


def test_the_run_overview_names_the_modes_new_since_its_previous_run(client, viewer, planted):
    html = client.get(f"/runs/{planted[2].pk}/").content.decode()
    assert "1 new failure mode, 2 attempts</a> since the previous run" in html
    assert "/failures/?digest=b519a10571ab2192&amp;run=run-2&amp;run=run-3" in html
    assert (
        "No new failure mode since the previous run"
        in client.get(f"/runs/{planted[3].pk}/").content.decode()
    )


def test_the_failures_page_lists_the_modes_with_their_trends(client, viewer, planted):
    answer = client.get("/failures/")
    assert answer.status_code == 200
    html = answer.content.decode()
    assert "<strong>13</strong> attempts did not pass" in html
    assert html.count('data-plotly="trend-') == 3
    assert "gitlab_list_projects" in html
    # htmx asks for the list alone.
    part = client.get("/failures/", headers={"HX-Request": "true"}).content.decode()
    assert part.lstrip().startswith('<div id="modes">')


def test_a_bad_filter_is_a_400_on_the_page_and_in_json(client, viewer, planted):
    assert client.get("/failures/", {"since": "yesterday"}).status_code == 400
    answer = client.get("/failures.json", {"surface": "sideways"})
    assert answer.status_code == 400 and "surface" in answer.json()["fields"]


def test_a_modes_page_lists_its_attempts_and_the_search_finds_the_same(client, viewer, planted):
    mode = _by_case(_modes(client)["modes"])[("MT-040",)]
    page = client.get(mode["url"])
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count("#failing-step") == RUNS * REPEATS
    assert "MT-040" in html
    search = client.get(mode["search_url"].replace("/search/", "/search.json"))
    assert search.status_code == 200, search.content
    assert search.json()["count"] == RUNS * REPEATS
    assert client.get("/failures/0123456789abcdef/").status_code == 404


def test_each_attempt_a_mode_lists_opens_at_the_step_its_verdict_turns_on(client, viewer, planted):
    for mode in _modes(client)["modes"]:
        html = client.get(mode["url"]).content.decode()
        link = re.search(r'href="(/attempts/\d+/)#failing-step"', html)
        assert link, mode["id"]
        attempt = client.get(link.group(1)).content.decode()
        # One anchor: the steps table's row of the failing call, else the verdict itself.
        assert attempt.count('id="failing-step"') == 1
        marked = re.search(r'<(\w+)[^>]*id="failing-step"', attempt).group(1)
        assert marked == ("tr" if mode["signature"]["step"] == "call" else "p"), mode["signature"]


def test_the_failures_list_shows_each_modes_labels_and_filters_by_one(client, viewer, planted):
    from records.queries.annotations import About, Writer, write

    modes = _by_case(_modes(client)["modes"])
    labelled = modes[("MT-040",)]["id"]
    # Seeded by a migration, but a transactional test before this one may have flushed it.
    label, _ = Label.objects.get_or_create(slug="model-error", defaults={"title": "Model error"})
    write(About("mode", mode=labelled), Writer("w"), label=label, note="")
    html = client.get("/failures/").content.decode()
    assert '<select name="label">' in html and 'value="model-error"' in html
    assert html.count("label-model-error") == 1  # on the labelled mode's line alone
    assert "<tbody data-cursor-rows>" in html  # j / k move over the modes
    narrowed = client.get("/failures/", {"label": "model-error"}).content.decode()
    assert labelled in narrowed and modes[("MT-002",)]["id"] not in narrowed
    assert '<option\n    value="model-error" selected>' in narrowed


def test_the_gate_lists_the_modes_new_since_its_baseline_in_its_json_and_comment(planted):
    from records.queries.gate import gate, resolve

    # The wrong project sent to MT-002 begins in run 3: new against run 2, not against run 3.
    result = gate(*resolve("run-3", "run-2"), "Clean")
    found = result.as_dict()
    (new,) = found["new_failure_modes"]
    assert new["signature"]["argument"] and new["attempts"] == REPEATS
    # Its page under its run: the attempts of run 3 in it, whatever the newest key's digest.
    assert new["url"].endswith(f"/failures/{new['id']}/?digest=b519a10571ab2192&run=run-3")
    comment = found["markdown"]
    assert f"1 new failure mode, {REPEATS} attempts, since the baseline:" in comment
    assert new["id"] in comment
    assert gate(*resolve("run-4", "run-3"), "Clean").as_dict()["new_failure_modes"] == []


def test_the_csv_export_streams_a_line_per_mode(client, viewer, planted):
    answer = client.get("/failures.csv")
    assert answer.streaming and answer["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    assert [int(r["attempts"]) for r in rows] == [8, 4, 1]
    assert rows[0]["first_run"] == "run-1" and rows[0]["outcome"] == "gitlab_refused"


def test_a_scoring_without_signatures_is_named_and_a_rescore_fills_it(client, viewer, planted):
    old = planted[0].latest_scoring()
    Scoring.objects.filter(pk=old.pk).update(signed=False)
    FailureCount.objects.filter(scoring=old).delete()
    Verdict.objects.filter(scoring=old).update(failure_mode="")
    html = client.get("/failures/").content.decode()
    assert "scored before failure signatures were made" in html and "run-1" in html
    always = _by_case(_modes(client)["modes"])[("MT-040",)]
    assert always["first_run"] == "run-2" and always["attempts"] == (RUNS - 1) * REPEATS
    score_run(planted[0], old.key)
    assert _by_case(_modes(client)["modes"])[("MT-040",)]["first_run"] == "run-1"


def test_signatures_and_names_are_escaped(client, viewer, db):
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()))
    shard = planted_shard(1).replace(b"fake:weak", b"<b>weak</b>")
    ingest_bytes(("modeleval-1.jsonl", shard))
    html = client.get("/failures/").content.decode()
    assert "<b>weak</b>" not in html and "&lt;b&gt;weak&lt;/b&gt;" in html


def test_the_pages_queries_do_not_grow_with_the_runs(client, viewer, planted):
    def count(path, **query):
        with CaptureQueriesContext(connection) as seen:
            assert client.get(path, {"digest": "b519a10571ab2192", **query}).status_code == 200
        return len(seen)

    mode = _by_case(_modes(client)["modes"])[("MT-040",)]["id"]
    every = (count("/failures/"), count("/failures.json"), count(f"/failures/{mode}/"))
    two = {"run": ["run-1", "run-2"]}
    fewer = (
        count("/failures/", **two),
        count("/failures.json", **two),
        count(f"/failures/{mode}/", **two),
    )
    assert every == fewer


def test_the_failure_pages_need_read_access(client, planted):
    answer = client.get("/failures/")
    assert answer.status_code == 302 and "/login/" in answer["Location"]


@pytest.mark.django_db(transaction=True)
def test_a_run_scored_by_the_scorer_processes_has_the_same_signatures(settings):
    """A large run is scored in scorer processes, which read the failed checks' names
    themselves: a verify line that failed names the check in the mode."""
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()))
    lines = planted_shard(1).decode().splitlines()
    failing = line("verify", attempt=f"run-1/{GOOD}/MT-002/r1", name="project 7 is gone")
    failing["verify"].update(passed=False, detail="it was not there")
    shard = encode([*lines[:-2], failing, *lines[-2:]])
    report = ingest_bytes(("modeleval-1.jsonl", shard))
    assert report.ok, report.refused
    inline = {m: (n, sig) for m, n, sig in _stored_modes()}
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0  # every run is large
    run = Run.objects.get()
    score_run(run, run.latest_scoring().key)
    assert {m: (n, sig) for m, n, sig in _stored_modes()} == inline
    checks = [sig for _, _, sig in _stored_modes() if sig["step"] == "check"]
    assert [sig["check"] for sig in checks] == ["project 7 is gone"]


def _stored_modes():
    scoring = Run.objects.get().latest_scoring()
    counts = {}
    for v in Verdict.objects.filter(scoring=scoring).exclude(failure_mode=""):
        n, _ = counts.get(v.failure_mode, (0, None))
        counts[v.failure_mode] = (n + 1, v.signature)
    return [(m, n, sig) for m, (n, sig) in sorted(counts.items())]
