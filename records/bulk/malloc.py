"""One malloc arena for the process (glibc). glibc gives each thread that allocates an arena of
its own, up to eight a core, and memory freed in one is not reused by another: the ingest's
threads (the writer, those taking the parsers' and scorers' messages, a run scored beside the
next shard's store) each grew one. A zip of two 20,000-attempt shards peaked 20 to 40 MB higher
for it; with one arena, at no cost in time measured (`docs/benchmark.md`). Python's own small
objects do not come from malloc, and the threads that allocate outside the interpreter lock
(SQLite, the database driver, pipes) do it in large blocks, so they seldom contend.

Where the C library has no `mallopt` (musl, macOS), or the operator set `MALLOC_ARENA_MAX`,
nothing changes."""

from __future__ import annotations

import ctypes
import os

_M_ARENA_MAX = -8  # glibc's malloc.h


def one_arena() -> bool:
    """Limit this process's malloc arenas to one, before its threads start; whether it did."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # no such library or function here
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(_M_ARENA_MAX, 1) == 1
