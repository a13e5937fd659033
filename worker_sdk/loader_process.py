"""What a DataLoader's loader process does first as it starts to read, whichever of the SDK's datasets it runs.

The objects a loader holds as it starts are moved out of the cyclic
garbage collector's reach (``gc.freeze``): a forked loader's are those it
inherited from the training process (PyTorch, the script's modules, the
dataset); a spawned one's (``spawn``, ``forkserver``) those it imported and
unpickled. A full collection in the loader then walks only what the loader
made since. Otherwise a forked loader's walks the whole inherited heap
(PyTorch's alone is large), which stalls it for a long time on a busy node,
whenever it comes: at a job's end, every training loop waits for it as the
DataLoader joins its loaders. The walk also writes to every page of that
heap, which the fork had shared with the training process.

Frozen objects are still freed when their last reference goes; only a
reference cycle among them that becomes garbage inside the loader is kept,
for the loader's life. ``gc_freeze=False`` on the dataset leaves the
collector as it was.
"""

from __future__ import annotations

import gc
import os

# The process that froze its heap: a persistent loader's later passes find
# their own pid here and leave it; a process forked from a loader finds its
# parent's, and freezes its own.
_frozen_in: int | None = None


def freeze_inherited() -> None:
    """Freezes what this process holds now, once per process (a persistent loader's later passes leave it)."""
    global _frozen_in
    if _frozen_in == os.getpid():
        return
    gc.freeze()
    _frozen_in = os.getpid()
