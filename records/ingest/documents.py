"""A .json document: a corpus key, a sealed corpus and its replays, or a conformance suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import orjson
import re2
from django.db import transaction

from records.conformance.formats import ConformanceError
from records.conformance.store import looks_like_suite, store_suite
from records.formats.corpus_key import CorpusKeyError
from records.formats.model_results import is_record
from records.formats.text import NUL_ESCAPE, NUL_MESSAGE, invalid_utf8, nul_field
from records.ingest.inputs import (
    IngestReport,
    Input,
)
from records.models import (
    CorpusKey,
    Upload,
)
from records.replays.store import ingest_document, looks_like_replay
from records.scoring.publish import store_record
from records.scoring.run import rescore_for_key, store_key


def _latin1() -> re2.Options:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    return options


MAX_KEY_BYTES = 64 * 1024 * 1024
# The objects and lists a document may hold, counted in its bytes before anything is built: 22
# million `{}` fit the size and would take gigabytes once read (an object costs about a hundred
# bytes of memory for its two). A corpus key of thousands of cases holds a few hundred thousand.
MAX_DOCUMENT_CONTAINERS = 500_000
# A JSON string, escapes and all (RE2: linear in the document whatever it holds).
_STRING = re2.compile(rb'"(?:[^"\\]|\\.)*"', _latin1())

# How the runs a newly stored key applies to are re-scored: here, in the ingest, unless the
# caller (a task worker's ingest of an upload) names a function that queues them instead and
# returns the run ids it queued. The function runs in the key's transaction.
_queue_rescoring: ContextVar[Callable[[CorpusKey], list[int]] | None] = ContextVar(
    "queue_rescoring", default=None
)


@contextmanager
def rescoring_queued_by(queue: Callable[[CorpusKey], list[int]]) -> Iterator[None]:
    """Within this block, a new key's runs are queued by `queue` rather than scored inline."""
    token = _queue_rescoring.set(queue)
    try:
        yield
    finally:
        _queue_rescoring.reset(token)


def containers(data: bytes) -> int:
    """How many objects and lists the JSON text `data` opens (brackets inside its strings aside,
    which are only looked at when the plain count passes the bound)."""
    rough = data.count(b"{") + data.count(b"[")
    if rough <= MAX_DOCUMENT_CONTAINERS:
        return rough
    bare = _STRING.sub(b"", data)
    return bare.count(b"{") + bare.count(b"[")


# What a document is refused with (each names its file, line and field in `as_dict()`).
DOCUMENT_ERRORS = (CorpusKeyError, ConformanceError)


def ingest_key(item: Input, upload: Upload, report: IngestReport, allow_mismatch: bool) -> None:
    """A .json document: a corpus key, or a sealed corpus and/or its replay results."""

    with item.open() as fh:
        data = fh.read(MAX_KEY_BYTES + 1)
    if len(data) > MAX_KEY_BYTES:
        raise CorpusKeyError(item.name, f"the document is larger than {MAX_KEY_BYTES:,} bytes")
    if (held := containers(data)) > MAX_DOCUMENT_CONTAINERS:
        raise CorpusKeyError(
            item.name,
            f"holds {held:,} objects and lists; a document holds at most "
            f"{MAX_DOCUMENT_CONTAINERS:,} (it was refused unread)",
        )
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
    queue = _queue_rescoring.get()
    rescored: list[int] = []
    queued: list[int] = []
    if queue is None:
        key, created = store_key(data, item.name, upload, allow_digest_mismatch=allow_mismatch)
        rescored = [s.run_id for s in rescore_for_key(key)] if created else []
    else:
        with transaction.atomic():  # the key and its runs' tasks, together or neither
            key, created = store_key(data, item.name, upload, allow_digest_mismatch=allow_mismatch)
            queued = queue(key) if created else []
    report.keys.append(
        {
            "file": item.name,
            "digest": key.digest,
            "key": key.pk,
            "cases": key.case_count,
            "verified": key.verified,
            "created": created,
            "rescored_runs": rescored,
            "queued_runs": queued,
        }
    )
