"""The loader processes of one DataLoader pass in order: which of them read a lease now, so that an idle one may leave.

A DataLoader in order (a plain ``DataLoader``, or ``WorkQueueLoader`` with
``in_order=True``) asks its loaders for batches in turn. At the tail of a
job, a loader that finds nothing to lease waits on the server (for a split,
or for the job's end) and the DataLoader waits for that loader's next batch,
while a sibling holds records it could deliver: the training loop stalls
for as long as the wait (bench/RESULTS.md). So a loader that has read a
lease in this pass and whose take finds nothing but leases held ends its
part of the pass while a sibling still reads; the DataLoader goes on with
the loaders left, and the last reader takes what the tail brings (a split's
remainder, a failed item) or waits for the end. A loader never leaves
while items are pending, slicing or an epoch is being made: then every
loader has work coming. Nor does one that has read nothing yet: at the
start of a job of fewer items than loaders, a split may soon give it its
own range to read beside its siblings (reading in parallel is what loaders
are for); it waits, as before.

Each loader marks its slot while it reads a lease and clears it before it
takes the next, and leaves only when it sees a sibling's mark. The last
loader reading never leaves: a loader that left cleared its mark before it
looked at the others, so a sibling that looks later sees it gone. Marks
carry the pass (the DataLoader iterator's base seed), so that two live
iterators of one loader never count each other's loaders.
"""

from __future__ import annotations

import ctypes
import multiprocessing.context
import multiprocessing.sharedctypes
from typing import Iterable, Iterator

from .protocol import Lease

# Loaders per DataLoader with a slot; a loader past them never leaves.
SLOTS = 256
_NOT_READING = 0


class Siblings:
    """The marks of a DataLoader's loaders, in shared memory: made with the dataset, before its loaders start."""

    def __init__(self):
        self._marks = multiprocessing.sharedctypes.RawArray(ctypes.c_int64, SLOTS)

    def __getstate__(self):
        # Shared memory travels only to a process being started (torch's
        # spawned loaders); any other copy (a pickle, a deepcopy) gets none.
        spawning = multiprocessing.context.get_spawning_popen() is not None
        return {"_marks": self._marks if spawning else None}

    def loader(self, worker_id: int, seed: int) -> "Sibling | None":
        """Loader ``worker_id``'s side, from ``get_worker_info()``'s id and seed; None without a slot for it."""
        if self._marks is None or not 0 <= worker_id < SLOTS:
            return None
        # torch seeds each loader with the iterator's base seed plus its id.
        tag = (seed - worker_id) & 0x7FFF_FFFF_FFFF_FFFF or 1
        return Sibling(self._marks, worker_id, tag)


class Sibling:
    """One loader of a pass: marks the leases it reads, and says whether it may leave."""

    def __init__(self, marks, slot: int, tag: int):
        self._marks, self._slot, self._tag = marks, slot, tag
        self._read = 0  # leases it got in this pass

    def reading(self, leases: Iterable[Lease]) -> Iterator[Lease]:
        """``leases``, this loader marked as reading from each lease it gets until it asks for the next.

        Closed, it closes ``leases`` (a consumer that stops gives back what it holds).
        """
        try:
            for lease in leases:
                self._read += 1
                self._marks[self._slot] = self._tag
                yield lease
                self._marks[self._slot] = _NOT_READING  # before the next take
        finally:
            self._marks[self._slot] = _NOT_READING
            close = getattr(leases, "close", None)
            if close is not None:
                close()

    def may_leave(self) -> bool:
        """Whether this loader read a lease in this pass and another of the pass reads one now (this one is taking)."""
        self._marks[self._slot] = _NOT_READING
        if not self._read:
            return False
        return any(mark == self._tag for slot, mark in enumerate(self._marks) if slot != self._slot)
