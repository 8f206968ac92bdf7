"""Inputs fed to a worker process, a bounded distance ahead of the rows taken back from it.

The worker reads each input (its name, then its bytes) and answers with messages whose first
item says what they are: "batch" (rows; its last item is how many bytes were read so far),
"shard" (the input was read whole), "done" (its last message), or "error" (its last message,
carrying the worker's own account of what was wrong, which `Feed.messages` raises as
`WorkerError` for the caller to word)."""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from records.bulk import processes

CHUNK = 1024 * 1024


# How far ahead of the writer the parser may read a shard: the rows of at most this many bytes
# wait for the writer, so memory stays bounded however slow the database or large the shard.
AHEAD_BYTES = 32 * 1024 * 1024


class WorkerError(Exception):
    """The worker's "error" message: its payload is the worker's account, as it sent it."""

    def __init__(self, payload: Any) -> None:
        super().__init__(payload)
        self.payload = payload


class Parser:
    """The parser process of one ingest call (`worker`, started with the first large input).

    Large shards are parsed there one after another. The next one's bytes go in as soon as the
    last one is read (`Units.read_on`), so its parse runs while the writer stores the end of
    the last one: its attempt rows, its run, the commit. The process starts with the first large
    shard and ends with the call; a shard's error ends it too, as does the writer giving up on
    a shard the process is still reading, and the next large shard starts another."""

    def __init__(self, worker: Callable[..., None], what: str, mark: bytes = b"n") -> None:
        """`mark`: the first byte of each input's head (before its name), for the worker to read
        as it likes."""
        self.worker, self.what, self.mark = worker, what, mark
        self.proc: processes.Beside | None = None
        self.feeding: Feed | None = None  # the last shard whose bytes went in

    def start(self, stream: IO[bytes], name: str) -> Feed:
        if self.feeding is not None:
            self.feeding.thread.join()  # the shard before was read whole: its bytes are in
        if self.proc is None:
            self.proc = processes.Beside(self.worker, (), self.what)
        self.feeding = Feed(self, self.proc, stream, name)
        return self.feeding

    def stop(self) -> None:
        """Stop the process, whatever it is doing."""
        if self.proc is not None:
            self.proc.stop()
            self._release()

    def ended(self) -> None:
        """The process ended by itself (after a shard's error)."""
        self._release()

    def close(self) -> None:
        """At the end of the call: a process with nothing left to parse ends by itself."""
        if self.proc is None:
            return
        if self.feeding is not None and not self.feeding.finished:
            self.stop()  # the call ends early (an error nobody caught)
            return
        self.proc.end_input()
        self._release()

    def _release(self) -> None:
        proc, self.proc = self.proc, None
        if self.feeding is not None:
            self.feeding.close()
            self.feeding.thread.join()  # its sending fails once the process is gone
        assert proc is not None
        proc.close()


class Feed:
    """One shard in the parser process: its bytes sent, and hashed, by a thread of its own (hashing
    lets other threads run, so the digest costs the writer nothing), its messages taken in turn.
    The thread sends no more than AHEAD_BYTES past the bytes whose rows the writer has taken."""

    def __init__(
        self, parser: Parser, proc: processes.Beside, stream: IO[bytes], name: str
    ) -> None:
        self.parser = parser
        self.proc = proc
        self.digest = hashlib.sha256()
        self.read = False  # the parser read the whole shard (it sent the "shard" message)
        self.finished = False  # its last message ("done" or "error") was taken
        self.taken: float = 0  # bytes of the shard whose rows the writer has taken
        self.room = threading.Condition()
        self.closed = False  # the process is gone: nothing more is sent
        self.thread = threading.Thread(target=self._send, args=(stream, name), daemon=True)
        self.thread.start()

    def _send(self, stream: IO[bytes], name: str) -> None:
        if not self.proc.send(self.parser.mark + name.encode()):
            return
        sent = 0
        while chunk := stream.read(CHUNK):
            with self.room:
                while sent - self.taken > AHEAD_BYTES and not self.closed:
                    self.room.wait()
                if self.closed:
                    return
            self.digest.update(chunk)
            if not self.proc.send(chunk):
                return  # the parser stopped early (an error in the shard, or it was stopped)
            sent += len(chunk)
        self.proc.end_input()

    def _took(self, upto: float) -> None:
        with self.room:
            self.taken = upto
            self.room.notify()

    def close(self) -> None:
        """The process is gone or going: the thread stops waiting for room."""
        with self.room:
            self.closed = True
            self.room.notify()

    def messages(self) -> Iterator[tuple[Any, ...]]:
        """The parser's messages for this shard; its "done" carries the shard's sha256."""
        while True:
            msg = self.proc.receive()
            kind = msg[0]
            if kind == "error":
                self.finished = True
                self.parser.ended()
                raise WorkerError(msg[1])
            if kind == "batch":
                self._took(msg[-1])
            elif kind == "shard":
                self.read = True
                self._took(float("inf"))
            elif kind == "done":  # the parser read to the end, so every byte was sent
                self.thread.join()
                self.finished = True
                yield ("done", self.digest.hexdigest())
                return
            yield msg

    def abandon(self) -> None:
        """The writer gives up on this shard. Once the parser has read it, what it still sends
        of it is dropped, so the next shard's parse goes on; before, the process is stopped."""
        if self.finished:
            return
        self.finished = True
        if self.read:
            while self.proc.receive()[0] != "done":
                pass
        else:
            self.parser.stop()


class PipeReader(io.RawIOBase):
    """The shard's bytes as the writer process sends them: chunks, then an empty chunk."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.left = memoryview(b"")
        self.eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        while not self.left and not self.eof:
            self.left = memoryview(self.conn.recv_bytes())
            self.eof = not self.left
        n = min(len(buf), len(self.left))
        buf[:n] = self.left[:n]
        self.left = self.left[n:]
        return n
