"""What the runs list and a run's attempt list read: filtered, sorted, one page at a time."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, F, OuterRef, QuerySet, Subquery

from records.models import Attempt, Run, SurfaceSummary

# The runs list's orders, by the name the query string gives them.
RUN_SORTS = {
    "-started": ("-started_at", "-id"),
    "started": ("started_at", "id"),
    "-attempts": ("-attempt_count", "-id"),
    "attempts": ("attempt_count", "id"),
    "-tokens": ("-token_total", "-id"),
    "tokens": ("token_total", "id"),
    "commit": ("commit", "-id"),
}


def filtered_runs(data: dict[str, Any]) -> QuerySet[Run]:
    qs = Run.objects.select_related("shard").annotate(
        token_total=F("input_tokens")
        + F("output_tokens")
        + F("cache_created_tokens")
        + F("cache_read_tokens")
    )
    summary = {}
    for name in ("model", "surface", "mode"):
        if data.get(name):
            summary[name] = data[name]
    if summary:
        qs = qs.filter(Exists(SurfaceSummary.objects.filter(run=OuterRef("pk"), **summary)))
    if data.get("tier"):
        qs = qs.filter(tier=data["tier"])
    if data.get("commit"):
        qs = qs.filter(commit__startswith=data["commit"])
    if data.get("corpus_digest"):
        qs = qs.filter(corpus_digest=data["corpus_digest"])
    if data.get("since"):
        qs = qs.filter(started_at__date__gte=data["since"])
    if data.get("until"):
        qs = qs.filter(started_at__date__lte=data["until"])
    return qs.order_by(*RUN_SORTS[data.get("sort") or "-started"])


def filtered_attempts(run: Run, data: dict[str, Any], scoring: Any = None) -> QuerySet[Attempt]:
    qs = Attempt.objects.filter(run=run)
    if scoring is not None:
        from records.models import Verdict

        verdicts = Verdict.objects.filter(scoring=scoring, attempt=OuterRef("pk"))
        qs = qs.annotate(
            outcome=Subquery(verdicts.values("outcome")[:1]),
            clean=Subquery(verdicts.values("clean")[:1]),
        )
        if data.get("outcome"):
            qs = qs.filter(Exists(verdicts.filter(outcome=data["outcome"])))
        if data.get("clean") in ("yes", "no"):
            qs = qs.filter(Exists(verdicts.filter(clean=data["clean"] == "yes")))
    if data.get("model"):
        qs = qs.filter(model=data["model"])
    if data.get("surface"):
        qs = qs.filter(effective_surface=data["surface"])
    if data.get("case"):
        qs = qs.filter(case=data["case"])
    if data.get("ended_by"):
        qs = qs.filter(ended_by=data["ended_by"])
    return qs.order_by("line").defer("stimulus", "facts")


def previous_runs(runs: list[Run]) -> dict[int, int]:
    """For each run, the latest earlier run with the same corpus digest (one query)."""
    if not runs:
        return {}
    digests = {r.corpus_digest for r in runs if r.corpus_digest and r.started_at}
    candidates = list(
        Run.objects.filter(corpus_digest__in=digests, started_at__isnull=False)
        .order_by("corpus_digest", "-started_at", "-id")
        .values_list("pk", "corpus_digest", "started_at")[:2000]
    )
    out = {}
    for run in runs:
        if not run.started_at:
            continue
        for pk, digest, started in candidates:
            if digest == run.corpus_digest and started < run.started_at and pk != run.pk:
                out[run.pk] = pk
                break
    return out
