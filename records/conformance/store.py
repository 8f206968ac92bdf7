"""Storing conformance suites and runs (conformance.md section 8). Nothing partial is stored."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import IntegrityError, transaction
from django.utils import timezone

from records.conformance.formats import (
    ConformanceError,
    Suite,
    is_suite,
    read_output,
    read_suite,
    starts_with_a_suite,
)
from records.formats.numbers import NotWhole, parse_whole
from records.formats.text import NUL_MESSAGE
from records.models import ConformanceResult, ConformanceRun, ConformanceSuite, Upload

MAX_OUTPUT_BYTES = 64 * 1024 * 1024


def looks_like_suite(doc: Any, data: bytes | None = None) -> bool:
    """Whether a .json document is a suite: its decoded `doc`, or, when a whole-document reader
    refused `data` (doc None), the first JSON value in it, which is all upstream's Load reads."""
    return is_suite(doc) if doc is not None else data is not None and starts_with_a_suite(data)


def store_suite(data: bytes, name: str, upload: Upload) -> dict[str, Any]:
    suite = read_suite(data, name)
    sha = hashlib.sha256(data).hexdigest()
    existing = ConformanceSuite.objects.filter(sha256=sha).first()
    if existing:
        return {"file": name, "suite": existing.pk, "created": False}
    try:
        with transaction.atomic():
            stored = ConformanceSuite.objects.create(
                sha256=sha,
                suite=suite.suite,
                document=suite.document,  # as the loader read it: names spelled once
                case_count=len(suite.cases),
                name=name[:500],
                upload=upload,
            )
    except IntegrityError:
        stored = ConformanceSuite.objects.get(sha256=sha)
    return {"file": name, "suite": stored.pk, "created": True, "version": stored.suite}


@dataclass
class RunMeta:
    adapter: str
    exit_status: int
    adapter_version: str = ""
    suite: str = ""  # a stored suite's id, its sha256 (or a prefix), or its suite version
    commit: str = ""
    ran_at: datetime | None = None
    error: str = ""

    @classmethod
    def from_strings(cls, file: str, values: dict[str, str]) -> RunMeta:
        for key, value in values.items():
            if "\x00" in value:
                raise ConformanceError(file, NUL_MESSAGE, field=key)
        adapter = (values.get("adapter") or "").strip()
        if not adapter:
            raise ConformanceError(
                file, "say which adapter ran (e.g. python/langgraph)", field="adapter"
            )
        raw_exit = (values.get("exit_status") or "").strip()
        try:
            exit_status = parse_whole(raw_exit, minimum=-(2**31), maximum=2**31 - 1)
        except NotWhole:
            raise ConformanceError(
                file,
                f"the exit status must be a whole number, not {raw_exit!r}",
                field="exit_status",
            ) from None
        ran_at = None
        if (values.get("ran_at") or "").strip():
            try:
                ran_at = datetime.fromisoformat(values["ran_at"].strip().replace("Z", "+00:00"))
            except ValueError:
                raise ConformanceError(
                    file, "ran_at must be an ISO 8601 date and time", field="ran_at"
                ) from None
            if timezone.is_naive(ran_at):
                ran_at = timezone.make_aware(ran_at, timezone.UTC)
        return cls(
            adapter[:200],
            exit_status,
            (values.get("adapter_version") or "").strip(),
            (values.get("suite") or "").strip(),
            (values.get("commit") or "").strip(),
            ran_at,
            (values.get("error") or "").strip(),
        )


def _find_suite(meta: RunMeta, file: str) -> ConformanceSuite | None:
    if not meta.suite:
        return ConformanceSuite.objects.order_by("-created_at", "-id").first()
    qs = ConformanceSuite.objects.order_by("-created_at", "-id")
    try:
        by_pk = qs.filter(pk=parse_whole(meta.suite)).first()
    except NotWhole:
        by_pk = None
    found = (
        by_pk
        or qs.filter(sha256__startswith=meta.suite.lower()).first()
        or qs.filter(suite=meta.suite).first()
    )
    if found is None:
        raise ConformanceError(
            file,
            f"no stored suite matches {meta.suite!r}: upload the suite file (cases.json) first",
            field="suite",
        )
    return found


def store_run(data: bytes, name: str, meta: RunMeta, upload: Upload) -> dict[str, Any]:
    if len(data) > MAX_OUTPUT_BYTES:
        raise ConformanceError(name, f"the output is larger than {MAX_OUTPUT_BYTES:,} bytes")
    suite_row = _find_suite(meta, name)
    suite = Suite(suite_row.suite, suite_row.cases, suite_row.document) if suite_row else None
    output = read_output(data, name, exit_status=meta.exit_status, suite=suite)
    ran_at = meta.ran_at or timezone.now()
    identity = orjson.dumps(
        [
            meta.adapter,
            meta.adapter_version,
            meta.commit,
            ran_at.isoformat(),
            meta.exit_status,
            meta.error,
            suite_row.pk if suite_row else None,
        ]
    )
    sha = hashlib.sha256(identity + b"\n" + data).hexdigest()
    existing = ConformanceRun.objects.filter(sha256=sha).first()
    if existing:
        return {"file": name, "run": existing.pk, "created": False}
    with transaction.atomic():
        run = ConformanceRun.objects.create(
            suite=suite_row,
            adapter=meta.adapter,
            adapter_version=meta.adapter_version,
            commit=meta.commit,
            ran_at=ran_at,
            exit_status=meta.exit_status,
            aborted=output.aborted,
            error=meta.error,
            case_count=len(output.results),
            failed_count=sum(1 for r in output.results if not r.passed),
            sha256=sha,
            name=name[:500],
            upload=upload,
        )
        ConformanceResult.objects.bulk_create(
            ConformanceResult(run=run, position=i, **asdict(r))
            for i, r in enumerate(output.results)
        )
    return {
        "file": name,
        "run": run.pk,
        "created": True,
        "aborted": output.aborted,
        "killed": output.killed,
        "cases": run.case_count,
        "failed": run.failed_count,
    }
