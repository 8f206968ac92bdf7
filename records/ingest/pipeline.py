"""The one ingest entry point that the upload page, the API, the commands, the demo and the
benchmark call: each input expanded, each shard or document stored or refused in its turn."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from records.bulk import processes
from records.bulk.readahead import Parsers
from records.bulk.sqlite import checkpoints
from records.formats.shard import ShardError, is_shard_name
from records.ingest.archives import expand_archive
from records.ingest.documents import DOCUMENT_ERRORS, ingest_key
from records.ingest.inputs import (
    IngestReport,
    Input,
    Progress,
    archive_kind,
    disk_full,
)
from records.ingest.shards import (
    Scorings,
    ShardCandidate,
    Units,
    ingest_shard,
    stream_size,
)
from records.models import (
    Upload,
)
from records.parser import PLAIN, parse_worker
from records.search.index import inline_indexing

log = logging.getLogger(__name__)

# Parser processes may start from a forkserver a scoring started first.
processes.preload(parse_worker)


def ingest(
    inputs: Iterable[Input | ShardError],
    upload: Upload,
    progress: Progress | None = None,
    *,
    allow_digest_mismatch: bool = False,
) -> IngestReport:
    """The one entry point: expand each input, store each shard or key, record what happened.

    `allow_digest_mismatch` is the operator's explicit override for corpus keys whose declared
    digest differs from the recomputed one (the key is then marked "digest not verified").
    """
    report = IngestReport()
    parser = Parsers(
        parse_worker,
        "the shard parser",
        PLAIN,
        count=settings.EVALDASH_INGEST_PROCESSES,
        spool_dir=settings.FILE_UPLOAD_TEMP_DIR,
    )
    units = Units(_units(inputs, report), parser)

    def scoring_failed(name: str, exc: BaseException) -> None:
        """A shard's scoring that raised, once waited for: as `_each` tells an input's fault."""
        if disk_full(exc):
            raise exc
        report.refused.append(unexpected(name, exc).as_dict())

    # A run scored beside the next shard's store, where the ingest has the cores for it.
    follows = units.shard_follows if len(parser.parsers) > 1 else lambda: False
    scorings = Scorings(report, scoring_failed, follows)
    try:
        with inline_indexing():
            try:
                _each(units, upload, report, progress, parser, scorings, allow_digest_mismatch)
            finally:
                scorings.wait()  # the last shard's scoring, before its index
    finally:
        parser.close()
        checkpoints.finish()
        # Also when something escaped (the server is going down): the upload says what it got,
        # unless a newer try of a queued upload has claimed it since (its status and tries).
        upload.summary = report.as_dict()
        try:
            Upload.objects.filter(pk=upload.pk, status=upload.status, tries=upload.tries).update(
                summary=upload.summary
            )
        except DatabaseError:
            # A full database takes no summary either; what escaped says why.
            log.warning("upload %s: its summary was not written", upload.pk, exc_info=True)
    return report


def _each(
    units: Units,
    upload: Upload,
    report: IngestReport,
    progress: Progress | None,
    parser: Parsers,
    scorings: Scorings,
    allow_digest_mismatch: bool,
) -> None:
    """Store or refuse each unit in its turn; a stored shard is scored by `scorings`, its
    index queued, or written when all are done (`records.search.index.inline_indexing`)."""
    for unit in units:
        try:
            if isinstance(unit, ShardCandidate):
                with unit.stream:
                    ingest_shard(unit, upload, report, progress, parser, units, scorings)
            elif isinstance(unit, Input):
                scorings.wait()  # a key may score the runs it names: not beside one's scoring
                ingest_key(unit, upload, report, allow_digest_mismatch)
            else:
                report.refused.append(unit.as_dict())
        except (ShardError, *DOCUMENT_ERRORS) as exc:
            report.refused.append(exc.as_dict())
        except Exception as exc:  # noqa: BLE001 (one input's fault never ends the others)
            if disk_full(exc):
                raise  # no fault of the input: the caller tries again later
            report.refused.append(unexpected(_unit_name(unit), exc).as_dict())


def _unit_name(unit: Any) -> str:
    return getattr(unit, "name", None) or getattr(unit, "file", "?")


def _units(inputs: Iterable[Input | ShardError], report: IngestReport) -> Iterator[Any]:
    """What the inputs hold, in order: each shard (`ShardCandidate`; archives expanded, each
    entry copied out within the bounds), each .json document (`Input`) and each error
    (`ShardError`)."""
    for item in inputs:
        if isinstance(item, ShardError) or item.name.lower().endswith(".json"):
            yield item
            continue
        base = item.name.replace("\\", "/").rsplit("/", 1)[-1]
        kind = archive_kind(base)
        try:
            if kind:
                for member, data in expand_archive(item, kind, report):
                    yield ShardCandidate(member, data, stream_size(data))
            elif is_shard_name(base):
                fh = item.open()
                try:
                    size = stream_size(fh)
                except BaseException:
                    fh.close()
                    raise
                yield ShardCandidate(item.name, fh, size)  # closed once stored
            else:
                raise ShardError(
                    item.name,
                    "is neither a shard (modeleval-*.jsonl), a corpus key or replay document "
                    "(.json) nor a .zip or .tar.gz artifact",
                )
        except ShardError as exc:
            yield exc
        except Exception as exc:  # noqa: BLE001 (one input's fault never ends the others)
            if disk_full(exc):
                raise
            yield unexpected(item.name, exc)


def unexpected(name: str, exc: BaseException) -> ShardError:
    """A fault nobody foresaw while reading or storing one input: logged with its traceback,
    and reported as that input's refusal, so the inputs after it are handled as usual."""
    log.error("ingest: unexpected error on %s", name, exc_info=exc)
    return ShardError.unexpected(name, exc)
