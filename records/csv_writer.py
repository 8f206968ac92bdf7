"""The CSV writer process: a long CSV's rows go to it, and it writes them as CSV while the
request's process reads and shapes the next ones, so a whole-store export keeps both cores busy.

Outside `views/`, so that loading it loads no Django: a threaded server starts this process from
a forkserver that preloads only such modules. The rows are the groups
`records.formats.spreadsheet.group_lines` takes (a head's cells, its rows' cells, plain
values: str, int, float, bool, None, or lists of them in a row's last cell for its `last` to
make: a search's snippet, folded here), sent `BATCH_ROWS` rows at a time, one batch ahead of
the text taken back: the request's process holds a few batches (the first two, the one it is
making, the one sent last, packed) and the text of one. An export of a single batch is written
in the request's process, with no process started.
"""

from __future__ import annotations

import gc
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

from records.bulk import processes
from records.formats.spreadsheet import Group, group_lines

Last = Callable[[Any], Any]
BATCH_ROWS = 4000  # rows sent to the worker at a time (about a megabyte of a search's)


def _batches(groups: Iterable[Group]) -> Iterator[list[Group]]:
    """The groups, in lists of at least `BATCH_ROWS` rows (a group without rows is one)."""
    batch: list[Group] = []
    rows = 0
    for group in groups:
        batch.append(group)
        rows += len(group[1]) or 1
        if rows >= BATCH_ROWS:
            yield batch
            batch, rows = [], 0
    if batch:
        yield batch


def csv_worker(
    source: Any, sink: Any, width: int, header: Sequence[str], last: Last | None = None
) -> None:
    """The worker process: packed batches of groups in (an empty message ends them), each
    batch's CSV out as UTF-8, packed as ("csv", bytes) (the encoding done here too, not in the
    request's process); the header before the first batch's rows; each row's last cell made
    by `last`, if given (`group_lines`)."""
    gc.disable()  # nothing here makes cycles
    # A forked worker keeps its parent's handlers: a server's own for SIGTERM would keep it
    # alive when the export is given up (`Beside.stop`).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    first = True
    try:
        while data := source.recv_bytes():
            groups = processes.unpack(data)
            text = "".join(group_lines(groups, width, header if first else (), last))
            sink.send_bytes(processes.pack(("csv", text.encode())))
            first = False
    except EOFError:
        pass  # the export was given up
    finally:
        sink.close()


processes.preload(csv_worker)


def written(
    groups: Iterable[Group], width: int, header: Sequence[str], last: Last | None = None
) -> Iterator[str | bytes]:
    """`group_lines` of `groups`: the same text, or, written by a worker process beside this
    one where the groups are more than one batch and a process can be started, its UTF-8.
    `last` (`group_lines`'s) must be a module's own function, as it crosses to that process."""
    batches = _batches(groups)
    ahead = list(islice(batches, 2))  # two batches or fewer: whether a writer is worth it
    worker = _started(width, header, last) if len(ahead) == 2 else None
    if worker is None:
        yield from group_lines(chain.from_iterable(chain(ahead, batches)), width, header, last)
        return
    packed = map(processes.pack, chain(ahead, batches))
    finished = False
    try:
        worker.send(next(packed))
        for data in packed:
            worker.send(data)  # one batch ahead of the text taken back
            data = None
            yield worker.receive()[1]
        worker.end_input()
        yield worker.receive()[1]
        finished = True
    finally:
        if not finished:
            worker.stop()
        worker.close()


def _started(width: int, header: Sequence[str], last: Last | None) -> processes.Beside | None:
    """A writer process, forked where this process has no other thread (it never opens the
    database); None where none can be had (a fork refused, a forkserver gone)."""
    if not processes.available():
        return None
    try:
        (worker,) = processes.Beside.several(1, csv_worker, (width, header, last), "the CSV export")
    except (OSError, EOFError):
        return None
    return worker
