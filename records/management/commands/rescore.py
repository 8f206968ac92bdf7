from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from records.bulk.sqlite import checkpoints
from records.ingest.inputs import counted
from records.models import CorpusKey, Run
from records.scoring.run import score_pending_runs, score_run


class Command(BaseCommand):
    help = "Score stored runs again against the key with their corpus digest (or a chosen key)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--run", type=int, action="append", help="run id (default: all)")
        parser.add_argument(
            "--key",
            type=int,
            help="score against this key id (stale if its digest is not the run's)",
        )
        parser.add_argument(
            "--enqueue",
            action="store_true",
            help="queue one task per run for a worker (verdicts, score rows and statistics made again)",
        )
        parser.add_argument(
            "--pending",
            action="store_true",
            help="score only the runs whose key is stored but that have no scoring",
        )

    def handle(
        self,
        *args,
        run: list[int] | None = None,
        key: int | None = None,
        pending: bool = False,
        enqueue: bool = False,
        **opts,
    ) -> None:
        try:
            self._score(run, key, pending, enqueue)
        finally:
            checkpoints.finish()  # the last scoring's, so the command leaves the log checkpointed

    def _score(self, run: list[int] | None, key: int | None, pending: bool, enqueue: bool) -> None:
        if enqueue:
            if key or pending:
                raise CommandError(
                    "--enqueue scores each run against the newest key of its digest: drop --key/--pending"
                )
            self._enqueue(run)
            return
        if pending:
            if run or key:
                raise CommandError(
                    "--pending scores each run against its own key: drop --run/--key"
                )
            self._pending()
            return
        runs = Run.objects.filter(pk__in=run) if run else Run.objects.all()
        chosen = CorpusKey.objects.filter(pk=key).first() if key else None
        if key and chosen is None:
            raise CommandError(f"no corpus key with id {key}")
        done = skipped = failed = 0
        for r in runs.order_by("pk"):
            k = chosen or r.key()
            if k is None:
                skipped += 1
                continue
            scoring = score_run(r, k)
            if scoring.verdict_count == 0 and scoring.error:
                failed += 1
                self.stderr.write(f"run {r.pk} ({r.run_id}): {scoring.error}")
            else:
                done += 1
        self.stdout.write(
            f"{counted(done, 'run')} scored, {skipped} without a matching key, {failed} failed"
        )

    def _enqueue(self, run: list[int] | None) -> None:
        from records.tasks.scoring import score_run_task

        runs = Run.objects.filter(pk__in=run) if run else Run.objects.all()
        ids = list(runs.exclude(corpus_digest="").order_by("pk").values_list("pk", flat=True))
        for pk in ids:
            score_run_task.enqueue(pk, rebuild=True)
        self.stdout.write(f"{counted(len(ids), 'run')} queued to be scored again by a worker")

    def _pending(self) -> None:
        failed = 0
        scorings = score_pending_runs()
        for scoring in scorings:
            if scoring.verdict_count == 0 and scoring.error:
                failed += 1
                self.stderr.write(f"run {scoring.run_id}: {scoring.error}")
        self.stdout.write(
            f"{counted(len(scorings) - failed, 'pending run')} scored, {failed} failed"
        )
