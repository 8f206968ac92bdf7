from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from records.queries.gate import GateError, gate, resolve


class Command(BaseCommand):
    help = "Exit 1 when a run regressed with evidence against its baseline in one column."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", help="the run id (as the shard's run line writes it)")
        parser.add_argument("--baseline", default="previous", help='a run id, or "previous"')
        parser.add_argument("--column", default="Clean", help="a column title (default: Clean)")

    def handle(self, *args, run_id: str, baseline: str, column: str, **options) -> None:
        try:
            result = gate(*resolve(run_id, baseline), column)
        except GateError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(result.markdown())
        if not result.passed:
            raise SystemExit(1)
