"""One ingest entry point for every way results arrive (the upload page, the API, the commands,
the demo, the benchmark).

Inputs (files, directories, `.zip` and `.tar.gz` artifacts, `.json` documents) are expanded into
shard candidates and documents; each shard is streamed through the strict reader inside one
transaction, so a shard is stored whole or not at all, while good shards beside a bad one are
stored. The same content (sha256) is stored once, also when two uploads race: the unique sha256
decides. `pipeline` runs it; `inputs`, `archives`, `shards` and `documents` are its steps;
`parser` is the parser process; how rows get in fast is `records.bulk`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["IngestReport", "Input", "bytes_input", "ingest", "inputs_from_paths"]


def __getattr__(name: str) -> Any:
    # Imported on first use, not here: the parser process imports `records.ingest.parser`,
    # and loading this package must not pull in Django there.
    if name in ("IngestReport", "Input", "bytes_input", "inputs_from_paths"):
        from records.ingest import inputs

        return getattr(inputs, name)
    if name == "ingest":
        from records.ingest.pipeline import ingest

        return ingest
    raise AttributeError(name)
