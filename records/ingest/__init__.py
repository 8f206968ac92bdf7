"""One ingest entry point for every way results arrive (the upload page, the API, the commands,
the demo, the benchmark).

Inputs (files, directories, `.zip` and `.tar.gz` artifacts, `.json` documents) are expanded into
shard candidates and documents; each shard is streamed through the strict reader inside one
transaction, so a shard is stored whole or not at all, while good shards beside a bad one are
stored. The same content (sha256) is stored once, also when two uploads race: the unique sha256
decides. `pipeline` runs it; `inputs`, `archives`, `shards` and `documents` are its steps; the
parser process is `records.parser` (outside this package, so that process loads no Django); how
rows get in fast is `records.bulk`.
"""

from __future__ import annotations

from records.ingest.inputs import IngestReport, Input, bytes_input, inputs_from_paths
from records.ingest.pipeline import ingest

__all__ = ["IngestReport", "Input", "bytes_input", "ingest", "inputs_from_paths"]
