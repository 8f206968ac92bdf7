from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from records.bulk.sqlite import checkpoints
from records.queries.gate import GateError, gate, resolve


class Command(BaseCommand):
    help = "Exit 1 when a run regressed against its baseline, or when nothing could be compared."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", help="the run id (as the shard's run line writes it)")
        parser.add_argument("--baseline", default="previous", help='a run id, or "previous"')
        parser.add_argument(
            "--column",
            action="append",
            help="a column title, repeatable: the decision covers every one (default: Clean)",
        )
        parser.add_argument(
            "--require-baseline",
            action="store_true",
            help="fail when there is no earlier comparable run (default: pass, saying so)",
        )
        parser.add_argument(
            "--ignore-labels",
            action="store_true",
            help="answer as if no case were labelled known-flaky (default: labels excuse rows)",
        )
        parser.add_argument(
            "--allow-empty",
            action="store_true",
            help="pass when no row of the two runs could be compared (default: fail, saying why)",
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
        column: list[str] | None,
        require_baseline: bool,
        allow_empty: bool,
        ignore_labels: bool,
        base_url: str,
        **options,
    ) -> None:
        try:
            result = gate(
                *resolve(run_id, baseline),
                column or ["Clean"],
                require_baseline=require_baseline,
                allow_empty=allow_empty,
                ignore_labels=ignore_labels,
                base_url=base_url,
            )
        except GateError as exc:
            raise CommandError(str(exc)) from None
        finally:
            checkpoints.finish()  # of a run the gate scored
        self.stdout.write(result.markdown())
        if not result.passed:
            raise SystemExit(1)
