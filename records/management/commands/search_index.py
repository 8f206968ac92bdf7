from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from records.models import Run
from records.search.index import rebuild


class Command(BaseCommand):
    help = "Rebuild the search index of every stored run (or of the runs named)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="run_id of a run")

    def handle(self, *args: Any, run_ids: list[str], **options: Any) -> None:
        runs = Run.objects.all()
        if run_ids:
            runs = runs.filter(run_id__in=run_ids)
            missing = sorted(set(run_ids) - set(runs.values_list("run_id", flat=True)))
            if missing:
                raise CommandError(f"no stored run has run_id {', '.join(missing)}")
        count = rebuild(runs)
        self.stdout.write(f"indexed {count} run{'s' if count != 1 else ''} for search")
