from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from records.conformance.formats import ConformanceError
from records.conformance.store import RunMeta, store_run
from records.models import Upload


class Command(BaseCommand):
    help = "Store one `taisce conformance` run: its stdout, exit status and who/what was tested."

    def add_arguments(self, parser) -> None:
        parser.add_argument("output", help="the run's stdout (JSON Lines); '-' reads stdin")
        parser.add_argument("--adapter", required=True, help="e.g. python/langgraph")
        parser.add_argument("--exit-status", required=True, help="the run's exit status")
        parser.add_argument("--adapter-version", default="")
        parser.add_argument(
            "--suite",
            default="",
            help="suite id, sha256 prefix or version (default: the newest stored suite)",
        )
        parser.add_argument("--commit", default="")
        parser.add_argument("--ran-at", default="", help="ISO 8601 (default: now)")
        parser.add_argument("--error", default="", help="the error text of an aborted run")
        parser.add_argument("--error-file", default="", help="read the error text from a file")

    def handle(self, *args, output: str, **o) -> None:
        data = sys.stdin.buffer.read() if output == "-" else Path(output).read_bytes()
        error = Path(o["error_file"]).read_text() if o["error_file"] else o["error"]
        values = {
            "adapter": o["adapter"],
            "exit_status": o["exit_status"],
            "adapter_version": o["adapter_version"],
            "suite": o["suite"],
            "commit": o["commit"],
            "ran_at": o["ran_at"],
            "error": error,
        }
        upload = Upload.objects.create(source=Upload.Source.CLI)
        try:
            out = store_run(data, output, RunMeta.from_strings(output, values), upload)
        except ConformanceError as exc:
            upload.summary = {"refused": [exc.as_dict()]}
            upload.save(update_fields=["summary"])
            raise CommandError(str(exc)) from None
        upload.summary = {"conformance_runs": [out]}
        upload.save(update_fields=["summary"])
        state = (
            "aborted"
            if out.get("aborted")
            else f"{out.get('cases', 0)} cases, {out.get('failed', 0)} failed"
        )
        self.stdout.write(
            f"conformance run {out['run']} ({state})"
            + ("" if out["created"] else ", already stored")
        )
