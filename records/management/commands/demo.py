from __future__ import annotations

import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand

from records.devtools.synth import DEMO_KEY, demo_runs
from records.ingest import ingest, inputs_from_paths
from records.models import Run, Upload


class Command(BaseCommand):
    help = "Load three realistic demo runs (generated, deterministic) so a newcomer sees data."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="only when no run is stored")

    def handle(self, *args, if_empty: bool = False, **options) -> None:

        if if_empty and Run.objects.exists():
            self.stdout.write("demo: runs already stored, nothing loaded")
            return
        with tempfile.TemporaryDirectory() as tmp:
            paths = [DEMO_KEY, *demo_runs(Path(tmp))]
            upload = Upload.objects.create(source=Upload.Source.DEMO)
            report = ingest(inputs_from_paths(paths), upload)
        self.stdout.write(f"demo: {report.summary_line()}")
