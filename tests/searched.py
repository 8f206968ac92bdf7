"""What a search must find, read straight from shard files as plain JSON lines: the searched
store (the demo's runs, the fixture shard and a hostile copy of it) and the rules to check its
answers against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from records.devtools.synth import demo_files
from records.ingest import ingest, inputs_from_paths
from records.models import Upload
from records.search import engine
from tests.builders import FIXTURE_SHARD


def values_of(value: Any) -> list[str]:
    """The string and number values of a JSON value (what a call's arguments and result give
    the index), keys left out."""
    if isinstance(value, dict):
        return [v for item in value.values() for v in values_of(item)]
    if isinstance(value, list):
        return [v for item in value for v in values_of(item)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def words_of(*texts: str) -> set[str]:
    return {w for text in texts for w in engine.words(text)} if texts else set()


class Shards:
    """The attempts and calls of shard files, read as plain JSON lines."""

    def __init__(self, paths: list[Path]) -> None:
        self.attempts: dict[tuple[str, str], dict[str, Any]] = {}
        for path in paths:
            lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
            run = next(x["run"] for x in lines if x["type"] == "run")
            sessions = {
                x["session"]["label"]: x["session"] for x in lines if x["type"] == "session"
            }
            mine: dict[str, dict[str, Any]] = {}
            for x in lines:
                if x["type"] == "attempt":
                    a = x["attempt"]
                    session = sessions.get(a.get("session", ""), {})
                    mine[a["id"]] = {
                        **a,
                        "run": run,
                        "effective_surface": a.get("surface") or session.get("surface", ""),
                        "turns": [],
                        "calls": [],
                        "verifys": [],
                    }
            for x in lines:
                kind = x["type"]
                if kind in ("turn", "call", "verify"):
                    mine[x[kind]["attempt"]][f"{kind}s"].append(x[kind])
            for key, a in mine.items():
                self.attempts[(run["run_id"], key)] = a

    def select(self, attempt=lambda a: True, call=None, q: str = "", verdicts=None):
        """(attempts, calls) as the search defines them, by (run_id, attempt id[, index])."""
        words = set(engine.words(q))
        attempts, calls = set(), set()
        for ident, a in self.attempts.items():
            if not attempt(a):
                continue
            blocks = [b.get("text", "") for t in a["turns"] for b in t.get("blocks", [])]
            details = [v.get("detail", "") for v in a["verifys"]]
            own = bool(words) and words <= words_of(
                a.get("stimulus", ""), a.get("reason", ""), *blocks, *details
            )

            def said(c: dict[str, Any]) -> bool:
                return words <= words_of(
                    *values_of(c.get("arguments")), *values_of(c.get("result")), c.get("text", "")
                )

            if call is not None:
                hits = [c for c in a["calls"] if call(c) and (not words or own or said(c))]
            elif words:
                hits = [c for c in a["calls"] if said(c)]
            else:
                hits = []
            if (call is not None and hits) or (call is None and (not words or own or hits)):
                attempts.add(ident)
                calls |= {(*ident, c["index"]) for c in hits}
        return attempts, calls


def hostile_shard(tmp_path: Path) -> Path:
    """The fixture shard as another run whose calls were cut short and read hostile text."""
    lines = []
    for raw in FIXTURE_SHARD.read_text().splitlines():
        x = json.loads(raw)
        if x["type"] == "run":
            x["run"]["run_id"] = "run-hostile"
        if x["type"] == "call" and x["call"]["index"] == 2:
            x["call"].update(
                result_truncated=True, text='<script>alert("pwn")</script> \u202etimeout'
            )
        lines.append(json.dumps(x))
    path = tmp_path / "modeleval-hostile.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def store_searched(tmp_path: Path) -> Shards:
    """The demo's key and runs, the fixture shard and its hostile copy, stored; their shards."""
    key, *runs = demo_files(tmp_path, cases=8)  # upstream's sample key, which the fixture's is
    paths = [*runs, FIXTURE_SHARD, hostile_shard(tmp_path)]
    ingest(inputs_from_paths([key, *paths]), Upload.objects.create(source="test"))
    return Shards(paths)


def refused(c):
    return c["outcome"].startswith("refused:")
