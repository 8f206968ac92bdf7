"""Sealed replays: the corpora, each replay over its full denominator, and its report as encoded."""

from __future__ import annotations

import json

from django.db.models import Count
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from records.models import (
    ObsCorpus,
    ObsReplay,
)
from records.views.access import (
    read_access,
)


@require_GET
@read_access
def replays(request: HttpRequest) -> HttpResponse:
    corpora = list(
        ObsCorpus.objects.annotate(replay_count=Count("replays")).order_by("-created_at")[:200]
    )
    latest = {}
    for r in ObsReplay.objects.filter(corpus__in=corpora).order_by(
        "corpus_id", "-created_at", "-id"
    ):
        latest.setdefault(r.corpus_id, r)
    return render(
        request, "records/replays/list.html", {"corpora": [(c, latest.get(c.pk)) for c in corpora]}
    )


@require_GET
@read_access
def replay_corpus(request: HttpRequest, pk: int) -> HttpResponse:
    corpus = get_object_or_404(ObsCorpus, pk=pk)
    runs = list(corpus.replays.order_by("created_at", "id")[:20])
    verdicts = {r.pk: {v["subjectId"]: v for v in json.loads(r.report)["verdicts"]} for r in runs}
    labels = corpus.corpus.get("labels", {})
    rows = [
        (s["id"], s["revision"], labels.get(s["id"]), [verdicts[r.pk].get(s["id"]) for r in runs])
        for s in corpus.corpus.get("subjects", [])
    ]
    return render(
        request, "records/replays/corpus.html", {"corpus": corpus, "runs": runs, "rows": rows}
    )


@require_GET
@read_access
def replay_detail(request: HttpRequest, pk: int) -> HttpResponse:
    replay = get_object_or_404(ObsReplay.objects.select_related("corpus", "upload"), pk=pk)
    report = json.loads(replay.report)
    reasons: dict[tuple[str, str], int] = {}
    rows = []
    for v in report["verdicts"]:
        key = (v["verdict"], v.get("reason", ""))
        reasons[key] = reasons.get(key, 0) + 1
        rows.append((v, replay.results.get(v["subjectId"])))
    return render(
        request,
        "records/replays/detail.html",
        {
            "replay": replay,
            "report": report,
            "rows": rows,
            "reasons": sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])),
            "fields": ("identity", "revision", "inputTokens", "outputTokens", "latencyMillis"),
        },
    )


@require_GET
@read_access
def replay_report(request: HttpRequest, pk: int) -> HttpResponse:
    replay = get_object_or_404(ObsReplay, pk=pk)
    response = HttpResponse(replay.report, content_type="application/json")
    response["Content-Disposition"] = f'inline; filename="oca-replay-{replay.pk}.json"'
    return response
