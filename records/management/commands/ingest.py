from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from records.ingest import ingest, inputs_from_paths
from records.models import Upload


class Command(BaseCommand):
    help = "Store model-evaluation shards from files, directories, .zip or .tar.gz artifacts."

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", help="shard files, directories or archives")
        parser.add_argument("--quiet", action="store_true", help="no progress lines")
        parser.add_argument(
            "--allow-digest-mismatch",
            action="store_true",
            help="store a corpus key whose declared digest differs (marked 'digest not verified')",
        )

    def handle(
        self,
        *args: str,
        paths: list[str],
        quiet: bool = False,
        allow_digest_mismatch: bool = False,
        **options,
    ) -> None:
        def progress(name: str, done: int, total: int) -> None:
            if not quiet:
                pct = 100 * done // total if total else 100
                self.stderr.write(f"  {name}: {done / 1e6:.1f} / {total / 1e6:.1f} MB ({pct}%)")

        upload = Upload.objects.create(source=Upload.Source.CLI)
        report = ingest(
            inputs_from_paths(paths), upload, progress, allow_digest_mismatch=allow_digest_mismatch
        )
        for item in report.refused:
            self.stderr.write(f"refused: {_where(item)}: {item['message']}")
        for item in report.stored:
            if item["warnings"]:
                self.stderr.write(
                    f"warning: {item['file']}: {item['warnings']} warning(s), see its run page"
                )
        for key in report.keys:
            note = "" if key["verified"] else " (digest not verified)"
            runs = len(key["rescored_runs"])
            self.stderr.write(
                f"corpus key {key['digest']}{note}: {key['cases']} cases, {runs} run(s) scored"
            )
        self.stdout.write(report.summary_line())
        if not report.ok:
            raise CommandError(
                f"{len(report.refused)} input(s) refused; nothing of them was stored"
            )


def _where(item: dict) -> str:
    where = item["file"]
    if item.get("line"):
        where += f" line {item['line']}"
    if item.get("field"):
        where += f" ({item['field']})"
    return where
