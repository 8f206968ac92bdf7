"""Storing sealed corpora and their replays (obscorpus.md section 10), one document at a time.

Accepted documents (JSON): a corpus (bare, or under "corpus"); results (a list, or under
"results" with an optional "sealId") for a corpus already stored; or both at once, optionally
with the report they should produce (under "want" or "report"), which is then recomputed and
must match. Raw telemetry is captured on the way in. Nothing partial is stored.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from django.db import IntegrityError, transaction

from records.formats.shard import ShardError
from records.models import ObsCorpus, ObsReplay, Upload
from records.replays import formats as replay_formats
from records.replays import gojson

CORPUS_KEYS = {"subjects", "labels", "evaluatorRevision", "scoringRule"}
DOCUMENT_KEYS = {"corpus", "sealId", "results", "want", "report"}


def looks_like_replay(doc: Any) -> bool:
    if isinstance(doc, list):
        return True
    return (
        isinstance(doc, dict)
        and bool(doc)
        and (set(doc) <= DOCUMENT_KEYS or set(doc) <= CORPUS_KEYS)
    )


def _fail(name: str, exc: replay_formats.ReplayError) -> ShardError:
    return ShardError(name, exc.message, field=exc.field)


def ingest_document(doc: Any, name: str, upload: Upload, data: bytes) -> dict[str, Any]:
    """Store what the document holds (`doc`, decoded from `data`); raises ShardError naming the
    file and field."""
    try:
        if isinstance(doc, list):
            doc = {"results": doc}
        if set(doc) <= CORPUS_KEYS:
            doc = {"corpus": doc}
        corpus_doc = doc.get("corpus")
        sealed = replay_formats.seal(corpus_doc) if corpus_doc is not None else None
        declared = doc.get("sealId")
        if sealed and declared is not None and declared != sealed.seal_id:
            raise replay_formats.ReplayError(
                f"sealId {declared} is not the seal of the corpus beside it ({sealed.seal_id})",
                field="sealId",
            )
        raw_results = doc.get("results")
        results: list[replay_formats.Result] = []
        if raw_results is not None:
            if not isinstance(raw_results, list):
                raise replay_formats.ReplayError("results must be a list", field="results")
            results = [
                replay_formats.read_result(r, f"results[{i}]") for i, r in enumerate(raw_results)
            ]
        if sealed is None:
            seal_id = declared or (results[0].seal_id if results else "")
            stored = ObsCorpus.objects.filter(seal_id=seal_id).first()
            if stored is None:
                raise replay_formats.ReplayError(
                    f"no stored corpus has seal {seal_id or '(none given)'}: upload the corpus "
                    "first, or in the same document",
                    field="sealId",
                )
            sealed = replay_formats.seal(stored.corpus)
        report = replay_formats.replay(sealed, results) if raw_results is not None else None
        supplied = _supplied_report(data)
        if report is not None and supplied is not None:
            replay_formats.check_report(report, supplied)
    except replay_formats.ReplayError as exc:
        raise _fail(name, exc) from None
    out: dict[str, Any] = {"file": name, "seal_id": sealed.seal_id}
    with transaction.atomic():
        corpus, created = _store_corpus(sealed, upload)
        out["corpus"] = corpus.pk
        out["corpus_created"] = created
        if report is not None:
            replay, fresh = _store_replay(corpus, report, results, name, upload)
            out.update(replay=replay.pk, replay_created=fresh, overall=report.overall)
    return out


def _supplied_report(data: bytes) -> bytes | None:
    """The supplied report's own bytes (under "want", or "report"), for a byte comparison."""
    for name in ("want", "report"):
        raw = gojson.member(data, name)
        if raw is not None and raw.strip() != b"null":
            return raw
    return None


def _store_corpus(sealed: replay_formats.Sealed, upload: Upload) -> tuple[ObsCorpus, bool]:
    existing = ObsCorpus.objects.filter(seal_id=sealed.seal_id).first()
    if existing:
        return existing, False
    try:
        with transaction.atomic():
            return ObsCorpus.objects.create(
                seal_id=sealed.seal_id,
                corpus=sealed.canonical(),
                subject_count=len(sealed.subjects),
                labelled_count=len(sealed.labels),
                evaluator_revision=sealed.evaluator_revision,
                upload=upload,
            ), True
    except IntegrityError:
        return ObsCorpus.objects.get(seal_id=sealed.seal_id), False


def _store_replay(
    corpus: ObsCorpus,
    report: replay_formats.Report,
    results: list[replay_formats.Result],
    name: str,
    upload: Upload,
) -> tuple[ObsReplay, bool]:
    per_subject = {}
    for r in results:
        outcome = replay_formats.bound_text(r.outcome, replay_formats._IDENTITY, "unbounded-text")
        per_subject[r.subject_id] = {
            # Only text that passed the screen is kept; anything else is shown by its reason.
            "outcome": outcome.value if outcome.status == replay_formats.OBSERVED else None,
            "outcome_reason": outcome.reason,
            "telemetry": r.telemetry.as_json() if r.telemetry else None,
        }
    encoded = report.encode()
    sha = hashlib.sha256(
        encoded + orjson.dumps(per_subject, option=orjson.OPT_SORT_KEYS)
    ).hexdigest()
    existing = ObsReplay.objects.filter(sha256=sha).first()
    if existing:
        return existing, False
    c = report.counts
    return ObsReplay.objects.create(
        corpus=corpus,
        upload=upload,
        name=name[:500],
        sha256=sha,
        overall=report.overall,
        passed=c[replay_formats.PASS],
        failed=c[replay_formats.FAIL],
        not_run=c[replay_formats.NOT_RUN],
        not_observed=c[replay_formats.NOT_OBSERVED],
        denominator=report.denominator,
        report=encoded.decode(),
        results=per_subject,
    ), True
