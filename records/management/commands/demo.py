from __future__ import annotations

import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand

from records.conformance.store import RunMeta, store_run
from records.devtools.synth import DEMO_KEY, demo_files
from records.ingest import ingest, inputs_from_paths
from records.models import Run, Upload

DEMO_DATA = DEMO_KEY.parent
# Every family on the first visit: a sealed corpus replay and its corpus, a conformance suite
# and a run of two adapters against it, one passing every case and one failing two.
DEMO_DOCUMENTS = [DEMO_DATA / "obscorpus-replay.json", DEMO_DATA / "conformance-suite.json"]
DEMO_CONFORMANCE = [
    ("conformance-langgraph.jsonl", RunMeta(adapter="python/langgraph", exit_status=0)),
    ("conformance-openai-agents.jsonl", RunMeta(adapter="python/openai-agents", exit_status=1)),
]


class Command(BaseCommand):
    help = (
        "Load three realistic demo runs (generated, deterministic), a sealed replay and two "
        "conformance runs, so a newcomer sees every family."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="only when no run is stored")

    def handle(self, *args, if_empty: bool = False, **options) -> None:

        if if_empty and Run.objects.exists():
            self.stdout.write("demo: runs already stored, nothing loaded")
            return
        with tempfile.TemporaryDirectory() as tmp:
            paths = [*demo_files(Path(tmp)), *DEMO_DOCUMENTS]
            upload = Upload.objects.create(source=Upload.Source.DEMO)
            report = ingest(inputs_from_paths(paths), upload)
        conformance = [
            store_run((DEMO_DATA / name).read_bytes(), name, meta, upload)
            for name, meta in DEMO_CONFORMANCE
        ]
        upload.summary = {**upload.summary, "conformance_runs": conformance}
        upload.save(update_fields=["summary"])
        self.stdout.write(
            f"demo: {report.summary_line()}; {len(DEMO_CONFORMANCE)} conformance run(s)"
        )
