"""The board of a DataLoader's loaders: each loader's leases in flight to the loop, in shared memory.

One slot per lease a loader has on its way to the loop (worker_sdk.receipts
says what the fields mean to a loader and to the loop's process), each
loader's slots under a lock of its own, and the facts about a loader's
process the loop's process needs: whether it is alive, and the leases of one
that died (``orphans``).
"""

from __future__ import annotations

import array
import os
import time
from contextlib import contextmanager
from typing import Iterator, NamedTuple

from .protocol import Lease

# Leases one loader may have on their way to the loop at once; a lease that
# finds none free is read as without a board (claimed as produced).
SLOTS = 8
# A slot's fields (int64 each). END is the range's end as the server has
# it (after the splits it accepted); STOP, where the loader stopped it
# (its give-back may not have reached the server yet).
LEASE, START, END, NEXT, CUT, LAST, TOKEN, STOP = range(8)
FIELDS = 8
NONE = -1
# Seconds between looks at an offer to split that is still on its way to
# the server (the heartbeat settles it within a round trip).
OFFER_POLL = 0.005
# Seconds a loader's lock may be awaited before its process is looked at.
_LOCK_PATIENCE = 0.5


class Orphan(NamedTuple):
    """A lease of a dead loader: its record range, and the position the loop received."""

    lease_id: int
    token: int
    start: int
    received: int
    end: int


class LoaderGone(Exception):
    """A loader's lock could not be taken and its process is gone (it died holding it, or in the middle)."""


class Board:
    """The slots of every loader of one DataLoader, in shared memory, each loader's under a lock of its own.

    Plain locks, and waits that poll: a multiprocessing Condition's notify
    waits for every sleeper to wake, and a loader killed while it slept
    there (a SIGKILL, torch terminating a loader that did not stop in time)
    would hang the next notify for good. A loader killed while it holds its
    lock is found by the loop's process when the lock does not come:
    ``locked`` raises LoaderGone once that loader's process is gone.
    """

    def __init__(self, loaders: int, context):
        self.loaders = loaders
        self._values = context.RawArray("q", loaders * SLOTS * FIELDS)
        self._pids = context.RawArray("q", loaders)  # each loader's process, written when it starts reading
        self._locks = [context.Lock() for _ in range(loaders)]
        self._closed = context.RawValue("i", 0)  # the loop's process is done with this pass's batches
        self._pass = context.RawValue("q", 0)
        for offset in range(0, len(self._values), FIELDS):
            self._values[offset + LEASE] = NONE

    def started(self, loader: int) -> None:
        """Called in the loader's process."""
        self._pids[loader] = os.getpid()

    def alive(self, loader: int) -> bool:
        """Whether the loader's process runs (a killed loader of a DataLoader is a zombie until it is joined)."""
        pid = self._pids[loader]
        if not pid:
            return True  # not started yet
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except FileNotFoundError:
            return False
        except OSError:  # no /proc: ask the kernel
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            return True

    @contextmanager
    def locked(self, loader: int) -> Iterator[None]:
        """Holds ``loader``'s lock; LoaderGone when it does not come and the loader's process is gone."""
        lock = self._locks[loader]
        while not lock.acquire(timeout=_LOCK_PATIENCE):
            if not self.alive(loader):
                raise LoaderGone(loader)
        try:
            yield
        finally:
            lock.release()

    def close(self) -> None:
        """The loop's process: this pass's batches are done with (their end, or the loop stopped)."""
        self._closed.value = 1

    @property
    def pass_number(self) -> int:
        """The loop's pass the loaders read for now (persistent loaders read every pass of one board)."""
        return self._pass.value

    def closed_since(self, pass_number: int) -> bool:
        """Whether the loop's process is done with the batches of pass ``pass_number``."""
        return bool(self._closed.value) or self._pass.value != pass_number

    def reset(self) -> None:
        """A new pass of the loop (persistent loaders, one board).

        Slots stay as they are: a loader of the last pass may still be
        settling its last leases (``LoaderReceipts.finish``), and frees them
        itself once the server has its answer.
        """
        self._pass.value += 1
        self._closed.value = 0
        for loader in range(self.loaders):
            self._pids[loader] = 0

    def _at(self, loader: int, slot: int) -> int:
        return (loader * SLOTS + slot) * FIELDS

    def get(self, loader: int, slot: int, field: int) -> int:
        return self._values[self._at(loader, slot) + field]

    def set(self, loader: int, slot: int, field: int, value: int) -> None:
        self._values[self._at(loader, slot) + field] = value

    def holds(self, loader: int, slot: int, lease: Lease) -> bool:
        """Under the loader's lock: whether the slot still holds ``lease`` (not a newer lease, nor the item leased again)."""
        return self.get(loader, slot, LEASE) == lease.id and self.get(loader, slot, TOKEN) == lease.token

    def take_slot(self, loader: int, lease: Lease) -> int | None:
        """A free slot of ``loader`` for ``lease``, a record range; None when all are in use."""
        with self.locked(loader):
            for slot in range(SLOTS):
                if self.get(loader, slot, LEASE) == NONE:
                    for field, value in (
                        (LEASE, lease.id),
                        (START, lease.start),
                        (END, lease.end),
                        (NEXT, lease.start),
                        (CUT, NONE),
                        (LAST, 0),
                        (TOKEN, lease.token),
                        (STOP, NONE),
                    ):
                        self.set(loader, slot, field, value)
                    return slot
        return None

    def free_slot(self, loader: int, slot: int) -> None:
        """The loader is done with the slot's lease: the server answered for it (or it was lost)."""
        with self.locked(loader):
            self.set(loader, slot, LEASE, NONE)

    def end_of(self, loader: int, slot: int) -> int:
        """Under the loader's lock: the first record of the slot's range not to be delivered (its end, or where it stopped)."""
        stop = self.get(loader, slot, STOP)
        end = self.get(loader, slot, END)
        return end if stop == NONE else min(end, stop)

    def orphans(self) -> list[Orphan]:
        """The leases of loaders whose process is gone, with what the loop received; their slots freed.

        A DataLoader's loader killed mid-read (the loop's process then gets
        an error from the DataLoader) leaves its leases to the server, which
        would take them back from the position its heartbeat last reported:
        what the loop received since would be read again. A loader frees a
        slot only once the server answered for its lease, so one killed
        while its acknowledgement was on its way is found here too (settling
        it again is refused as lost, or repeats the same cut).
        """
        found = []
        for loader in range(self.loaders):
            if self.alive(loader):
                continue
            # Its process is gone: no one else writes its slots, with its lock or without.
            for slot in range(SLOTS):
                if self.get(loader, slot, LEASE) == NONE:
                    continue
                found.append(Orphan(*(self.get(loader, slot, field) for field in (LEASE, TOKEN, START, NEXT, END))))
                self.set(loader, slot, LEASE, NONE)
        return found

    def receive(self, claims: bytes) -> bool:
        """The loop's process received a batch: claims its records; False when the batch is to be dropped.

        A batch is dropped when its records lie past a cut made after it was
        collated (they went to another worker). It waits while an offer to
        cut below its end is on its way to the server, unless the loader that
        made the offer died: the batch is dropped, and the loader's leases
        are settled with what the loop received (``settle_orphans``).
        """
        groups = array.array("q", claims)
        loader = groups[0]  # a batch is one loader's
        while True:
            try:
                with self.locked(loader):
                    verdict = self._claim(groups)
            except LoaderGone:
                return False
            if verdict is not None:
                return verdict
            if not self.alive(loader):
                return False
            time.sleep(OFFER_POLL)

    def _claim(self, groups: array.array) -> bool | None:
        """Under the loader's lock: claims the batch (True), drops it (False), or None while an offer below its end is on its way."""
        for offset in range(0, len(groups), 6):
            loader, slot, lease_id, _first, end, _last = groups[offset : offset + 6]
            cut = self.get(loader, slot, CUT)
            if cut != NONE and cut < end and self.get(loader, slot, LEASE) == lease_id:
                return None
        keep = drop = False
        for offset in range(0, len(groups), 6):
            loader, slot, lease_id, first, end, last = groups[offset : offset + 6]
            if self.get(loader, slot, LEASE) != lease_id or first >= self.end_of(loader, slot):
                drop = True  # split off (or the lease was lost): another worker reads these
                continue
            keep = True
            self.set(loader, slot, NEXT, max(self.get(loader, slot, NEXT), end))
            if last:
                self.set(loader, slot, LAST, 1)
        # A batch is cut only where it begins (SharedTracker.try_split), so it
        # is kept or dropped whole; kept if it ever were not, since dropping
        # would lose the records claimed with it.
        return keep or not drop
