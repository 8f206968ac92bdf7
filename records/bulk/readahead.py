"""Inputs fed to a worker process, a bounded distance ahead of the rows taken back from it.

The worker reads each input (its name, then its bytes) and answers with messages whose first
item says what they are: "batch" (rows; its last item is how many bytes were read so far),
"shard" (the input was read whole), "done" (its last message), or "error" (its last message,
carrying the worker's own account of what was wrong, which `Feed.messages` raises as
`WorkerError` for the caller to word)."""

from __future__ import annotations

import hashlib
import io
import logging
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from records.bulk import processes

log = logging.getLogger(__name__)

CHUNK = 1024 * 1024


# How far ahead of the writer the parser may read a shard: the rows of at most this many bytes
# wait for the writer, so memory stays bounded however slow the database or large the shard.
AHEAD_BYTES = 32 * 1024 * 1024


class WorkerError(Exception):
    """The worker's "error" message: its payload is the worker's account, as it sent it."""

    def __init__(self, payload: Any) -> None:
        super().__init__(payload)
        self.payload = payload


class Parsers:
    """The parser processes of one ingest call: up to `count` (`EVALDASH_INGEST_PROCESSES`),
    each a `Parser`. The shard the writer stores is parsed in one; the shards after it, as far
    as the other processes allow, are parsed at once in the others, their messages spooled to
    a temporary file until the writer comes to them (`Feed`)."""

    def __init__(
        self,
        worker: Callable[..., None],
        what: str,
        mark: bytes = b"n",
        *,
        count: int = 1,
        spool_dir: str | None = None,
    ) -> None:
        self.worker, self.what = worker, what
        self.parsers = [Parser(worker, what, mark, spool_dir) for _ in range(max(1, count))]

    def start(self, stream: IO[bytes], name: str, *, ahead: bool = False) -> Feed | None:
        """Start a shard's parse, in a process with nothing left to parse if there is one,
        else in one whose last shard is read (it goes on once that shard's last rows are out).
        `ahead`: the writer is storing another shard; its messages are spooled, and None is
        returned (nothing started) while every process is busy.

        The first start starts every process at once, before any thread of theirs runs, so
        that all of them fork (where this process may fork), none from a fresh interpreter."""
        if len(self.parsers) > 1 and all(p.proc is None for p in self.parsers):
            procs = processes.Beside.several(len(self.parsers), self.worker, (), self.what)
            for p, proc in zip(self.parsers, procs, strict=True):
                p.proc = proc
        parser = next((p for p in self.parsers if p.idle()), None) or next(
            (p for p in self.parsers if p.free()), None
        )
        if parser is None:
            if ahead:
                return None
            # Every shard before this one was taken or given up, so some process is free:
            # were none, one whose shard nobody will take is stopped rather than waited on.
            parser = self.parsers[0]
            parser.stop()
        return parser.start(stream, name, ahead=ahead)

    def close(self) -> None:
        for parser in self.parsers:
            parser.close()


class Parser:
    """One parser process of an ingest call (`worker`, started with its first shard).

    Its shards are parsed one after another. The next one's bytes go in as soon as the last one
    is read, so its parse runs while the writer stores the end of the last one: its attempt
    rows, its run, the commit. The process starts with its first shard and ends with the call,
    or once a shard is read that no parse follows (`Parsers.close`, called then by the ingest;
    a large shard further on starts it again); a shard's error ends it too, as does the writer
    giving up on a shard the process is still reading, and the next shard starts another."""

    def __init__(
        self,
        worker: Callable[..., None],
        what: str,
        mark: bytes = b"n",
        spool_dir: str | None = None,
    ) -> None:
        """`mark`: the first byte of each input's head (before its name), for the worker to read
        as it likes."""
        self.worker, self.what, self.mark = worker, what, mark
        self.spool_dir = spool_dir
        self.proc: processes.Beside | None = None
        self.feeding: Feed | None = None  # the last shard whose bytes went in

    def idle(self) -> bool:
        """Nothing left to parse: no shard, or its last was parsed to its end or taken whole."""
        feed = self.feeding
        return self.proc is None or feed is None or feed.finished or feed.parsed

    def free(self) -> bool:
        """A next shard may go in: its last shard is read (that shard cannot fail any more)."""
        return self.idle() or (self.feeding is not None and self.feeding.read)

    def start(self, stream: IO[bytes], name: str, *, ahead: bool = False) -> Feed:
        if self.feeding is not None:
            self.feeding.thread.join()  # the shard before was read whole: its bytes are in
        if self.proc is None:
            self.proc = processes.Beside(self.worker, (), self.what)
        self.feeding = Feed(self, self.proc, stream, name, ahead=ahead, spool_dir=self.spool_dir)
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


_LENGTH = 8  # bytes of a spooled message's length, before it


class Feed:
    """One shard in a parser process: its bytes sent, and hashed, by a thread of its own (hashing
    lets other threads run, so the digest costs the writer nothing), its messages taken in turn.
    The thread sends no more than AHEAD_BYTES past the bytes whose rows the writer has taken.

    A shard parsed ahead of the writer (`ahead`) has its messages written to a temporary file
    as they come, and is sent with no such bound, so its parse goes on at the speed of its
    process; once the writer comes to it, it reads that file, then the messages that came
    after, the bound holding again. A file that cannot be written (a full disk) leaves the rest
    in memory, the bound holding."""

    def __init__(
        self,
        parser: Parser,
        proc: processes.Beside,
        stream: IO[bytes],
        name: str,
        *,
        ahead: bool = False,
        spool_dir: str | None = None,  # where the spool goes; None: the temporary directory
    ) -> None:
        self.parser = parser
        self.proc = proc
        self.digest = hashlib.sha256()
        self.read = False  # the parser read the whole shard (it sent the "shard" message)
        self.parsed = False  # its "done" came back from the process (taken or not)
        self.finished = False  # its last message ("done" or "error") was taken
        self.taken: float = 0  # bytes of the shard whose rows the writer has taken
        self.room = threading.Condition()
        self.closed = False  # the process is gone: nothing more is sent
        self.read_error: Exception | None = None  # the shard's bytes could not all be read
        self.spool: IO[bytes] | None = None
        if ahead:
            self.spool = tempfile.TemporaryFile(dir=spool_dir)  # noqa: SIM115
        self.spooling = ahead  # the messages go to `spool` as they come
        self.spooled = 0  # bytes of `spool` written whole
        self.unspooled = False  # the writer came to the shard: the spool is read, no more written
        self.unread = 0  # bytes of `spool` the writer has still to take
        proc.route(self)
        self.thread = threading.Thread(target=self._send, args=(stream, name), daemon=True)
        self.thread.start()

    def _send(self, stream: IO[bytes], name: str) -> None:
        if not self.proc.send(self.parser.mark + name.encode()):
            return
        sent = 0
        while True:
            try:
                chunk = stream.read(CHUNK)
            except (OSError, ValueError) as exc:
                # Never a cut shard stored as if whole: the process is stopped, and the
                # writer, waiting on it, raises this error in place of its end.
                self.read_error = exc
                self.proc.stop()
                return
            if not chunk:
                break
            with self.room:
                while sent - self.taken > AHEAD_BYTES and not self.closed and not self.spooling:
                    self.room.wait()
                if self.closed:
                    return
            self.digest.update(chunk)
            if not self.proc.send(chunk):
                return  # the parser stopped early (an error in the shard, or it was stopped)
            sent += len(chunk)
        self.proc.end_input()

    def keep(self, data: bytes) -> bool:
        """The process's receiver offers each message of this shard (`Beside.route`): kept in
        the spool while the shard is ahead of the writer, else left for `receive`."""
        if processes.ending(data) == "done":
            self.parsed = True
        if not self.spooling:
            return False
        assert self.spool is not None
        try:
            self.spool.write(len(data).to_bytes(_LENGTH, "little"))
            self.spool.write(data)
        except OSError:
            log.warning("a shard parsed ahead is kept in memory: its spool could not be written")
            self.spooling = False  # this message and the rest go to the inbox, in order
            self._wake()
            return False
        self.spooled += _LENGTH + len(data)
        return True

    def _wake(self) -> None:
        with self.room:
            self.room.notify()

    def _took(self, upto: float) -> None:
        with self.room:
            self.taken = upto
            self.room.notify()

    def close(self) -> None:
        """The process is gone or going: the thread stops waiting for room."""
        with self.room:
            self.closed = True
            self.room.notify()
        self._drop_spool()

    def _drop_spool(self) -> None:
        with self.proc.routing:  # not while the receiver writes to it
            spool, self.spool = self.spool, None
            self.spooling = False
        if spool is not None:
            spool.close()  # a temporary file: gone once closed

    def _take_spool(self) -> None:
        """The writer comes to this shard: what was spooled is read first, the rest taken as
        it comes."""
        if self.unspooled:
            return
        self.unspooled = True
        with self.proc.routing:
            self.spooling = False
            self.unread = self.spooled
        self._wake()
        if self.spool is not None:
            self.spool.seek(0)

    def _receive(self) -> Any:
        """The next message: from the spool while it lasts, then from the process."""
        if self.unread:
            assert self.spool is not None
            size = int.from_bytes(self.spool.read(_LENGTH), "little")
            data = self.spool.read(size)
            self.unread -= _LENGTH + size
            if not self.unread:
                self._drop_spool()
            return processes.unpack(data)
        try:
            return self.proc.receive()
        except RuntimeError:  # the process ended: stopped, where the shard could not be read
            if self.read_error is not None:
                raise self.read_error from None
            raise

    def messages(self) -> Iterator[tuple[Any, ...]]:
        """The parser's messages for this shard; its "done" carries the shard's sha256."""
        self._take_spool()
        while True:
            msg = self._receive()
            kind = msg[0]
            if kind == "error":
                self.finished = True
                self._drop_spool()
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
        """The writer gives up on this shard. Once the parser has read it, or where another
        shard waits behind it in the process, what it still sends of it is dropped, so the next
        shard's parse goes on; otherwise the process is stopped."""
        if self.finished:
            return
        self.finished = True
        if self.read or self.parser.feeding is not self:
            self._take_spool()
            while (kind := self._receive()[0]) not in ("done", "error"):
                pass
            self._drop_spool()
            if kind == "error":
                self.parser.ended()
        else:
            self._drop_spool()
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
