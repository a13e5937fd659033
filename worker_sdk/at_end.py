"""The process's end-of-queue mark: whether one of its consumers waits at the end of a queue.

A consumer is at its end while it waits for the last leases of a queue, and
after it ended while still holding what it reads (input_producer's reader).
While any consumer of the process is, the process's leases on every job are
not worth waiting for: they may be stuck behind that wait (a DataLoader
taking from its loaders in turn, two queues read in lockstep), or be
finished only when the process's training loop ends. Takes that find
nothing mark their own job; the heartbeats of every leaser ``watch``ing
carry the mark to every job the process holds leases of.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol


class Watcher(Protocol):
    def wake(self) -> None:
        """Say the process's mark to the server now (it changed)."""


_watchers: "weakref.WeakSet[Watcher]" = weakref.WeakSet()
_at_end: "weakref.WeakSet[object]" = weakref.WeakSet()
_lock = threading.Lock()


def _forget_parent() -> None:
    # A forked child (a DataLoader's loader) has copies of its parent's
    # leasers but none of their heartbeat threads, and its own consumers.
    # Woken by a loader's mark, a copied leaser would send the parent's
    # leases from the child as waiting, and other workers would then stop
    # waiting for items the parent is still reading. The lock is new: a
    # thread of the parent may have held it at the fork.
    global _watchers, _at_end, _lock
    _watchers, _at_end, _lock = weakref.WeakSet(), weakref.WeakSet(), threading.Lock()


os.register_at_fork(after_in_child=_forget_parent)


def watch(watcher: Watcher) -> None:
    """``watcher.wake()`` is called whenever the process's mark changes (held weakly)."""
    _watchers.add(watcher)


def process_waits() -> bool:
    return len(_at_end) > 0


def mark_at_end(consumer: object, at_end: bool) -> None:
    """Records whether ``consumer`` (a stream) is at its end; the watchers say so at once when that changes the process's mark."""
    with _lock:
        before = len(_at_end) > 0
        if at_end:
            _at_end.add(consumer)
        else:
            _at_end.discard(consumer)
        changed = before != (len(_at_end) > 0)
    if changed:
        for watcher in list(_watchers):
            watcher.wake()
