from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from records.bulk.sqlite import checkpoints
from records.queries.gate import GateError, gate, resolve


class Command(BaseCommand):
    help = "Exit 1 when a run regressed with evidence against its baseline in one column."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", help="the run id (as the shard's run line writes it)")
        parser.add_argument("--baseline", default="previous", help='a run id, or "previous"')
        parser.add_argument("--column", default="Clean", help="a column title (default: Clean)")
        parser.add_argument(
            "--require-baseline",
            action="store_true",
            help="fail when there is no earlier comparable run (default: pass, saying so)",
        )
        parser.add_argument(
            "--base-url",
            default=settings.EVALDASH_PUBLIC_URL,
            help="the dashboard's public address for the links (default: EVALDASH_PUBLIC_URL)",
        )

    def handle(
        self,
        *args,
        run_id: str,
        baseline: str,
        column: str,
        require_baseline: bool,
        base_url: str,
        **options,
    ) -> None:
        try:
            result = gate(
                *resolve(run_id, baseline),
                column,
                require_baseline=require_baseline,
                base_url=base_url,
            )
        except GateError as exc:
            raise CommandError(str(exc)) from None
        finally:
            checkpoints.finish()  # of a run the gate scored
        self.stdout.write(result.markdown())
        if not result.passed:
            raise SystemExit(1)
