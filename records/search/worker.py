"""The index's vector process: ids of documents in, their vectors out.

No Django here, nor anything that imports it: while a run's index is written on PostgreSQL
(`records.search.engine.index_new_run`), this process reads the pieces of each batch of
documents on a connection of its own (the run is committed) and makes their vectors
(`records.search.vectors`), so that this Python work runs on a core of its own rather than in
the threads of the process that writes them, which share one.
"""

from __future__ import annotations

import gc
from typing import Any

from records.bulk.apart import Reader, reading
from records.bulk.processes import pack, unpack
from records.search.vectors import documents


def vector_worker(source: Any, sink: Any, reach: Reader) -> None:
    """Packed (kind, ids) messages in (an empty message ends them); for each, packed
    ("vectors", [(id, vector or None), ...]) out, or ("error", message) and the end."""
    gc.disable()  # nothing here makes cycles
    with reading(reach) as fetch:
        try:
            while data := source.recv_bytes():
                kind, ids = unpack(data)
                try:
                    made = documents(fetch, kind, ids)
                except Exception as exc:  # noqa: BLE001 (the index fails, saying why)
                    message = f"the index's vectors could not be made: {exc}"
                    sink.send_bytes(pack(("error", message)))
                    return
                sink.send_bytes(pack(("vectors", made)))
        except EOFError:
            pass  # the writer gave up
        finally:
            sink.close()
