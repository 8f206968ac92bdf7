from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from records.ingest import Input, ingest, inputs_from_paths
from records.ingest.inputs import counted
from records.models import Upload

SWITCHES = {
    "--quiet": "no progress lines",
    "--allow-digest-mismatch": (
        "store a corpus key whose declared digest differs (marked 'digest not verified')"
    ),
    "--enqueue": "keep the files in the database and queue their ingest for a worker",
}


class Command(BaseCommand):
    help = "Store model-evaluation shards from files, directories, .zip or .tar.gz artifacts."

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", help="shard files, directories or archives")
        for switch, meaning in SWITCHES.items():
            parser.add_argument(switch, action="store_true", help=meaning)

    def handle(
        self,
        *args: str,
        paths: list[str],
        quiet: bool = False,
        allow_digest_mismatch: bool = False,
        enqueue: bool = False,
        **options,
    ) -> None:
        if enqueue:
            self._enqueue(paths, allow_digest_mismatch)
            return

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
                    f"warning: {item['file']}: {counted(item['warnings'], 'warning')}, see its run page"
                )
        for key in report.keys:
            note = "" if key["verified"] else " (digest not verified)"
            runs = len(key["rescored_runs"])
            self.stderr.write(
                f"corpus key {key['digest']}{note}: {counted(key['cases'], 'case')}, "
                f"{counted(runs, 'run')} scored"
            )
        self.stdout.write(report.summary_line())
        if not report.ok:
            raise CommandError(
                f"{counted(len(report.refused), 'input')} refused; nothing of them was stored"
            )

    def _enqueue(self, paths: list[str], allow_digest_mismatch: bool) -> None:
        """Keep the files as an upload would and queue it: a worker anywhere can then ingest
        them knowing only the database. The queue's own `ingest_upload` task does the work."""
        from contextlib import ExitStack

        from records.tasks import queue_upload

        inputs = list(inputs_from_paths(paths))
        missing = [i for i in inputs if not isinstance(i, Input)]
        if missing:
            raise CommandError("; ".join(f"{e.file}: {e.message}" for e in missing))
        with ExitStack() as stack:
            files = [(i.name, stack.enter_context(i.open())) for i in inputs]
            upload = queue_upload(
                Upload(source=Upload.Source.CLI),
                files,
                allow_digest_mismatch=allow_digest_mismatch,
            )
        self.stdout.write(
            f"upload {upload.pk} {upload.status}: {counted(len(files), 'file')}, "
            f"{upload.progress.get('bytes_total', 0)} bytes kept"
        )


def _where(item: dict) -> str:
    where = item["file"]
    if item.get("line"):
        where += f" line {item['line']}"
    if item.get("field"):
        where += f" ({item['field']})"
    return where
