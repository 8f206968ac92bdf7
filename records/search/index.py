"""Keeping the index with the runs: written when a shard is stored, removed with its run,
rebuilt for runs stored before it existed."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from records.bulk.tables import analyze_if_large
from records.models import Run
from records.search import engine
from records.search.models import SearchCall


def index_run(
    run: Run | int, calls_left: list[int] | None = None, attempts_left: list[int] | None = None
) -> None:
    """Index a run just stored, in the caller's transaction (the shard's); `calls_left` and
    `attempts_left` as `engine.index_run` takes them."""
    engine.index_run(run if isinstance(run, int) else run.pk, calls_left, attempts_left)


def index_calls(call_ids: list[int], *, run: int, documents: bool) -> None:
    """Index calls of the run `run` (its pk) just written, in the caller's transaction, as
    `engine.index_calls` does."""
    engine.index_calls(call_ids, run=run, documents=documents)


@receiver(pre_delete, sender=Run, dispatch_uid="records.search.forget_run")
def forget_run(sender: Any, instance: Run, **kwargs: Any) -> None:
    """A run's documents go with it, however it is deleted: its rows still exist here."""
    engine.forget_run(instance.pk)


def rebuild(runs: Any = None) -> int:
    """Index again every run (or those of `runs`), one transaction each; how many. After a
    large rebuild the calls' statistics are refreshed, as after a large ingest, so the search's
    plans fit what is now indexed rather than wait for autovacuum (or go without, where none
    runs)."""
    queryset = Run.objects.all() if runs is None else runs
    count = calls = 0
    for pk in queryset.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            engine.forget_run(pk)
            calls += engine.index_run(pk)
        count += 1
    analyze_if_large(calls, (SearchCall,))
    return count
