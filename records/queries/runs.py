"""What the runs list reads: runs sorted, their previous comparable runs, their headlines."""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db.models import F, QuerySet

from records.models import Attempt, Run, ScoreRow, Scoring, SurfaceSummary, Verdict
from records.scoring.tables import figure_sums, ratio_of, summed

# The runs list's orders, by the name the query string gives them: each column both ways,
# ties broken by the run id in the same direction; the commit alone.
RUN_SORTS = {
    f"{way}{name}": (f"{way}{column}", f"{way}id")
    for name, column in (
        ("started", "started_at"),
        ("attempts", "attempt_count"),
        ("tokens", "token_total"),
    )
    for way in ("-", "")
} | {"commit": ("commit", "-id")}


def runs_for_list() -> QuerySet[Run]:
    """Runs as the list shows them, with their token total for sorting."""
    return Run.objects.select_related("shard").annotate(
        token_total=F("input_tokens")
        + F("output_tokens")
        + F("cache_created_tokens")
        + F("cache_read_tokens")
    )


def previous_runs(runs: list[Run]) -> dict[int, int]:
    """For each run, the latest earlier run of the same corpus digest, models and surfaces: the
    run it is compared with by "compare with previous" and by the CI gate (one query)."""
    if not runs:
        return {}
    digests = {r.corpus_digest for r in runs if r.corpus_digest and r.started_at}
    candidates = list(
        Run.objects.filter(corpus_digest__in=digests, started_at__isnull=False)
        .order_by("corpus_digest", "-started_at", "-id")
        .values_list("pk", "corpus_digest", "started_at", "models_seen", "surfaces_seen")[:2000]
    )
    out = {}
    for run in runs:
        if not run.started_at:
            continue
        for pk, digest, started, models, surfaces in candidates:
            if (
                digest == run.corpus_digest
                and started < run.started_at
                and pk != run.pk
                and models == run.models_seen
                and surfaces == run.surfaces_seen
            ):
                out[run.pk] = pk
                break
    return out


def column_over(scoring: Any, attempts: QuerySet[Attempt], column: str) -> tuple[int, int]:
    """A score column summed over the verdicts of the given attempts: a drilled-into list's
    figure, to be read against the cell it came from (one query)."""
    sums = Verdict.objects.filter(scoring=scoring, attempt__in=attempts.values("pk")).aggregate(
        **figure_sums()
    )
    return ratio_of(summed(sums), column)


class Headline(NamedTuple):
    """A run's headline row: its model and surface, and its Clean as (N, D)."""

    model: str
    surface: str
    clean: tuple[int, int]


def headlines(runs: list[Run]) -> dict[int, Headline]:
    """Per run, its headline: the best Clean of its latest scoring (model, surface, (N, D)),
    the row a reader looks for first (two queries for a page of runs)."""
    latest = Scoring.objects.latest_for(runs)
    best: dict[int, Headline] = {}
    run_of = {s.pk: r for r, s in latest.items()}
    for scoring_pk, model, surface, figures in ScoreRow.objects.filter(
        scoring__in=latest.values()
    ).values_list("scoring", "model", "surface", "figures"):
        n, d = figures.get("clean") or 0, figures.get("attempts") or 0
        if not d:
            continue
        run_pk = run_of[scoring_pk]
        held = best.get(run_pk)
        if held is None or (n / d, -d, model) > (held[2][0] / held[2][1], -held[2][1], held[0]):
            best[run_pk] = Headline(model, surface, (n, d))
    return best


def model_suggestions(limit: int = 300) -> list[str]:
    """Model specs seen in any run, for the runs filter's suggestions."""
    return list(
        SurfaceSummary.objects.values_list("model", flat=True).distinct().order_by("model")[:limit]
    )
