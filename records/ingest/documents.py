"""A .json document: a corpus key, a sealed corpus and its replays, or a conformance suite."""

from __future__ import annotations

import orjson

from records.conformance.store import looks_like_suite, store_suite
from records.formats.corpus_key import CorpusKeyError
from records.formats.model_results import is_record
from records.formats.text import NUL_ESCAPE, NUL_MESSAGE, invalid_utf8, nul_field
from records.ingest.inputs import (
    IngestReport,
    Input,
)
from records.models import (
    Upload,
)
from records.replays.store import ingest_document, looks_like_replay
from records.scores.publish import store_record
from records.scores.run import rescore_for_key, store_key

MAX_KEY_BYTES = 64 * 1024 * 1024


def _ingest_key(item: Input, upload: Upload, report: IngestReport, allow_mismatch: bool) -> None:
    """A .json document: a corpus key, or a sealed corpus and/or its replay results."""

    with item.open() as fh:
        data = fh.read(MAX_KEY_BYTES + 1)
    if len(data) > MAX_KEY_BYTES:
        raise CorpusKeyError(item.name, f"the document is larger than {MAX_KEY_BYTES:,} bytes")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if looks_like_suite(None, data):  # a suite is its first JSON value, as Load reads it
            report.suites.append(store_suite(data, item.name, upload))
            return
        raise CorpusKeyError(item.name, f"is not valid JSON: {invalid_utf8(data) or exc}") from None
    if NUL_ESCAPE in data and (where := nul_field(doc)):
        raise CorpusKeyError(item.name, NUL_MESSAGE, field=where)

    if looks_like_suite(doc):
        report.suites.append(store_suite(data, item.name, upload))
        return
    if is_record(doc):
        report.records.append(store_record(data, doc, item.name, upload))
        return
    if not (isinstance(doc, dict) and "format" in doc) and looks_like_replay(doc):
        report.replays.append(ingest_document(doc, item.name, upload, data))
        return
    key, created = store_key(data, item.name, upload, allow_digest_mismatch=allow_mismatch)
    rescored = [s.run_id for s in rescore_for_key(key)] if created else []
    report.keys.append(
        {
            "file": item.name,
            "digest": key.digest,
            "key": key.pk,
            "cases": key.case_count,
            "verified": key.verified,
            "created": created,
            "rescored_runs": rescored,
        }
    )
