"""What changed between two scorings of one run, attempt by attempt."""

from __future__ import annotations

from typing import Any

from records.models import (
    Scoring,
    Verdict,
)


def verdict_changes(before: Scoring, after: Scoring) -> list[dict[str, Any]]:
    """Attempts whose outcome or Clean changed between two scorings of one run."""
    old = {
        a: (o, c, r)
        for a, o, c, r in Verdict.objects.filter(scoring=before).values_list(
            "attempt_id", "outcome", "clean", "reason"
        )
    }
    out = []
    for a, o, c, r, key, model, surface, case in (
        Verdict.objects.filter(scoring=after)
        .values_list(
            "attempt_id", "outcome", "clean", "reason", "attempt__key", "model", "surface", "case"
        )
        .order_by("model", "surface", "case", "attempt_id")
    ):
        was = old.pop(a, None)
        if was is None or was[0] != o or was[1] != c:
            out.append(
                {
                    "attempt": a,
                    "key": key,
                    "model": model,
                    "surface": surface,
                    "case": case,
                    "before": was[0] if was else "not scored",
                    "before_clean": was[1] if was else None,
                    "before_reason": was[2] if was else "",
                    "after": o,
                    "after_clean": c,
                    "after_reason": r,
                }
            )
    return out
