"""Upstream's refusal rules (E.3): which rows upstream would not publish, and why. Rules 1-4 the
run, the row's session and its provider decide before scoring; the stale key and the duplicate
row are judged once the rows are summed."""

from __future__ import annotations

from typing import Any

from records.models import Provider, Run, Scoring, Session

REFUSAL_RULES = (
    "filtered-run",
    "unobserved-session",
    "fake-provider",
    "incomplete-provenance",
    "stale-corpus",
    "duplicate-row",
)


def provenance_refusal(
    run: Run, s: Session | None, p: Provider | None, unobserved: set[int]
) -> tuple[str, str] | None:
    """E.3 rules 1-4, which the run, the row's session and its provider decide; upstream
    judges them before scoring, so a row they refuse is never scored."""
    if run.filter:
        return "filtered-run", f"the run was filtered with -run {run.filter!r}"
    if s is not None and s.pk in unobserved:
        return "unobserved-session", f"session {s.label!r} made calls and none was observed"
    if p is not None and p.name == "fake":
        return "fake-provider", "the provider is the fake one"
    if p is None:
        return "incomplete-provenance", "the run line has no provider with this row's model"
    checks = [
        ("commit", run.commit),
        ("date", run.started_at),
        ("gitlab_version", run.gitlab_version),
        ("edition", run.edition),
        ("tier", run.tier),
        # The session line's own surface, as upstream's provenance reads it: an attempt's
        # surface does not fill a hole in its session line.
        ("surface", s.surface if s else ""),
        ("mode", s.mode if s else ""),
        ("capability_surface", s.capabilities if s else ""),
        ("token_scopes", s.token_scopes if s else []),
        ("served_tools", (s.served_tools if s else 0) > 0),
        ("provider", p.name),
        ("model", p.model),
        ("request_options", p.options),
        ("repeat", run.repeat > 0),
        ("corpus_digest", run.corpus_digest),
        ("contract_digest", run.contract_digest),
        ("tool_schema_digest", (s.tool_schema_digests or {}).get(p.spec) if s else ""),
    ]
    for name, value in checks:
        if not value:
            return "incomplete-provenance", f"{name} is empty"
    return None


def refusal(
    row: Any, run: Run, scoring: Scoring, unobserved: set[int], claimed: set[str]
) -> tuple[str, str] | None:
    """The first E.3 rule a row (a `tables.TableRow`, its session and provider set) trips, as
    (rule, reason); None when upstream would publish it. `claimed`: the row keys an earlier run
    already produced."""
    first = provenance_refusal(run, row.session, row.provider, unobserved)
    if first:
        return first
    if scoring.stale:
        return "stale-corpus", (
            f"the run's corpus digest {run.corpus_digest} is not the key's {scoring.key.digest}"
        )
    if row.row_key in claimed:
        return "duplicate-row", "an earlier run already produced a row with this key"
    return None
