"""Giving a web process's memory back after a large request body.

A job creation refused after its body was parsed (an unknown field, a bad
work) keeps the parse reachable from its exception's traceback (frame ->
exception -> traceback -> frame): a cycle that only the cycle collector
frees, and on an idle server it does not run. Three refused 200 MB bodies
left a process at 1.5 GB, and it grew with each round (bench/RESULTS.md,
"Request bodies and memory"). So after a large body: a collection, then
``malloc_trim`` to hand the allocator's free pages back (glibc only).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import threading

# Bodies at least this large (bytes) are followed by a trim.
LARGE_BODY = 8 * 1024 * 1024

_lock = threading.Lock()


def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None  # glibc only


_LIBC = _libc()


def trim() -> None:
    if not _lock.acquire(blocking=False):  # one at a time is enough
        return
    try:
        # A refused body's parse stays reachable from its exception's
        # traceback (frame -> exception -> traceback -> frame), a cycle that
        # only the cycle collector frees: on an idle server, never.
        gc.collect()
        if _LIBC is not None:
            _LIBC.malloc_trim(0)
    finally:
        _lock.release()


async def give_back() -> None:
    """Trims on a thread: it walks every arena, which takes a few milliseconds per gigabyte."""
    await asyncio.get_running_loop().run_in_executor(None, trim)
