"""The scorer process: chunks of stored attempts in, verdict rows out.

No Django here, nor anything that imports it: a threaded server starts this process from a clean
forkserver that preloads only this module. Where the rows it scores are committed, it reads them
itself, on a connection of its own (`records.bulk.apart`), so the writer only says which.
"""

from __future__ import annotations

import gc
from collections.abc import Collection
from typing import Any, NamedTuple

from records.bulk.apart import Fetch, Reader, reading
from records.bulk.processes import pack, unpack
from records.formats.corpus_key import KeyDocument
from records.scorer.batch import Chunk, score_chunk
from records.scorer.score import ScoringError


class ChunkRead(NamedTuple):
    """A chunk's attempts as rows, and the statements reading the rest of what the scorer
    needs of them, each (SQL with %s parameters, parameters); `checks` None when none of the
    chunk's attempts has a failed check."""

    attempts: list[tuple]
    facts: tuple[str, list[Any]]
    calls: tuple[str, list[Any]]
    mine: list[int] | None  # where other runs' attempts lie in the range: this chunk's ids
    checks: tuple[str, list[Any]] | None = None


def read_chunk(fetch: Fetch, spec: ChunkRead) -> Chunk:
    """The chunk to score, its statements run by `fetch(sql, params)`."""
    attempts, facts, calls, mine, checks = spec
    fact_rows, call_rows = fetch(*facts), fetch(*calls)
    check_rows = fetch(*checks) if checks is not None else []
    if mine is not None:
        ids = set(mine)
        fact_rows = [r for r in fact_rows if r[0] in ids]
        call_rows = [r for r in call_rows if r[0] in ids]
        check_rows = [r for r in check_rows if r[0] in ids]
    return attempts, fact_rows, call_rows, check_rows


def score_worker(
    source: Any,
    sink: Any,
    doc: KeyDocument,
    stale: bool,
    refused: Collection[str],
    reach: Reader | None,
) -> None:
    """The scorer process: packed ("read", `ChunkRead`) or ("rows", `Chunk`) messages in (an
    empty message ends them), packed ("verdicts", rows, retired, unknown, unscoreable) or
    ("error", message) out."""
    gc.disable()  # nothing here makes cycles; a forked scorer shares the writer's pages
    with reading(reach) as fetch:
        try:
            while data := source.recv_bytes():
                kind, body = unpack(data)
                if kind == "read":
                    try:
                        chunk = read_chunk(fetch, ChunkRead(*body))
                    except Exception as exc:  # noqa: BLE001 (the scoring fails, saying why)
                        message = f"a scorer could not read the run: {exc}"
                        sink.send_bytes(pack(("error", message)))
                        return
                else:
                    chunk = tuple(body)
                rows, retired, unknown, unscoreable = score_chunk(doc, stale, chunk, refused)
                sink.send_bytes(pack(("verdicts", rows, retired, unknown, unscoreable)))
        except ScoringError as exc:
            sink.send_bytes(pack(("error", str(exc))))
        except EOFError:
            pass  # the writer gave up
        finally:
            sink.close()
