"""Small shard builders for tests: minimal valid lines (Appendix 2) and helpers to vary them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_SHARD = FIXTURES / "modelrecord" / "modeleval-dynamic.jsonl"
SAMPLE_KEY = FIXTURES / "corpus" / "corpus-key-sample.json"

MINIMAL: dict[str, dict[str, Any]] = {
    "run": {
        "run_id": "run-1",
        "repeat": 1,
        "tier": "ultimate",
        "corpus_digest": "b519a10571ab2192",
    },
    "session": {
        "label": "dynamic/default",
        "surface": "dynamic",
        "mode": "default",
        "capabilities": "full",
        "served_tools": 2,
    },
    "attempt": {
        "id": "a1",
        "case": "MS-001",
        "model": "fake:perfect",
        "surface": "dynamic",
        "session": "dynamic/default",
        "repeat": 1,
        "ended_by": "completed",
    },
    "turn": {"attempt": "a1", "index": 1, "try": 1, "status": "ok"},
    "call": {"attempt": "a1", "turn": 1, "index": 1, "tool": "gitlab_find_action", "outcome": "ok"},
    "verify": {"attempt": "a1", "name": "the issue exists", "passed": True},
}


def line(typ: str, **changes: Any) -> dict[str, Any]:
    payload = copy.deepcopy(MINIMAL[typ])
    for k, v in changes.items():
        if v is _DROP:
            payload.pop(k, None)
        else:
            payload[k] = v
    return {"schema": 1, "type": typ, typ: payload}


class _Drop:
    pass


_DROP = _Drop()
DROP = _DROP


def encode(lines: list[dict[str, Any] | str]) -> bytes:
    out = []
    for item in lines:
        out.append(item if isinstance(item, str) else json.dumps(item))
    return ("\n".join(out) + "\n").encode()


def shard(*extra: dict[str, Any] | str, base: bool = True) -> bytes:
    """A valid minimal shard (attempt, turn, call, verify, session, run) plus `extra` lines."""
    lines: list[dict[str, Any] | str] = []
    if base:
        lines += [line("attempt"), line("turn"), line("call"), line("verify")]
    lines += list(extra)
    if base:
        lines += [line("session"), line("run")]
    return encode(lines)


def published_session(**changes: Any) -> dict[str, Any]:
    """A session line with every field the provenance rule (E.3 rule 4) reads."""
    session = line("session", **changes)
    session["session"].setdefault("token_scopes", ["api"])
    session["session"].setdefault("tool_schema_digests", {"fake:perfect": "t1"})
    return session


def published_shard(*lines: dict[str, Any], corpus: str = "b519a10571ab2192") -> bytes:
    """A shard whose rows pass every provenance rule (E.3 rule 4): these attempt (and session)
    lines, a published session when none is given, and a complete run line."""
    sessions = [x for x in lines if x["type"] == "session"] or [published_session()]
    run = line("run", corpus_digest=corpus)
    run["run"].update(
        commit="c0ffee",
        started_at="2026-11-01T10:00:00Z",
        gitlab_version="19.3.0",
        edition="ee",
        contract_digest="k1",
        providers=[{"spec": "fake:perfect", "name": "real", "model": "m", "options": {"t": "0"}}],
    )
    return encode([*(x for x in lines if x["type"] != "session"), *sessions, run])


# A run's prices as its run line gives them (per million tokens, with the date they were read).
PRICE = {
    "input_per_million_usd": 1.0,
    "output_per_million_usd": 5.0,
    "cache_write_per_million_usd": 1.25,
    "cache_read_per_million_usd": 0.1,
    "retrieved_on": "2026-09-16",
}


def ingest_bytes(*items: tuple[str, bytes], **options: Any) -> Any:
    """Ingest (name, bytes) pairs as one command-line upload; the report."""
    from records.ingest import bytes_input, ingest
    from records.models import Upload

    return ingest(
        [bytes_input(n, d) for n, d in items], Upload.objects.create(source="cli"), **options
    )


def demo_key() -> bytes:
    """The demo corpus key (the one `synth_run` answers), as an uploaded key file."""
    from records.devtools.synth import load_demo_key
    from records.formats.corpus_key import key_to_json

    return json.dumps(key_to_json(load_demo_key())).encode()


def synth_run(run_id: str = "run-synth", seed: int = 7, key: Any = None, **options: Any) -> bytes:
    """A generated shard of upstream's sample corpus, or of `key` (`records.devtools.synth.
    write_run` options)."""
    import io
    from datetime import datetime

    from records.devtools.synth import load_demo_key, write_run

    buf = io.BytesIO()
    options.setdefault("started_at", datetime(2026, 11, seed % 27 + 1, 9))
    options.setdefault("commit", f"{seed:040x}")
    write_run(buf, key or load_demo_key(), run_id=run_id, seed=seed, **options)
    return buf.getvalue()


CONFORMANCE = FIXTURES / "conformance"
CONFORMANCE_SUITE = (CONFORMANCE / "cases.json").read_bytes()
CONFORMANCE_ALL_PASS = (CONFORMANCE / "run-all-pass.jsonl").read_bytes()
CONFORMANCE_TWO_FAIL = (CONFORMANCE / "run-two-failures.jsonl").read_bytes()


def conformance_suite() -> Any:
    """The fixture conformance suite, read."""
    from records.conformance.formats import read_suite

    return read_suite(CONFORMANCE_SUITE, "cases.json")


def ingest_series(runs: int, *, repeat: int, cases: int, models: Any = None) -> None:
    """The demo key and `runs` scored runs of its corpus a day apart (run-1 first), each of
    `models` (the first two) on the dynamic surface, `repeat` repeats of the first `cases`."""
    from datetime import datetime, timedelta

    from records.devtools.synth import MODELS

    models = MODELS[:2] if models is None else models
    ingest_bytes(("key.json", demo_key()))
    start = datetime(2026, 10, 1, 9)
    for n in range(1, runs + 1):
        shard = synth_run(
            f"run-{n}",
            seed=n,
            started_at=start + timedelta(days=n),
            repeat=repeat,
            models=models,
            surfaces=("dynamic",),
            max_attempts=cases * len(models) * repeat,
        )
        ingest_bytes((f"modeleval-{n}.jsonl", shard))
