"""What a run's score tables are read as beyond the page: rows in the order the address asks
for, and each row as the CSV and JSON exports carry it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from records.formats.rows import ADDITIVE, TOKENS
from records.queries.compare import rate
from records.scorer.score import COUNTED_APART, RATIO_COLUMNS

# The figures an exported row carries besides its ratio columns (which it carries as numerator,
# denominator and interval): the additive counts that are no ratio's terms, the attempts and
# their tries, the outcomes counted apart, and the tokens.
EXPORTED_FIGURES = (
    *(name for name in ADDITIVE if not name.endswith(("_n", "_d"))),
    "attempts",
    "turns",
    *COUNTED_APART,
    *TOKENS,
)


def sort_rows(groups: list[Any], sort: str) -> None:
    """Each group's rows by model (the default) or by a column's rate, rows without a rate last."""
    key, descending = sort.lstrip("-"), sort.startswith("-")
    for g in groups:
        if key in RATIO_COLUMNS:
            rates = {r.row_key: rate(dict(r.columns)[key]) for r in g.rows}
            rated = sorted(
                (r for r in g.rows if rates[r.row_key] is not None),
                key=lambda r: rates[r.row_key],
                reverse=descending,
            )
            g.rows = rated + [r for r in g.rows if rates[r.row_key] is None]
        elif key == "model":
            g.rows.sort(key=lambda r: r.model, reverse=descending)


def score_export_rows(scoring: Any, groups: list[Any]) -> Iterator[dict[str, Any]]:
    """Every row of every table: its identity, the scoring it rests on, its refusal, each ratio
    column with its 95% interval, and the figures above."""
    for g in groups:
        for r in g.rows:
            row = {
                "caption": g.caption,
                "row_key": r.row_key,
                "model": r.model,
                "surface": r.surface,
                "stale_corpus": scoring.stale,
                "corpus_key": scoring.key.digest,
                "scorer": scoring.scorer_version,
                "refusal": r.refusal[0] if r.refusal else "",
                "refusal_reason": r.refusal[1] if r.refusal else "",
            }
            for name, (n, d), ci in r.columns_with_intervals:
                row[f"{name}_numerator"], row[f"{name}_denominator"] = n, d
                # the 95% interval (none where there is no rate)
                row[f"{name}_low"] = round(ci.low, 4) if ci else None
                row[f"{name}_high"] = round(ci.high, 4) if ci else None
            for name in EXPORTED_FIGURES:
                row[name] = r.figures[name] or 0
            yield row


def flip_summary(changed: list[dict[str, Any]]) -> list[tuple[tuple[str, str], dict[str, int]]]:
    """What changed between two scorings, per (model, surface): how many attempts now pass
    (fixed), now fail (broke), or moved between two other outcomes; in model order."""
    summary: dict[tuple[str, str], dict[str, int]] = {}
    for f in changed:
        bucket = summary.setdefault(
            (f["model"], f["surface"]), {"fixed": 0, "broke": 0, "other": 0}
        )
        if f["after"] == "completed" and f["before"] != "completed":
            bucket["fixed"] += 1
        elif f["before"] == "completed" and f["after"] != "completed":
            bucket["broke"] += 1
        else:
            bucket["other"] += 1
    return sorted(summary.items())
