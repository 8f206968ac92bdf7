"""The scorer process: chunks of stored attempts in, verdict rows out.

No Django here, nor anything that imports it: a threaded server starts this process from a clean
forkserver that preloads only this module.
"""

from __future__ import annotations

import gc
from collections.abc import Collection
from typing import Any

from records.bulk.processes import pack, unpack
from records.formats.corpus_key import KeyDocument
from records.scorer.batch import score_chunk
from records.scorer.score import ScoringError


def score_worker(
    source: Any, sink: Any, doc: KeyDocument, stale: bool, refused: Collection[str]
) -> None:
    """The scorer process: packed chunks in (an empty message ends them), packed
    ("verdicts", rows, retired, unknown) or ("error", message) out."""
    gc.disable()  # nothing here makes cycles; a forked scorer shares the writer's pages
    try:
        while data := source.recv_bytes():
            rows, retired, unknown, unscoreable = score_chunk(doc, stale, unpack(data), refused)
            sink.send_bytes(pack(("verdicts", rows, retired, unknown, unscoreable)))
    except ScoringError as exc:
        sink.send_bytes(pack(("error", str(exc))))
    except EOFError:
        pass  # the writer gave up
    finally:
        sink.close()
