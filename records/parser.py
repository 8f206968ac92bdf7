"""The shard parser process: the strict reader run beside the database writer.

No Django here, nor anything that imports it: a threaded server starts this process from a clean
forkserver that preloads only this module, so parsing never waits for the app registry.
"""

from __future__ import annotations

import gc
import io
from typing import Any

from records.bulk.processes import pack, pack_object
from records.bulk.readahead import PipeReader
from records.formats.shard import ShardError
from records.formats.shard_rows import messages

# The first byte of a shard's head, before its name: a head is never empty, whatever the name.
PLAIN = b"n"


def parse_worker(source: Any, sink: Any) -> None:
    """The parser process: shard after shard, each its head (`PLAIN`, then its name) then its
    bytes in from `source` (an empty message ends the bytes), and its packed messages out to
    `sink`. The process ends on an empty message in place of a head, or after
    a shard's error (the writer then starts another for the next shard)."""
    # What this process builds holds no reference cycles, and a forked parser shares the
    # writer's memory: collecting would only walk (and copy) pages nobody frees.
    gc.disable()
    try:
        while True:
            try:
                head = source.recv_bytes()  # its mark and the shard's name; empty: no more shards
            except EOFError:
                return
            if not head:
                return
            name = head[1:].decode()
            stream = io.BufferedReader(PipeReader(source), buffer_size=1 << 20)
            try:
                for msg in messages(stream, name):
                    sink.send_bytes(pack_object(msg) if msg[0] == "shard" else pack(msg))
            except ShardError as exc:
                sink.send_bytes(pack(("error", (exc.file, exc.message, exc.line, exc.field))))
                return
            except Exception as exc:  # noqa: BLE001 (reported as the shard's refusal)
                err = ShardError.unexpected(name, exc)
                sink.send_bytes(pack(("error", (err.file, err.message, err.line, err.field))))
                return
    finally:
        sink.close()
