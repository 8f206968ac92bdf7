"""Pure-Python work in a second process, beside the one that talks to the database.

The ingest parses a large shard and the scoring scores a large run this way: the database
work (one connection, one transaction) stays here, the Python work moves to the other core.
Messages go in as bytes and come back `pack`ed; a receiver thread drains the way back, so the
worker never waits for the writer, and the writer waits on the way in only while the worker
is busy with what it sent before.
"""

from __future__ import annotations

import collections
import multiprocessing
import multiprocessing.forkserver
import pickle
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

import msgspec

NOTHING = object()  # what `receive(block=False)` returns when no message is waiting


_to_msgpack = msgspec.msgpack.Encoder().encode
_from_msgpack = msgspec.msgpack.Decoder().decode


def pack(msg: Any) -> bytes:
    """A message of plain rows (lists, tuples, str, int, float, bool, None) as msgpack, several
    times cheaper than pickle both ways; tuples come back as lists."""
    return b"m" + _to_msgpack(msg)


def pack_object(msg: Any) -> bytes:
    """A message holding other objects (dataclasses, datetimes), pickled."""
    return b"p" + pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)


# How a packed message ("done", ...) or ("error", ...) begins: a worker's last message for an
# input (msgpack: an array of two, then the kind as a short string).
_DONE, _ERROR = b"m\x92\xa4done", b"m\x92\xa5error"


def ending(data: bytes) -> str | None:
    """ "done" or "error" where a packed message is the worker's last for the input it was
    reading, else None."""
    if data.startswith(_DONE):
        return "done"
    return "error" if data.startswith(_ERROR) else None


def unpack(data: bytes) -> Any:
    body = memoryview(data)[1:]
    return _from_msgpack(body) if data[:1] == b"m" else pickle.loads(body)


def available() -> bool:
    """Whether a worker can be started here: the platform must fork (Windows cannot), and a
    daemonic process (a pool's worker, say) may not have children of its own."""
    return (
        "forkserver" in multiprocessing.get_all_start_methods()
        and not multiprocessing.current_process().daemon
    )


_background: list[threading.Thread] = []
_settling = threading.Lock()  # one `settle` at a time

# The pipe ends this process holds for its workers. A forked worker inherits them all: it closes
# them first, so that when this process dies, every worker reads the end of its input (and
# ends) instead of waiting forever on a pipe it holds open itself.
_held: weakref.WeakSet[Any] = weakref.WeakSet()


def _run(target: Callable[..., None], source: Any, sink: Any, *args: Any) -> None:
    for conn in list(_held):
        conn.close()
    target(source, sink, *args)


def in_background(target: Callable[[], None]) -> None:
    """Run `target` in a thread of its own; a worker forked from this process waits for it
    first, so that it still forks from a process with no other thread."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    _background.append(thread)


def settle() -> None:
    """Wait for everything `in_background` started. Two threads settling at once (a server's
    requests, each after a scoring) wait in turn, so each returns with everything ended."""
    with _settling:
        while _background:
            _background.pop().join()


def _forks(fork: bool) -> bool:
    others = {t for t in threading.enumerate() if t is not threading.current_thread()}
    return fork and others <= set(_background)


# The modules of every kind of worker this process may start (`preload`): the one forkserver a
# process has imports them all when it starts, whichever worker starts it.
_preloaded: set[str] = set()


def preload(target: Callable[..., None]) -> None:
    """Workers of `target` may be started from this process's forkserver: whichever worker
    starts that server (a second parser process, say, before any scorer), it imports their
    module too, so that none of them imports it again when it starts."""
    preload_module(target.__module__)


def preload_module(module: str) -> None:
    """A module some workers import as they work, imported by the forkserver as it starts."""
    _preloaded.add(module)


def _preloads(module: str) -> list[str]:
    return sorted({module, *_preloaded})


def _context(preload: str, *, fork: bool = True) -> Any:
    """A process with no other thread forks (instant, and no lock can be held by a thread
    that does not exist in the child); a threaded one (a web server, or an ingest whose parser
    process is running) has its workers forked by a clean single-threaded server process
    instead, started once. Only where forking is possible is the work `in_background` waited
    for (a checkpoint of a large shard can take a second): a server process does not need it.
    `fork=False`: from the server process whatever the threads, for a worker that opens a
    database file this process holds open (a forked SQLite would believe it holds this
    process's locks)."""
    if _forks(fork):
        settle()
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_preloads(preload))
    return ctx


def prepare(target: Callable[..., None], *, fork: bool) -> None:
    """Start now the clean server process that workers of `target` are started from where
    this process will not fork them itself (`_context`, given the same `fork` as they will be),
    so that the first of them, wanted later, does not wait for a fresh interpreter to import
    its module (about 0.2 s). The server starts beside this process and imports its module
    while this one works on; once per process, as the first worker would start it. Only a
    head start: where the server cannot start now, nothing is said, and the workers' own start
    tries again and reports why."""
    if not available() or _forks(fork):
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(_preloads(target.__module__))
    try:
        multiprocessing.forkserver.ensure_running()
    except Exception:  # noqa: BLE001 (a head start only: never the fault of the work it serves)
        pass


def _widen(conn: Any) -> None:
    """Let a pipe hold a whole batch (Linux), so neither side waits on the other's every step."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):
        pass


class Beside:
    """`target(source, sink, *args)` running in a second process for `what` (named in errors)."""

    def __init__(
        self,
        target: Callable[..., None],
        args: tuple[Any, ...],
        what: str,
        *,
        context: Any = None,
        listen: bool = True,
    ) -> None:
        ctx = context or _context(target.__module__)
        self.what = what
        source_r, self.source = ctx.Pipe(duplex=False)
        self.sink, sink_w = ctx.Pipe(duplex=False)
        _widen(self.source)
        _widen(sink_w)
        self.proc = ctx.Process(target=_run, args=(target, source_r, sink_w, *args), daemon=True)
        _held.add(self.source)
        _held.add(self.sink)
        self.proc.start()
        source_r.close()
        sink_w.close()
        self.inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        # Where each input's messages go, in the order the inputs went in (`route`); held by
        # `routing` while the receiver hands a message to one, or one changes where it keeps them.
        self.routes: collections.deque[Any] = collections.deque()
        self.routing = threading.Lock()
        self.receiver = threading.Thread(target=self._receive, daemon=True)
        if listen:
            self.receiver.start()

    @classmethod
    def several(
        cls,
        n: int,
        target: Callable[..., None],
        args: tuple[Any, ...],
        what: str,
        *,
        fork: bool = True,
    ) -> list[Beside]:
        """n workers, every process started before any receiver thread, so that all of them
        fork where one would (`fork` as `_context` takes it)."""
        ctx = _context(target.__module__, fork=fork)
        workers = [cls(target, args, what, context=ctx, listen=False) for _ in range(n)]
        for w in workers:
            w.receiver.start()
        return workers

    def route(self, dest: Any) -> None:
        """The next input's messages, up to its last (`ending`), are offered to
        `dest.keep(data)`, which keeps them elsewhere (True) or leaves them for `receive`."""
        with self.routing:
            self.routes.append(dest)

    def _receive(self) -> None:
        try:
            while True:
                data = self.sink.recv_bytes()
                if self.routes:
                    with self.routing:
                        dest = self.routes[0] if self.routes else None
                        if dest is not None:
                            if ending(data):
                                self.routes.popleft()
                            if dest.keep(data):
                                continue
                self.inbox.put(data)
        except (EOFError, OSError):
            self.inbox.put(None)

    def send(self, data: bytes) -> bool:
        """Send a message; False if the worker is gone (its last words wait in `receive`)."""
        try:
            self.source.send_bytes(data)
        except OSError:
            return False
        return True

    def end_input(self) -> None:
        """An empty message: the worker's cue that nothing more will come."""
        self.send(b"")

    def receive(self, block: bool = True) -> Any:
        try:
            data = self.inbox.get(block)
        except queue.Empty:
            return NOTHING
        if data is None:
            self.proc.join()
            raise RuntimeError(
                f"the worker process for {self.what} ended without finishing "
                f"(exit code {self.proc.exitcode})"
            )
        return unpack(data)

    def stop(self) -> None:
        """Stop the worker mid-way (the writer gave up); whoever is sending gets an error."""
        self.proc.terminate()

    def close(self) -> None:
        """Once nobody sends any more: wait for the worker to end and release the pipes."""
        self.proc.join()
        if self.receiver.ident is not None:
            self.receiver.join()
        self.source.close()
        self.sink.close()
