"""Models that mirror the shard record types, plus the bookkeeping ingestion needs.

A shard is stored whole or not at all (see `records.ingest`). Raw JSON fields (arguments, results,
facts, options) are stored as JSON, not re-modelled. Per-attempt and per model-and-surface totals
are computed once at ingest, in the database, so that pages never add up a whole run in Python.
"""

from __future__ import annotations

from records.formats.shard import ENDINGS
from records.models.annotations import Annotation, AnnotationChange, Label
from records.models.conformance import ConformanceResult, ConformanceRun, ConformanceSuite
from records.models.fields import WholeJSONField
from records.models.intake import ApiToken, AuditEvent, ShardFile, Upload
from records.models.published import PublishedRecord, PublishedRow
from records.models.replays import ObsCorpus, ObsReplay
from records.models.runs import Attempt, Call, Provider, Run, Session, SurfaceSummary, Turn, Verify
from records.models.scoring import (
    CaseFigure,
    CorpusKey,
    FailureCount,
    FailureMode,
    KeyCase,
    ScoreCase,
    ScoreRow,
    Scoring,
    Verdict,
)
from records.search.models import PendingIndex, SearchEntry

__all__ = [
    "Annotation",
    "AnnotationChange",
    "ApiToken",
    "Attempt",
    "AuditEvent",
    "Call",
    "CaseFigure",
    "ConformanceResult",
    "ConformanceRun",
    "ConformanceSuite",
    "CorpusKey",
    "ENDINGS",
    "FailureCount",
    "FailureMode",
    "KeyCase",
    "Label",
    "ObsCorpus",
    "ObsReplay",
    "Provider",
    "PublishedRecord",
    "PublishedRow",
    "Run",
    "ScoreCase",
    "ScoreRow",
    "PendingIndex",
    "SearchEntry",
    "Scoring",
    "Session",
    "ShardFile",
    "SurfaceSummary",
    "Turn",
    "Upload",
    "Verdict",
    "Verify",
    "WholeJSONField",
]
