"""What the queues of a process do when it exits.

A normal exit means the readers finished: every queue is closed, which
acknowledges what its consumers that reached their end still hold (an item
still open elsewhere expires and is read again). After an uncaught exception (the interpreter keeps it in
``sys.last_value``) the items are left to expire and be read again.

Integrations add what must end after the queues and before the interpreter
finalizes (``after_queues``): worker_sdk.collectives ends the process groups its
SyncLoaders used there.
"""

from __future__ import annotations

import atexit
import logging
import sys
import traceback
import weakref
from typing import TYPE_CHECKING, Callable

from . import errors

if TYPE_CHECKING:
    from .queue import WorkQueue

log = logging.getLogger("worker_sdk")

_queues: weakref.WeakSet[WorkQueue] = weakref.WeakSet()
_after_queues: list[Callable[[], None]] = []


def register(queue: WorkQueue) -> None:
    """Closes ``queue`` at a normal exit of the process."""
    _queues.add(queue)


def after_queues(callback: Callable[[], None]) -> None:
    """Runs ``callback`` at a normal exit, once the queues are closed, while the interpreter still runs (once)."""
    if callback not in _after_queues:
        _after_queues.append(callback)


@atexit.register
def _close_queues():
    if getattr(sys, "last_value", None) is not None:
        # The printed traceback's frames still hold what the script was
        # iterating, e.g. a tf.data iterator over input_dataset(). Destroyed
        # later, during interpreter shutdown, its finalizer waits for a Python
        # callback that can no longer run and the process hangs (1 exit in 4
        # on two busy cores). Released now, it is destroyed while Python runs.
        traceback.clear_frames(sys.last_traceback)
        return
    for queue in list(_queues):
        try:
            queue.close()
        except errors.ShardlineError as exc:
            log.warning("work queue %s: could not complete held items at exit: %s", queue.name, exc)
    for callback in list(_after_queues):
        try:
            callback()
        except Exception as exc:  # one integration's failure must not keep the others from ending
            log.warning("%s at exit failed: %s", getattr(callback, "__qualname__", callback), exc)
