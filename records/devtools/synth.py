"""Deterministic synthetic evaluation runs of realistic shape, for the demo and the benchmark.

Pure Python, no Django. `write_run` writes one shard the way the upstream runner does (attempt,
turn and call lines as each attempt ends, session and run lines last) from a corpus key, with
models that differ in quality, several surfaces, repeats, retried and rate-limited requests,
thinking and text blocks, tool results of a few KB, verify lines, and skipped and errored attempts.
Everything derives from the seed: the same arguments write the same bytes.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

from records.formats.corpus_key import (
    Case,
    KeyDocument,
    Step,
    digest_of,
    key_to_json,
    read_corpus_key,
)

DEMO_KEY = Path(__file__).parent / "demo_data" / "corpus-key-sample.json"


@dataclass(frozen=True)
class ModelSpec:
    spec: str
    quality: float  # chance of getting an argument right
    price: tuple[float, float, float, float] | None
    think: bool = False


MODELS = (
    ModelSpec("anthropic:claude-haiku-4-5-20251001", 0.93, (1.00, 5.00, 1.25, 0.10), think=True),
    ModelSpec("openai:gpt-5.4-nano", 0.85, (0.20, 1.25, 0.0, 0.02)),
    ModelSpec("google:gemini-flash-latest", 0.80, (0.75, 3.75, 0.0, 0.075), think=True),
    ModelSpec("qwen:qwen3.8-flash", 0.72, None),
)
SURFACES = ("dynamic", "meta", "individual")
_FILLER = (
    "Synthetic description text that stands in for the README excerpt, labels, links and "
    "timestamps a real GitLab answer carries. "
) * 12


def load_demo_key() -> KeyDocument:
    return read_corpus_key(DEMO_KEY.read_bytes(), DEMO_KEY.name)


def widen_key(key: KeyDocument, cases: int) -> KeyDocument:
    """A key with `cases` cases cycled from `key`'s (new ids, same steps), digest recomputed."""

    out: list[Case] = []
    i = 0
    while len(out) < cases:
        for c in key.cases:
            if len(out) >= cases:
                break
            out.append(c if i == 0 else replace(c, id=f"{c.id}-X{i:04d}"))
        i += 1
    digest = digest_of(out)
    return KeyDocument(
        digest, digest, f"synthetic widening of {key.digest}", out, dict(key.retired), key.catalogs
    )


def _facts(rng: random.Random, n: int) -> dict[str, str]:
    pid = 1000 + n
    return {
        "project_path": f"eval-group/eval-project-{n}",
        "project_id": str(pid),
        "default_branch": rng.choice(["main", "main", "develop"]),
        "remote_url": f"https://gitlab.example.test/eval-group/eval-project-{n}.git",
        "issue_iid": str(rng.randint(1, 60)),
    }


def _render(prompt: str, facts: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*\.Facts\.(\w+)\s*\}\}", lambda m: facts.get(m.group(1), ""), prompt)


def _dump(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


class _ShardLines:
    """The lines of a shard being written, counted."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.lines = 0

    def line(self, typ: str, payload: dict[str, Any]) -> None:
        self.out.write(_dump({"schema": 1, "type": typ, typ: payload}))
        self.lines += 1


def write_run(
    out: IO[bytes],
    key: KeyDocument,
    *,
    run_id: str,
    commit: str,
    started_at: datetime,
    seed: int,
    repeat: int = 1,
    models: tuple[ModelSpec, ...] = MODELS,
    surfaces: tuple[str, ...] = SURFACES,
    tier: str = "ultimate",
    regress: dict[tuple[str, str], float] | None = None,
    max_attempts: int | None = None,
) -> int:
    """Write one shard; returns the number of lines. `regress` lowers a (model, surface) quality."""
    rng = random.Random(seed)
    w = _ShardLines(out)
    catalog = key.catalog_for(tier)
    assert catalog is not None
    regress = regress or {}
    attempts = 0
    fact_no = 0
    for case in key.cases:
        for model in models:
            for surface in surfaces:
                if case.surfaces_only and surface not in case.surfaces_only:
                    continue
                for r in range(1, repeat + 1):
                    if max_attempts is not None and attempts >= max_attempts:
                        break
                    attempts += 1
                    fact_no += 1
                    quality = model.quality - regress.get((model.spec, surface), 0.0)
                    _attempt(
                        w,
                        rng,
                        key,
                        case,
                        model,
                        surface,
                        r,
                        run_id,
                        tier,
                        catalog,
                        quality,
                        _facts(rng, fact_no),
                    )
    for surface in surfaces:
        w.line(
            "session",
            {
                "label": f"{surface}-default",
                "surface": surface,
                "mode": "default",
                "capabilities": "full",
                **({"meta_param_schema": "compact"} if surface == "meta" else {}),
                **({"slice_size": 24} if surface == "individual" else {}),
                "token_scopes": ["api"],
                "served_tools": {"dynamic": 2, "meta": 46, "individual": 24}[surface],
                "tool_schema_digests": {
                    m.spec: hashlib.sha256(f"tools|{surface}".encode()).hexdigest()[:16]
                    for m in models
                },
            },
        )
    w.line(
        "run",
        {
            "package": "test/e2e/modeleval",
            "run_id": run_id,
            "commit": commit,
            "started_at": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "edition": "enterprise",
            "gitlab_version": "19.3.0",
            "tier": tier,
            "tier_confirmed": True,
            "corpus_digest": key.digest,
            "contract_digest": "5f0c2a9e71d3b846",
            "providers": [_provider(m) for m in models],
            "budget_usd": 25.0,
            "repeat": repeat,
        },
    )
    return w.lines


def _provider(m: ModelSpec) -> dict[str, Any]:
    name, model = m.spec.split(":", 1)
    p: dict[str, Any] = {
        "spec": m.spec,
        "name": name,
        "model": model,
        "options": {"max_tokens": "4096", "temperature": "provider default"},
    }
    if m.price:
        p["price"] = dict(
            zip(
                (
                    "input_per_million_usd",
                    "output_per_million_usd",
                    "cache_write_per_million_usd",
                    "cache_read_per_million_usd",
                ),
                m.price,
                strict=True,
            ),
            retrieved_on="2026-09-16",
        )
    return p


def _tool_call(
    surface: str, step: Step, catalog: Any, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    if step.standalone:
        return step.standalone, args
    if surface == "dynamic":
        return "gitlab_execute_action", {"action": step.action, "params": args}
    if surface == "meta":
        entry = catalog.actions.get(step.action)
        return (entry.meta_tool if entry else "gitlab_project"), {
            "action": step.action,
            "params": args,
        }
    return "gitlab_" + step.action.replace(".", "_"), args


def _attempt(
    w: _ShardLines,
    rng: random.Random,
    key: KeyDocument,
    case: Case,
    model: ModelSpec,
    surface: str,
    r: int,
    run_id: str,
    tier: str,
    catalog: Any,
    quality: float,
    facts: dict[str, str],
) -> None:
    aid = f"{run_id}/{case.id}/{model.spec.replace(':', '-')}/{surface}/r{r}"
    base = {
        "id": aid,
        "case": case.id,
        "model": model.spec,
        "surface": surface,
        "repeat": r,
        "facts": facts,
        "stimulus": _render(case.prompt, facts),
    }
    if case.tier and tier not in (case.tier, "ultimate"):
        w.line(
            "attempt",
            {
                **base,
                "ended_by": "skipped",
                "reason": f"the case needs tier {case.tier}; the instance runs {tier}",
            },
        )
        return
    base["session"] = f"{surface}-default"
    base["shown_tools"] = 24 if surface == "individual" else 0
    roll = rng.random()
    if roll < 0.01:
        w.line(
            "attempt",
            {
                **base,
                "ended_by": "provider_error",
                "reason": "the provider answered 529 overloaded three times",
            },
        )
        _turn(w, rng, aid, 1, model, [], status="server_error", detail="529 overloaded")
        return
    turn = 0
    call_no = 0
    produced: dict[int, dict[str, Any]] = {}
    lines: list[tuple[str, dict[str, Any]]] = []
    ended_by = "completed"
    context = rng.randint(900, 1400)
    if surface == "dynamic" and rng.random() < 0.5:
        turn += 1
        call_no += 1
        blocks = [
            {"kind": "text", "text": "I will look the action up first."},
            {
                "kind": "tool_call",
                "tool": "gitlab_find_action",
                "arguments": {"query": case.steps[0].name.replace(".", " ")},
                "call_id": f"call_{call_no}",
            },
        ]
        lines += _turn_lines(rng, aid, turn, model, blocks, context)
        lines.append(
            (
                "call",
                {
                    "attempt": aid,
                    "turn": turn,
                    "index": call_no,
                    "tool": "gitlab_find_action",
                    "arguments": {"query": case.steps[0].name.replace(".", " ")},
                    "dispatched_tool": "gitlab_find_action",
                    "outcome": "ok",
                    "text": f"{case.steps[0].name} — matching action",
                    "duration_ms": rng.randint(15, 60),
                    "dispatch_observed": True,
                    "trace_id": f"{rng.getrandbits(128):032x}",
                },
            )
        )
    for n, step in enumerate(case.steps, 1):
        if roll > 0.985 and n == len(case.steps):
            ended_by = "over_budget"
            break
        if rng.random() > quality + 0.1 and n > 1:
            ended_by = "no_tool_call"
            break
        args: dict[str, Any] = {}
        for a in step.args:
            t = a.truth
            good = rng.random() < quality
            if t.kind == "fact":
                value: Any = (
                    facts.get(t.fact, "") if good else f"eval-group/other-{rng.randint(1, 9)}"
                )
                if good and t.fact == "project_path" and rng.random() < 0.3:
                    value = int(facts["project_id"])
            elif t.kind == "literal":
                value = t.literal if good else t.literal + "-x"
            elif t.kind == "produced":
                value = produced.get(t.produced_step, {}).get(t.produced_field, 99) if good else 99
            else:
                value = "deployment_frequency"
            if a.required or good:
                args[a.name] = value
        entry = catalog.actions.get(step.action) or catalog.standalone.get(step.standalone)
        destructive = bool(entry and entry.destructive)
        tool, arguments = _tool_call(surface, step, catalog, args)
        needs_retry = rng.random() > quality + 0.05
        attempts_here = [True, False] if needs_retry else [False]
        if destructive and rng.random() < quality:
            if surface == "dynamic":
                arguments = {**arguments, "confirm": True}
            else:
                arguments = {
                    **arguments,
                    **(
                        {"params": {**arguments["params"], "confirm": True}}
                        if "params" in arguments
                        else {"confirm": True}
                    ),
                }
        for retry in attempts_here:
            turn += 1
            call_no += 1
            blocks = []
            if model.think and rng.random() < 0.6:
                blocks.append(
                    {
                        "kind": "thinking",
                        "text": f"The case wants {step.name}; "
                        f"I should pass {', '.join(args) or 'nothing'}.",
                    }
                )
            blocks.append(
                {
                    "kind": "tool_call",
                    "tool": tool,
                    "arguments": arguments,
                    "call_id": f"call_{call_no}",
                }
            )
            context += rng.randint(300, 900)
            lines += _turn_lines(rng, aid, turn, model, blocks, context)
            result = None
            if retry:
                outcome = "refused:invalid_params"
                text = "invalid params: missing or malformed argument; fix and call again"
            else:
                outcome = "ok" if rng.random() < 0.98 else "tool_error"
                iid = rng.randint(10, 90)
                result = {
                    "id": rng.randint(1000, 9999),
                    "iid": iid,
                    "project_id": int(facts["project_id"]),
                    "path_with_namespace": facts["project_path"],
                    "default_branch": facts["default_branch"],
                    "description": _FILLER,
                    "web_url": facts["remote_url"],
                }
                produced[n] = {"iid": iid}
                text = f"## {step.name}\n\n- id: {result['id']}\n- iid: {iid}\n\n{_FILLER[:400]}"
            call = {
                "attempt": aid,
                "turn": turn,
                "index": call_no,
                "tool": tool,
                "arguments": arguments,
                "requested_action": step.action,
                "dispatched_action": step.action if not retry else "",
                "dispatched_tool": tool,
                "outcome": outcome,
                "text": text,
                "duration_ms": rng.randint(40, 900),
                "trace_id": f"{rng.getrandbits(128):032x}",
                "dispatch_observed": rng.random() > 0.004,
            }
            if retry:
                call["refusal_reason"] = "invalid_params"
            if result is not None:
                call["result"] = result
                call["requests"] = rng.randint(1, 3)
            if step.standalone:
                call.pop("requested_action")
                call.pop("dispatched_action")
            lines.append(("call", call))
    if ended_by in ("completed", "no_tool_call"):
        turn += 1
        lines += _turn_lines(
            rng,
            aid,
            turn,
            model,
            [{"kind": "text", "text": f"Done: {base['stimulus'][:70]}"}],
            context,
        )
    elif ended_by == "over_budget":
        pass
    attempt = {**base, "ended_by": ended_by}
    if ended_by == "over_budget":
        attempt["reason"] = "the attempt reached its turn cap"
    w.line("attempt", attempt)
    for typ, payload in lines:
        w.line(typ, payload)
    if any(
        catalog.actions.get(s.action) and not catalog.actions[s.action].read_only
        for s in case.steps
    ):
        passed = ended_by == "completed" and rng.random() < 0.97
        v = {"attempt": aid, "name": case.recipe + " state holds", "passed": passed}
        if not passed:
            v["detail"] = "the issue was not in the state the case asked for"
        w.line("verify", v)


def _turn_lines(
    rng: random.Random,
    aid: str,
    index: int,
    model: ModelSpec,
    blocks: list[dict[str, Any]],
    context: int,
) -> list[tuple[str, dict[str, Any]]]:
    out = []
    if rng.random() < 0.05:
        out.append(
            (
                "turn",
                {
                    "attempt": aid,
                    "index": index,
                    "try": 1,
                    "usage": {"input": 0, "output": 0},
                    "status": "rate_limited",
                    "detail": "429 too many requests",
                    "latency_ms": rng.randint(50, 200),
                },
            )
        )
    cache_read = int(context * rng.uniform(0.4, 0.8)) if index > 1 else 0
    usage = {"input": context, "output": rng.randint(30, 260)}
    if cache_read:
        usage["cache_read"] = cache_read
    if index == 1 and model.spec.startswith("anthropic"):
        usage["cache_created"] = int(context * 0.7)
    out.append(
        (
            "turn",
            {
                "attempt": aid,
                "index": index,
                "try": len(out) + 1,
                "blocks": blocks,
                "usage": usage,
                "status": "ok",
                "latency_ms": rng.randint(300, 2500),
            },
        )
    )
    return out


def _turn(
    w: _ShardLines,
    rng: random.Random,
    aid: str,
    index: int,
    model: ModelSpec,
    blocks: list[dict[str, Any]],
    *,
    status: str,
    detail: str,
) -> None:
    w.line(
        "turn",
        {
            "attempt": aid,
            "index": index,
            "try": 1,
            "usage": {"input": 0, "output": 0},
            "status": status,
            "detail": detail,
        },
    )


DEMO_CASES = 16  # the sample key's 8 cases, cycled: what a row needs for a regression to show


def demo_key(cases: int = DEMO_CASES) -> KeyDocument:
    """The demo's corpus key: upstream's sample key widened to `DEMO_CASES` cases (at 8, the
    sample itself). Over the sample's 8 cases a paired test seldom reaches Holm's first step
    once 12 rows are decided together (p < 0.05 / 12 on a t-test of 7 degrees of freedom): the
    demo's planted drop is not called there, and over 16 cases it is."""
    return widen_key(load_demo_key(), cases)


def write_demo_key(directory: Path, cases: int = DEMO_CASES) -> Path:
    """The demo's corpus key as a key file in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "corpus-key-demo.json"
    path.write_bytes(orjson.dumps(key_to_json(demo_key(cases)), option=orjson.OPT_INDENT_2))
    return path


def demo_files(directory: Path, cases: int = DEMO_CASES) -> list[Path]:
    """The demo's key and its three runs, written to `directory`: two commits a week apart, the
    second regressing one model on meta. Over `cases` cases (tests that need no regression
    called ask for the sample's 8, a third of the attempts)."""
    key = demo_key(cases)
    key_path = write_demo_key(directory, cases)
    base = datetime(2026, 11, 16, 9, 0)
    plans = [
        ("run-2026-11-16-a1b2c3", "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", 0, 11, {}),
        (
            "run-2026-11-23-f00dfa",
            "f00dfacecafe0123456789abcdef0123456789ab",
            7,
            23,
            {("openai:gpt-5.4-nano", "meta"): 0.35},
        ),
        ("run-2026-11-24-ee1234", "ee12345678901234567890abcdefabcdefabcdef", 8, 37, {}),
    ]
    paths = [key_path]
    for run_id, commit, days, seed, regress in plans:
        path = directory / f"modeleval-{seed:05d}.jsonl"
        with open(path, "wb") as fh:
            write_run(
                fh,
                key,
                run_id=run_id,
                commit=commit,
                started_at=base + timedelta(days=days),
                seed=seed,
                repeat=2,
                regress=regress,
            )
        paths.append(path)
    return paths
