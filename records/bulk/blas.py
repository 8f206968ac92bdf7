"""Matrix products on one thread: OpenBLAS (numpy's) starts a thread per core for any product
above a small size, and on products as small as a scoring's (a few thousand resamples of a few
hundred cases) its threads spend more time waiting for each other than multiplying, the more so
on a busy machine: one thread is several times faster. Results do not depend on it.

The library is the one numpy has loaded, found by name in this process's memory map (Linux);
where it cannot be found (another platform, another BLAS), nothing changes."""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# (set, get) as OpenBLAS names them: plain, in a 64-bit integer build, and in the build numpy's
# wheels bundle (scipy-openblas).
_NAMES = tuple(
    (f"{prefix}_set_num_threads{suffix}", f"{prefix}_get_num_threads{suffix}")
    for prefix in ("scipy_openblas", "openblas")
    for suffix in ("64_", "")
)


@functools.cache
def controls() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """OpenBLAS's setter and getter of its thread count, or None."""
    try:
        with open("/proc/self/maps") as fh:
            paths = sorted(
                {
                    parts[5].strip()
                    for line in fh
                    if "openblas" in line.lower() and len(parts := line.split(None, 5)) == 6
                }
            )
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # the library already loaded: dlopen hands back its handle
        except OSError:
            continue
        for set_name, get_name in _NAMES:
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None


_lock = threading.Lock()
_inside = 0  # how many callers are within `one_thread` (threads of one server)
_before = 0  # the thread count when the first of them came in


@contextmanager
def one_thread() -> Iterator[None]:
    """Within: numpy's matrix products run on one thread; after, as many as before. Call it once
    numpy is imported (its library is looked for then)."""
    global _inside, _before
    found = controls()
    if found is None:
        yield
        return
    setter, getter = found
    with _lock:
        if not _inside:
            _before = getter()
            setter(1)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if not _inside:
                setter(_before)
