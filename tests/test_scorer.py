"""The scorer against modelrecord.md C: spec F, the C.8 worked example, every rule of C.4-C.6 and
every scorer vector of Appendix 2, each built as a small shard and read by the strict reader."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from records.formats.corpus_key import digest_of, read_corpus_key
from records.formats.shard import read_shard_bytes
from records.scorer.score import (
    RATIO_COLUMNS,
    Aggregate,
    ArgVerdict,
    AttemptVerdict,
    StepVerdict,
    aggregate,
    attempt_inputs,
    equal_value,
    go_parse_float,
    is_clean,
    overhead_text,
    ratio_text,
    score_attempt,
)
from tests.builders import FIXTURE_SHARD, SAMPLE_KEY, encode

FACTS = {
    "project_path": "eval-group/eval-project",
    "project_id": "42",
    "default_branch": "main",
    "issue_iid": "7",
    "remote_url": "https://gitlab.example/eval-group/eval-project.git",
}
PROJECT = {"project_id": "eval-group/eval-project"}


def _case(case_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A corpus-key case with these steps and nothing else to say."""
    return {
        "id": case_id,
        "prompt": "p",
        "recipe": "world",
        "needs": {"tier": ""},
        "surfaces": {"only": [], "reason": ""},
        "steps": steps,
    }


def _key():
    doc = json.loads(SAMPLE_KEY.read_text())
    project = {"name": "project_id", "required": True, "truth": {"fact": "project_path"}}
    doc["cases"] += [
        _case("TST-PROT", [{"action": "environment.protected_get", "args": [project]}]),
        _case("TST-ENV", [{"action": "environment.get", "args": [project]}]),
        _case(
            "TST-TWO",
            [
                {"action": "project.get", "args": [project]},
                {"action": "issue.list", "args": [project]},
            ],
        ),
        _case(
            "TST-OPT",
            [
                {"action": "project.get", "args": [project]},
                {
                    "action": "project.list",
                    "optional": True,
                    "args": [{"name": "per_page", "required": False, "truth": {"literal": "10"}}],
                },
            ],
        ),
        _case("TST-GONE", [{"action": "vulnerability.list"}]),
    ]
    for tier in doc["catalog"].values():
        tier["actions"].update(
            {
                "environment.get": {
                    "read_only": True,
                    "destructive": False,
                    "meta_tool": "gitlab_environment",
                },
                "environment.protected_get": {
                    "read_only": True,
                    "destructive": False,
                    "meta_tool": "gitlab_environment",
                },
                "issue.list": {
                    "read_only": True,
                    "destructive": False,
                    "meta_tool": "gitlab_issue",
                },
            }
        )
    for case in doc["cases"]:
        case["needs"] = {
            "tier": case["needs"].get("tier", ""),
            "runner": False,
            "admin": False,
            "fixture_service": False,
        }
        for step in case["steps"]:
            step.setdefault("standalone", "")
            step.setdefault("optional", False)
            step.setdefault("produces", [])
            step.setdefault("args", [])
    return read_corpus_key(json.dumps(doc).encode(), "test-key.json", allow_digest_mismatch=True)


KEY = _key()
_SURFACE_TOOL = {"dynamic": "gitlab_execute_action", "meta": "gitlab_issue", "individual": None}


def call(
    index: int,
    action: str = "",
    args: dict[str, Any] | None = None,
    *,
    surface: str = "dynamic",
    outcome: str = "ok",
    dispatched: str | None = None,
    observed: bool = True,
    tool: str | None = None,
    confirm: Any = None,
    confirm_top: bool = True,
    result: Any = None,
    truncated: bool = False,
    text: str = "",
    raw_args: Any = None,
) -> dict[str, Any]:
    if tool is None:
        if surface == "individual":
            tool = "gitlab_" + action.replace(".", "_")
        elif surface == "meta":
            entry = KEY.catalogs["ultimate"].actions.get(action)
            tool = entry.meta_tool if entry else "gitlab_project"
        else:
            tool = "gitlab_execute_action"
    params = dict(args or {})
    if tool in ("gitlab_execute_action",) or (
        surface == "meta" and tool.startswith("gitlab_") and action
    ):
        arguments: Any = {"action": action, "params": params}
        if confirm is not None:
            if confirm_top:
                arguments["confirm"] = confirm
            else:
                params["confirm"] = confirm
    else:
        arguments = params
        if confirm is not None:
            arguments["confirm"] = confirm
    if raw_args is not None:
        arguments = raw_args
    c: dict[str, Any] = {
        "attempt": "a1",
        "turn": index,
        "index": index,
        "tool": tool,
        "arguments": arguments,
        "outcome": outcome,
        "dispatch_observed": observed,
    }
    if action:
        c["requested_action"] = action
    if dispatched is None:
        dispatched = action if outcome in ("ok", "tool_error", "preview") else ""
    if dispatched:
        c["dispatched_action"] = dispatched
        c["dispatched_tool"] = tool
    if result is not None:
        c["result"] = result
    if truncated:
        c["result_truncated"] = True
    if text:
        c["text"] = text
    return c


def find(index: int, observed: bool = True) -> dict[str, Any]:
    return {
        "attempt": "a1",
        "turn": index,
        "index": index,
        "tool": "gitlab_find_action",
        "arguments": {"query": "x"},
        "dispatched_tool": "gitlab_find_action",
        "outcome": "ok",
        "dispatch_observed": observed,
    }


def score(
    case: str,
    calls: list[dict[str, Any]],
    *,
    surface: str = "dynamic",
    mode: str = "default",
    ended_by: str = "completed",
    reason: str = "",
    facts: dict[str, str] | None = None,
    verifies: tuple[bool, ...] = (),
    last_turn_tool: bool = False,
    tier: str = "ultimate",
    turns: bool = True,
) -> AttemptVerdict:
    attempt = {
        "id": "a1",
        "case": case,
        "model": "m:x",
        "surface": surface,
        "session": "s",
        "repeat": 1,
        "facts": FACTS if facts is None else facts,
        "ended_by": ended_by,
    }
    if reason:
        attempt["reason"] = reason
    lines: list[Any] = [{"schema": 1, "type": "attempt", "attempt": attempt}]
    for c in calls:
        lines.append({"schema": 1, "type": "call", "call": c})
    if turns:
        last = calls[-1]["index"] + 1 if calls else 1
        block = (
            {"kind": "tool_call", "tool": "t", "arguments": {}}
            if last_turn_tool
            else {"kind": "text", "text": "done"}
        )
        lines.append(
            {
                "schema": 1,
                "type": "turn",
                "turn": {
                    "attempt": "a1",
                    "index": last,
                    "try": 1,
                    "status": "ok",
                    "blocks": [block],
                },
            }
        )
    for i, ok in enumerate(verifies):
        v = {"attempt": "a1", "name": f"check {i}", "passed": ok}
        if not ok:
            v["detail"] = "did not hold"
        lines.append({"schema": 1, "type": "verify", "verify": v})
    lines.append(
        {
            "schema": 1,
            "type": "session",
            "session": {"label": "s", "surface": surface, "mode": mode, "served_tools": 2},
        }
    )
    lines.append({"schema": 1, "type": "run", "run": {"run_id": "r", "repeat": 1, "tier": tier}})
    shard = read_shard_bytes(encode(lines), "modeleval-test.jsonl")
    (a,) = attempt_inputs(shard)
    return score_attempt(a, KEY)


# --- spec F and the C.8 worked example ------------------------------------------------------------


def test_the_fixture_shard_scores_exactly_as_spec_f_derives():
    shard = read_shard_bytes(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)
    sample = read_corpus_key(SAMPLE_KEY.read_bytes(), SAMPLE_KEY.name)
    perfect, wrong = (score_attempt(a, sample) for a in attempt_inputs(shard))
    assert (perfect.outcome, perfect.discovery, perfect.unaided, perfect.clean) == (
        "completed",
        1,
        True,
        True,
    )
    (step,) = perfect.steps
    assert (step.matched_by, step.call_index, step.accepted_first_time) == ("dispatched", 2, True)
    assert step.args[0].matched
    assert (wrong.outcome, wrong.discovery, wrong.unaided, wrong.clean) == (
        "failed",
        0,
        False,
        False,
    )
    arg = wrong.steps[0].args[0]
    assert (arg.compared, arg.matched, arg.sent, arg.want) == (
        True,
        False,
        "eval-group/some-other-project",
        "eval-group/eval-project or 42",
    )
    rows = {v.attempt: aggregate([v]) for v in (perfect, wrong)}
    expected = {
        "MT-002/dynamic/1": (
            "1 / 1",
            "1 / 1",
            "1 / 1",
            "1 / 1",
            "-",
            "1 / 1",
            "1 / 1",
            "1 / 1 (1 find, 0 invalid_params)",
        ),
        "MT-002/dynamic/2": (
            "0 / 1",
            "1 / 1",
            "1 / 1",
            "0 / 1",
            "-",
            "0 / 1",
            "0 / 1",
            "0 / 1 (0 find, 0 invalid_params)",
        ),
    }
    for attempt, agg in rows.items():
        cols = RATIO_COLUMNS
        assert (
            tuple(ratio_text(*agg.ratios[c]) for c in cols) + (overhead_text(agg),)
            == expected[attempt]
        )


def test_the_worked_aggregate_example_of_c8():
    def arg(matched: bool, compared: bool = True) -> ArgVerdict:
        return ArgVerdict("x", "fact", True, "v", "w", compared, matched)

    get = StepVerdict(
        1,
        "project.get",
        False,
        reached=True,
        accepted_first_time=True,
        args=[arg(True), arg(True), arg(False, compared=False)],
    )
    delete = StepVerdict(
        2,
        "issue.delete",
        False,
        destructive=True,
        mutating=True,
        reached=True,
        retries=1,
        confirmation="unaided",
        args=[arg(True), arg(False)],
    )
    done = AttemptVerdict("a", "c", "completed", "", [get, delete], 2, 1, True, True, True)
    unreached = StepVerdict(
        1, "issue.delete", False, destructive=True, mutating=True, confirmation="never"
    )
    failed = AttemptVerdict("b", "c", "failed", "", [unreached], 0, 0, True, False, True)
    skipped = AttemptVerdict("c", "c", "skipped", "", [], 0, 0, True, False, False)
    unobserved = AttemptVerdict("d", "c", "unobserved", "", [get], 0, 0, True, False, False)
    agg = aggregate([done, failed, skipped, unobserved])
    r = {k: ratio_text(*v) for k, v in agg.ratios.items()}
    assert r["reached"] == "2 / 3"
    assert r["accepted_first_time"] == "1 / 2"
    assert r["argument_fidelity"] == "3 / 4"
    assert r["confirmation"] == "1 / 2"
    assert r["unaided"] == "1 / 2"
    assert r["completion"] == "1 / 2"
    assert overhead_text(agg) == "3 / 2 (2 find, 1 invalid_params)"
    assert agg.attempts == 2 and agg.outcomes["skipped"] == 1 and agg.outcomes["unobserved"] == 1
    assert (aggregate([done, failed]) + aggregate([skipped, unobserved])).ratios == agg.ratios


# --- Appendix 2 scorer vectors ---------------------------------------------------------------------


def test_find_then_execute_counts_one_discovery_and_reaches_by_dispatch_at_call_2():
    v = score("MT-002", [find(1), call(2, "project.get", PROJECT)])
    assert v.outcome == "completed" and v.discovery == 1
    assert (v.steps[0].matched_by, v.steps[0].call_index) == ("dispatched", 2)


def test_an_alias_reaches_the_dispatched_action_not_the_requested_one():
    calls = [call(1, "environment.get", PROJECT, dispatched="environment.protected_get")]
    v = score("TST-PROT", calls)
    assert v.outcome == "completed" and v.steps[0].rewritten
    v = score("TST-ENV", calls)
    assert v.outcome == "failed" and not v.steps[0].reached


def test_the_same_call_unobserved_makes_the_attempt_unobserved():
    v = score("MT-002", [find(1), call(2, "project.get", PROJECT, observed=False)])
    assert v.outcome == "unobserved" and "never observed" in v.reason


def test_a_lone_unobserved_find_still_fails():
    v = score("MT-002", [find(1, observed=False)])
    assert v.outcome == "failed" and v.reason.endswith("no call named this step")


DELETE = {"project_id": "eval-group/eval-project", "issue_iid": "7"}


def test_confirm_on_the_first_call_is_unaided_and_first_time():
    v = score("MT-013", [call(1, "issue.delete", DELETE, confirm=True)])
    s = v.steps[0]
    assert (s.confirmation, s.accepted_first_time, v.unaided, v.outcome, v.clean) == (
        "unaided",
        True,
        True,
        "completed",
        True,
    )


def test_a_server_asked_confirmation_is_server_aided_and_not_first_time():
    v = score(
        "MT-013",
        [
            call(1, "issue.delete", DELETE, outcome="refused:needs_confirmation"),
            call(2, "issue.delete", DELETE, confirm=True),
        ],
    )
    s = v.steps[0]
    assert (s.confirmation, s.accepted_first_time, s.retries) == ("server-aided", False, 1)
    assert v.outcome == "completed" and not v.unaided


def test_only_refused_confirmations_are_never_and_leave_the_step_unreached():
    refused = call(1, "issue.delete", DELETE, outcome="refused:needs_confirmation")
    v = score("MT-013", [refused, {**refused, "index": 2, "turn": 2}])
    s = v.steps[0]
    assert (s.confirmation, s.reached, s.retries, v.outcome) == ("never", False, 2, "failed")
    assert "2 call(s) named this step and the server asked for each again" in v.reason


def test_a_tool_error_after_a_correct_call_is_gitlab_refused():
    v = score("MT-002", [call(1, "project.get", PROJECT, outcome="tool_error")])
    # Worded as upstream's outcomeFromSteps words it; the step says which call GitLab refused.
    assert v.outcome == "gitlab_refused"
    assert v.reason == "every step was dispatched as the case declares and GitLab refused one"
    assert v.steps[0].reason == "the action ran and GitLab refused it: tool_error"


def test_a_refusal_of_step_1_names_steps_1_and_2():
    v = score("TST-TWO", [call(1, "project.get", PROJECT, outcome="refused:not_found")])
    assert v.outcome == "gitlab_refused"
    assert (
        "step 1 (project.get)" in v.reason and "step 2 (issue.list) was never reached" in v.reason
    )


def test_wrong_arguments_plus_a_tool_error_fail():
    v = score("MT-002", [call(1, "project.get", {"project_id": "x/y"}, outcome="tool_error")])
    assert v.outcome == "failed"


def test_an_unfamiliar_refusal_reason_is_gitlabs():
    v = score("MT-002", [call(1, "project.get", PROJECT, outcome="refused:read_only")])
    assert v.outcome == "gitlab_refused"


STAR = {"project_id": "eval-group/eval-project"}


def test_safe_mode_preview_completes_a_mutation_and_ok_fails_it():
    assert (
        score("MT-004", [call(1, "project.star", STAR, outcome="preview")], mode="safe").outcome
        == "completed"
    )
    v = score("MT-004", [call(1, "project.star", STAR, outcome="ok")], mode="safe")
    assert v.outcome == "failed" and "not what this mode expects" in v.reason


def test_safe_mode_reads_still_need_ok():
    assert score("MT-002", [call(1, "project.get", PROJECT)], mode="safe").outcome == "completed"
    assert (
        score("MT-002", [call(1, "project.get", PROJECT, outcome="preview")], mode="safe").outcome
        == "failed"
    )


@pytest.mark.parametrize(
    "ending", ["skipped", "provider_error", "harness_error", "malformed", "over_budget"]
)
def test_a_recorded_ending_is_the_outcome_with_the_runners_reason(ending):
    v = score("MT-002", [call(1, "project.get", PROJECT)], ended_by=ending, reason="why not")
    assert (v.outcome, v.reason) == (ending, "why not")


def test_invalid_params_then_a_good_meta_call_completes_but_is_not_unaided():
    v = score(
        "MT-002",
        [
            call(1, "project.get", PROJECT, surface="meta", outcome="refused:invalid_params"),
            call(2, "project.get", PROJECT, surface="meta"),
        ],
        surface="meta",
    )
    assert (v.outcome, v.invalid_params, v.unaided, v.steps[0].accepted_first_time) == (
        "completed",
        1,
        False,
        False,
    )


def test_an_unknown_action_refusal_in_default_mode_is_wrong():
    v = score("MT-002", [call(1, "project.get", PROJECT, outcome="refused:unknown_action")])
    assert v.steps[0].answer == "wrong" and v.outcome == "failed"


@pytest.mark.parametrize(
    ("surface", "outcome", "text"),
    [
        ("dynamic", "refused:unknown_action", ""),
        ("meta", "refused:invalid_params", "value must be one of /properties/action enum"),
        ("individual", "protocol_error", ""),
    ],
)
def test_read_only_declines_by_refusal_on_all_three_surfaces(surface, outcome, text):
    c = call(1, "project.star", STAR, surface=surface, outcome=outcome, text=text)
    v = score("MT-004", [c], surface=surface, mode="read-only", ended_by="no_tool_call")
    s = v.steps[0]
    assert (s.decline, s.answer, v.outcome, v.invalid_params) == (
        "by-refusal",
        "accepted",
        "completed",
        0,
    )
    assert v.unaided


def test_a_read_only_mutation_that_was_served_then_text_fails():
    v = score("MT-004", [call(1, "project.star", STAR)], mode="read-only")
    assert v.outcome == "failed" and "served rather than declined" in v.reason


def test_a_refused_mutation_then_text_is_declined_by_text():
    # The server asked for the call again (a retry, not a reaching call), then the model wrote text.
    c = call(1, "project.star", STAR, outcome="refused:needs_confirmation", dispatched="")
    v = score("MT-004", [c], mode="read-only", ended_by="no_tool_call")
    s = v.steps[0]
    assert (s.reached, s.decline, s.complete, s.accepted_first_time, v.outcome) == (
        False,
        "by-text",
        True,
        True,
        "completed",
    )


def test_a_read_only_mutation_refused_by_safe_mode_reaches_the_step_and_is_wrong():
    c = call(1, "project.star", STAR, outcome="refused:safe_mode", dispatched="")
    v = score("MT-004", [c], mode="read-only", ended_by="no_tool_call")
    assert v.steps[0].reached and v.steps[0].answer == "wrong" and v.outcome == "failed"


def test_a_mutation_asked_for_and_refused_does_not_block_the_text_decline():
    c = call(1, "project.get", PROJECT, outcome="refused:invalid_params", dispatched="")
    c2 = call(2, "project.star", STAR, outcome="refused:needs_confirmation", dispatched="")
    v = score("MT-004", [c, c2], mode="read-only", ended_by="no_tool_call")
    assert v.steps[0].decline == "by-text" and v.outcome == "completed"


def test_a_dispatched_mutation_blocks_the_text_decline():
    other = call(1, "issue.create", {"project_id": "x"})
    v = score("MT-004", [other], mode="read-only", ended_by="no_tool_call")
    assert v.steps[0].decline == "" and v.outcome == "failed"


def test_a_read_step_in_read_only_mode_still_has_to_be_called():
    v = score("MT-002", [], mode="read-only", ended_by="no_tool_call")
    assert v.outcome == "failed"


def _crud(iid_sent: Any, *, result: Any = None, truncated: bool = False) -> AttemptVerdict:
    result = {"iid": 17} if result is None else result
    calls = [
        call(
            1,
            "issue.create",
            {**PROJECT, "title": "eval-crud-issue"},
            result=result,
            truncated=truncated,
        ),
        call(2, "issue.get", {**PROJECT, "issue_iid": iid_sent}),
    ]
    return score("MS-014", calls)


def test_a_produced_binding_with_the_right_iid_matches():
    v = _crud(17)
    assert v.steps[1].complete and v.steps[1].args[1].matched


@pytest.mark.parametrize(
    ("kwargs", "sent", "words"),
    [
        ({}, 99, 'is not what step 1 answered at "iid"'),
        ({"truncated": True}, 17, "cut off rather than absent"),
        ({"result": {"id": 1}}, 17, 'answered with no field "iid"'),
        ({"result": {"iid": None}}, 17, 'answered with no value at "iid"'),
    ],
)
def test_produced_bindings_fail_on_wrong_truncated_missing_and_null(kwargs, sent, words):
    v = _crud(sent, **kwargs)
    arg = v.steps[1].args[1]
    assert arg.compared and not arg.matched and words in arg.reason
    assert v.outcome == "failed" and v.reason.startswith("step 2 (issue.get)")


# --- C.4-C.6 rules one by one -----------------------------------------------------------------------


def test_calls_are_read_in_index_order_not_file_order():
    v = score("TST-TWO", [call(2, "issue.list", PROJECT), call(1, "project.get", PROJECT)])
    assert v.outcome == "completed"
    assert [s.call_index for s in v.steps] == [1, 2]


def test_a_step_the_tiers_catalog_lacks_is_unknown_and_fails_the_attempt():
    v = score("TST-GONE", [call(1, "vulnerability.list", {})])
    assert not v.steps[0].known and v.outcome == "failed"
    assert "the catalog at this tier has no vulnerability.list" in v.reason


def test_a_licensed_action_is_unknown_at_a_lower_tier():
    v = score("MT-075", [call(1, "dora_metrics.project", {**PROJECT, "metric": "x"})], tier="free")
    assert v.outcome == "failed" and not v.steps[0].known


def test_a_step_the_catalog_lacks_is_still_reached_and_consumes_its_call():
    """Upstream's matchSteps reads no catalog: the call that names an unknown step reaches it
    (Reached counts it, the refused tries before it are its retries) and is consumed, so the
    next step's window starts after it; only then is the step marked unknown and failed."""
    v = score(
        "TST-GONE",
        [
            call(1, "vulnerability.list", {}, outcome="refused:invalid_params"),
            call(2, "vulnerability.list", {}),
        ],
    )
    (step,) = v.steps
    assert step.reached and not step.known and step.retries == 1
    assert not step.complete and v.outcome == "failed"
    assert step.call_index == 0 and step.answer == ""  # nothing else is read of the call
    # A licensed step at a lower tier: its call is consumed, so a later step named by that
    # same call is not reached by it.
    v = score("MT-075", [call(1, "dora_metrics.project", {**PROJECT, "metric": "x"})], tier="free")
    assert v.steps[0].reached and not v.steps[0].known
    assert v.outcome == "failed" and "the catalog at this tier has no" in v.reason


def test_authored_and_unsent_optional_arguments_carry_no_reason_as_upstream():
    v = score("TST-OPT", [call(1, "project.get", PROJECT), call(2, "project.list", {})])
    optional = v.steps[1].args[0]
    assert not optional.compared and optional.reason == ""


def test_a_failing_step_before_an_unobserved_one_fails():
    v = score(
        "TST-TWO",
        [
            call(1, "project.get", {"project_id": "wrong"}),
            call(2, "issue.list", PROJECT, observed=False),
        ],
    )
    assert v.outcome == "failed"


def test_an_unobserved_step_before_a_failing_one_is_unobserved():
    v = score(
        "TST-TWO",
        [
            call(1, "project.get", PROJECT, observed=False),
            call(2, "issue.list", {"project_id": "wrong"}),
        ],
    )
    assert v.outcome == "unobserved"


def test_a_failed_verify_check_fails_an_otherwise_complete_attempt():
    v = score("MT-002", [call(1, "project.get", PROJECT)], verifies=(True, False))
    assert v.outcome == "failed" and "recipe check" in v.reason and not v.verified


def test_a_failed_verify_overrides_gitlab_refused():
    v = score("MT-002", [call(1, "project.get", PROJECT, outcome="tool_error")], verifies=(False,))
    assert v.outcome == "failed"


def test_gitlab_refused_excuses_only_unreached_steps():
    v = score(
        "TST-TWO",
        [
            call(1, "project.get", PROJECT, outcome="tool_error"),
            call(2, "issue.list", {"project_id": "wrong"}),
        ],
    )
    assert v.outcome == "failed"


def test_an_unreached_optional_step_is_complete():
    v = score("TST-OPT", [call(1, "project.get", PROJECT)])
    assert v.outcome == "completed" and v.clean and v.steps[1].complete


def test_an_optional_step_reached_with_a_wrong_argument_is_not_clean():
    v = score(
        "TST-OPT", [call(1, "project.get", PROJECT), call(2, "project.list", {"per_page": 50})]
    )
    assert not v.clean
    agg = aggregate([v])
    assert agg.ratios["reached"] == [1, 1]  # optional steps are in no Reached denominator
    assert agg.ratios["argument_fidelity"] == [1, 2]  # but their arguments count


def test_authored_arguments_are_never_compared_even_when_required_and_missing():
    v = score("MT-075", [call(1, "dora_metrics.project", dict(PROJECT))])
    args = {a.name: a for a in v.steps[0].args}
    assert not args["metric"].compared and v.outcome == "completed"


def test_fact_spellings_are_one_way():
    assert score("MT-002", [call(1, "project.get", {"project_id": 42})]).outcome == "completed"
    facts = {**FACTS, "project_path": "42", "project_id": "eval-group/eval-project"}
    # project_id truth does not accept the path spelling: only project_path -> project_id.
    v = score(
        "MT-002", [call(1, "project.get", {"project_id": "eval-group/eval-project"})], facts=facts
    )
    assert v.outcome == "completed"  # the path is facts[project_id], accepted one-way
    v = score("MT-002", [call(1, "project.get", PROJECT)], facts={"default_branch": "main"})
    assert 'recorded no fact named "project_path"' in v.steps[0].args[0].reason


def test_confirm_is_top_level_on_dynamic_only():
    inside = call(1, "issue.delete", DELETE, confirm=True, confirm_top=False)
    assert score("MT-013", [inside]).steps[0].confirmation == "never"
    meta = call(1, "issue.delete", DELETE, surface="meta", confirm=True, confirm_top=False)
    assert score("MT-013", [meta], surface="meta").steps[0].confirmation == "unaided"


@pytest.mark.parametrize(
    ("value", "confirmed"),
    [(True, True), ("true", True), (" TRUE ", True), ("yes", False), (1, False), (False, False)],
)
def test_confirm_reads_true_and_the_string_true(value, confirmed):
    s = score("MT-013", [call(1, "issue.delete", DELETE, confirm=value)]).steps[0]
    assert (s.confirmation == "unaided") is confirmed


def test_a_destructive_step_without_confirmation_is_not_clean():
    v = score("MT-013", [call(1, "issue.delete", DELETE)])
    assert v.outcome == "completed" and v.steps[0].confirmation == "never" and not v.clean


def test_the_last_turn_with_a_tool_call_means_the_attempt_did_not_end_in_text():
    v = score("MT-004", [], mode="read-only", ended_by="completed", last_turn_tool=True)
    assert v.outcome == "failed" and not v.ended_in_text
    v = score("MT-004", [], mode="read-only", ended_by="completed", turns=False)
    assert v.ended_in_text and v.outcome == "completed"


def test_a_standalone_step_matches_by_tool():
    calls = [
        call(
            1,
            "",
            {"remote_url": FACTS["remote_url"]},
            tool="gitlab_discover_project",
            dispatched="",
        ),
        call(2, "project.get", PROJECT),
        call(3, "repository.file_get", {**PROJECT, "file_path": "README.md", "ref": "main"}),
    ]
    v = score("MS-001", calls)
    assert v.steps[0].matched_by == "tool" and v.outcome == "completed"


def test_individual_tools_read_top_level_arguments():
    v = score(
        "MT-002", [call(1, "project.get", PROJECT, surface="individual")], surface="individual"
    )
    assert v.outcome == "completed"


def test_a_dispatcher_call_whose_params_are_not_an_object_sends_no_arguments():
    c = call(
        1, "project.get", raw_args={"action": "project.get", "params": "eval-group/eval-project"}
    )
    v = score("MT-002", [c])
    assert v.steps[0].args[0].reason == "the argument was not sent"


def test_unknown_surface_or_case_cannot_be_scored():
    from records.scorer.score import ScoringError

    with pytest.raises(ScoringError):
        score("NOPE-1", [])


# --- values ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "want", "equal"),
    [
        (42, "42", True),
        ("42", "42", True),
        (42.0, "42", True),
        ("42.0", "42", True),
        (None, "42", False),
        ("", "", True),
        (True, "true", True),
        ({"a": 1}, '{"a":1}', True),
        ("0x2Ap0", "42", True),
        ("1e400", "1e400", True),
        (" 42", "42", False),
        ("4_2", "42", True),  # strconv.ParseFloat takes "_" between digits
    ],
)
def test_values_compare_by_text_then_as_go_numbers(raw, want, equal):
    assert equal_value(raw, want) is equal


def test_go_parse_float_mirrors_strconv():
    assert go_parse_float("1e400") is None  # out of range is an error in Go
    assert go_parse_float("0x1p-2") == 0.25
    assert go_parse_float("0x_1p-2") == 0.25
    assert go_parse_float("+.5") == 0.5 and go_parse_float("0x1") is None  # hex needs its p


def test_numeric_equality_accepts_underscores_between_digits_as_go_parsefloat_does():
    """modelrecord.md C.5 says "as Go's strconv.ParseFloat": it takes "_" between digits in
    decimal too (strconv's own test table: "1_23.50_0_0e+1_2" is 1.235e14), never beside a
    dot, an exponent sign or the ends."""
    assert equal_value("4_2", "42") and equal_value("1e1_0", "1e10")
    assert go_parse_float("1_23.50_0_0e+1_2") == 1.235e14
    for bad in ("_42", "42_", "4__2", "123_.5", "123._5", "1e_5", "-_1"):
        assert go_parse_float(bad) is None, bad


def test_non_ascii_digits_are_never_numbers():
    assert go_parse_float("٤٢") is None and go_parse_float("４２") is None
    assert not equal_value("٤٢", "42") and not equal_value("４２", "42")


def test_a_long_adversarial_number_is_read_in_one_pass():
    # A backtracking pattern took hours on this at the 1 MiB line cap; a single pass returns at
    # once (a regression would hang the suite rather than fail it, and be seen).
    assert go_parse_float("1" * 1_000_000 + "x") is None
    assert not equal_value("1" * 1_000_000 + "x", "1")
    assert go_parse_float("inf") == math.inf and math.isnan(go_parse_float("NaN"))
    assert go_parse_float("+.5") == 0.5 and go_parse_float(".") is None


def test_clean_follows_the_derived_reading_of_c7():
    base = score("MT-002", [call(1, "project.get", PROJECT)])
    assert is_clean(base)
    base.unaided = False
    assert not is_clean(base)


def test_the_test_key_is_digested_like_any_other():
    assert KEY.digest == digest_of(KEY.cases) and KEY.digest != KEY.declared_digest


def test_an_empty_aggregate_prints_dashes_never_zero_percent():
    agg = Aggregate()
    assert ratio_text(*agg.ratios["completion"]) == "-" and overhead_text(agg) == "-"
