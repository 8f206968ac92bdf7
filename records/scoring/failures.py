"""What a scoring keeps of its failures: each failure mode it met (its signature, stored once
under its id) and how many attempts failed in each, per model, surface and case (the failures
list reads these, never a verdict). Summed from the verdict rows as they are written
(`records.scoring.sums.ScoringSums`)."""

from __future__ import annotations

from django.db import connection

from records.bulk.tables import Table
from records.formats.rows import FAILURE_PARTS
from records.models import FailureCount, FailureMode, Scoring
from records.models.scoring import MODE_FIELD
from records.scoring.sums import ScoringSums

_COUNT_COLUMNS = ["scoring", "mode", "model", "surface", "case", "attempts"]


def store_failures(scoring: Scoring, sums: ScoringSums) -> int:
    """Store the failure modes `sums` met that are not yet stored, and the scoring's failure
    counts; returns how many counts were stored."""
    signatures = sums.signatures()
    if signatures:
        known = set(
            FailureMode.objects.filter(pk__in=list(signatures)).values_list("pk", flat=True)
        )
        # Two scorings stored at once may both meet a new mode: the second's insert is ignored.
        FailureMode.objects.bulk_create(
            [
                FailureMode(
                    id=mode,
                    outcome=parts[0],
                    **{
                        MODE_FIELD.get(part, part): value
                        for part, value in zip(FAILURE_PARTS, parts[1:], strict=True)
                    },
                )
                for mode, parts in signatures.items()
                if mode not in known
            ],
            ignore_conflicts=True,
            batch_size=500,
        )
    table = Table(FailureCount, _COUNT_COLUMNS)
    table.rows = [(scoring.pk, *row) for row in sums.failures()]
    with connection.cursor() as cursor:
        table.flush(cursor)
    return len(table.rows)
