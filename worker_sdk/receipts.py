"""What a DataLoader's training loop received from its loader processes: claims follow consumption there too.

A loader process reads ahead of the loop: ``prefetch_factor`` batches sit
collated in the DataLoader's queue, and a loader that claimed each record as
it produced it held a slow worker's next batches for seconds where a split
could not cut (bench/RESULTS.md). With a ``Board`` (``WorkQueueLoader`` makes
one before its loaders start), a record counts as read when the loop's
process receives its batch:

- each loader tracks its leases' ranges in slots of the board, in shared
  memory: the loop's process claims the records of every batch it receives
  there (``Board.receive``), the loader's heartbeat reports that position
  and answers splits from it (``SharedTracker``);
- a loader tags each batch with the records in it (worker_sdk.loader_receipts,
  wrapping the DataLoader's collate function in the loader: it alone knows
  which records the batch holds);
- a split may cut below what the loader produced, at the start of a batch
  still on its way (a collated batch cannot lose some of its records), and
  such batches are dropped when they arrive, never delivered; records past
  the cut that are not collated yet are left out of their batch. The
  remainder's new holder reads them all;
- a loader acknowledges a lease once the loop received it whole, and one
  whose loop stops mid-range gives back only what the loop did not receive
  (``Stream.stop_at``); it frees the lease's slot once the server answered,
  so that a loader killed before that is settled by the loop's process
  (``settle_orphans``), from the range the server knows.

A batch holding the last records of one lease and the first of the next can
be neither dropped nor delivered in part: a range whose last batch is such a
batch is not split below it (the split is refused, as for a range read to
its end).
"""

from __future__ import annotations

import array
import logging
import os
import time
from contextlib import contextmanager
from typing import Iterable, Iterator, NamedTuple

from . import errors
from .protocol import Lease
from .sync import HandedLeases

log = logging.getLogger("worker_sdk")

# Leases one loader may have on their way to the loop at once; a lease that
# finds none free is read as without a board (claimed as produced).
SLOTS = 8
# A slot's fields (int64 each). _END is the range's end as the server has
# it (after the splits it accepted); _STOP, where the loader stopped it
# (its give-back may not have reached the server yet).
_LEASE, _START, _END, _NEXT, _CUT, _LAST, _TOKEN, _STOP = range(8)
_FIELDS = 8
_NONE = -1
# Seconds between looks at an offer to split that is still on its way to
# the server (the heartbeat settles it within a round trip).
OFFER_POLL = 0.005
# Seconds a loader's lock may be awaited before its process is looked at.
_LOCK_PATIENCE = 0.5
_LOADER_DIED = "the loader process reading it died before the loop received any of it"


class Tagged(NamedTuple):
    """A batch on its way from a loader to the loop, with the records it holds.

    ``claims``: int64 groups of (loader, slot, lease id, first position,
    end position, last) as bytes, which torch's pin_memory passes unchanged.
    """

    batch: object
    claims: bytes


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
        self._values = context.RawArray("q", loaders * SLOTS * _FIELDS)
        self._pids = context.RawArray("q", loaders)  # each loader's process, written when it starts reading
        self._locks = [context.Lock() for _ in range(loaders)]
        self._closed = context.RawValue("i", 0)  # the loop's process is done with this pass's batches
        self._pass = context.RawValue("q", 0)
        for offset in range(0, len(self._values), _FIELDS):
            self._values[offset + _LEASE] = _NONE

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
        return (loader * SLOTS + slot) * _FIELDS

    def get(self, loader: int, slot: int, field: int) -> int:
        return self._values[self._at(loader, slot) + field]

    def set(self, loader: int, slot: int, field: int, value: int) -> None:
        self._values[self._at(loader, slot) + field] = value

    def holds(self, loader: int, slot: int, lease: Lease) -> bool:
        """Under the loader's lock: whether the slot still holds ``lease`` (not a newer lease, nor the item leased again)."""
        return self.get(loader, slot, _LEASE) == lease.id and self.get(loader, slot, _TOKEN) == lease.token

    def take_slot(self, loader: int, lease: Lease) -> int | None:
        """A free slot of ``loader`` for ``lease``, a record range; None when all are in use."""
        with self.locked(loader):
            for slot in range(SLOTS):
                if self.get(loader, slot, _LEASE) == _NONE:
                    for field, value in (
                        (_LEASE, lease.id),
                        (_START, lease.start),
                        (_END, lease.end),
                        (_NEXT, lease.start),
                        (_CUT, _NONE),
                        (_LAST, 0),
                        (_TOKEN, lease.token),
                        (_STOP, _NONE),
                    ):
                        self.set(loader, slot, field, value)
                    return slot
        return None

    def free_slot(self, loader: int, slot: int) -> None:
        """The loader is done with the slot's lease: the server answered for it (or it was lost)."""
        with self.locked(loader):
            self.set(loader, slot, _LEASE, _NONE)

    def end_of(self, loader: int, slot: int) -> int:
        """Under the loader's lock: the first record of the slot's range not to be delivered (its end, or where it stopped)."""
        stop = self.get(loader, slot, _STOP)
        end = self.get(loader, slot, _END)
        return end if stop == _NONE else min(end, stop)

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
                if self.get(loader, slot, _LEASE) == _NONE:
                    continue
                found.append(
                    Orphan(*(self.get(loader, slot, field) for field in (_LEASE, _TOKEN, _START, _NEXT, _END)))
                )
                self.set(loader, slot, _LEASE, _NONE)
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
            cut = self.get(loader, slot, _CUT)
            if cut != _NONE and cut < end and self.get(loader, slot, _LEASE) == lease_id:
                return None
        keep = drop = False
        for offset in range(0, len(groups), 6):
            loader, slot, lease_id, first, end, last = groups[offset : offset + 6]
            if self.get(loader, slot, _LEASE) != lease_id or first >= self.end_of(loader, slot):
                drop = True  # split off (or the lease was lost): another worker reads these
                continue
            keep = True
            self.set(loader, slot, _NEXT, max(self.get(loader, slot, _NEXT), end))
            if last:
                self.set(loader, slot, _LAST, 1)
        # A batch is cut only where it begins (SharedTracker.try_split), so it
        # is kept or dropped whole; kept if it ever were not, since dropping
        # would lose the records claimed with it.
        return keep or not drop


class SharedTracker:
    """A loader's tracker of one lease's range in a board slot (worker_sdk.tracker's interface for the heartbeat).

    The loop's process claims (``Board.receive``); the loader's heartbeat
    reports ``position`` and answers splits here; the loader notes each
    batch it collates (``collated``). Once its slot holds another lease (the
    loader was done with this one and read on), it answers from what it last
    saw and changes nothing: a heartbeat may still hold it.
    """

    def __init__(self, board: Board, loader: int, slot: int, lease: Lease):
        self.board, self.loader, self.slot, self.lease = board, loader, slot, lease
        self.start = board.get(loader, slot, _START)
        # Under the loader's lock: where collated batches on their way begin
        # with a record of this range (the points a split may cut at below
        # the frontier), the first record not collated yet, and whether its
        # last batch holds another lease's records too.
        self._starts: list[int] = []
        self._frontier = self.start
        self._mixed_tail = False
        end = board.get(loader, slot, _END)
        # (position, the server's end, the end to deliver, last received) when it last held its slot.
        self._seen = (self.start, end, end, False)

    def _get(self, field: int) -> int:
        return self.board.get(self.loader, self.slot, field)

    def _set(self, field: int, value: int) -> None:
        self.board.set(self.loader, self.slot, field, value)

    def _holds(self) -> bool:
        """Under the loader's lock."""
        if not self.board.holds(self.loader, self.slot, self.lease):
            return False
        self._seen = (
            self._get(_NEXT),
            self._get(_END),
            self.board.end_of(self.loader, self.slot),
            bool(self._get(_LAST)),
        )
        return True

    def _received_whole(self) -> bool:
        """Under the loader's lock, after ``_holds``."""
        position, _end, delivered_end, last = self._seen
        return last or position >= delivered_end

    @property
    def position(self) -> int:
        """The next record the loop has not received."""
        with self.board.locked(self.loader):
            self._holds()
            return self._seen[0]

    @property
    def end(self) -> int:
        """The range's end as the server has it."""
        with self.board.locked(self.loader):
            self._holds()
            return self._seen[1]

    def received_whole(self) -> bool:
        """Whether the loop received every record of the range it is to get (up to a cut, or where it stopped)."""
        with self.board.locked(self.loader):
            self._holds()
            return self._received_whole()

    def collated_received(self) -> bool:
        """Whether the loop received every batch of the range collated so far."""
        with self.board.locked(self.loader):
            if not self._holds():
                return self._received_whole()
            return self._seen[3] or self._seen[0] >= min(self._frontier, self._seen[2])

    def past_end(self, position: int) -> bool:
        """Whether record ``position`` is not to be delivered (split off, or the range stopped): the loader reads no further."""
        with self.board.locked(self.loader):
            return not self._holds() or position >= self._seen[2]

    def try_split(self, at: int, min_records: int = 1) -> int | None:
        """Offers to stop at the first point at or after ``at`` and the loop's position where no batch on its way straddles.

        ``RangeTracker.try_split``'s rule for too little left.
        """
        with self.board.locked(self.loader):
            if not self._holds() or self._get(_CUT) != _NONE or self._mixed_tail or self._get(_STOP) != _NONE:
                return None
            end = self._get(_END)
            point = max(at, self._get(_NEXT))
            points = [start for start in self._starts if start >= point]
            point = points[0] if points else max(point, self._frontier)
            fewest = max(1, min(min_records, end - at))
            if point > end - fewest or point <= self.start:
                return None
            self._set(_CUT, point)
            return point

    def settle_split(self, accepted: bool) -> None:
        with self.board.locked(self.loader):
            if not self._holds():
                return
            cut = self._get(_CUT)
            if accepted and cut != _NONE:
                self._set(_END, min(self._get(_END), cut))
            self._set(_CUT, _NONE)

    def stop(self) -> None:
        """The lease was lost, or its loop stopped: nothing more of it is delivered."""
        self.give_back()

    def give_back(self) -> tuple[int, bool]:
        """Stops the range where the loop is (later batches of it are dropped): (that position, whether it received the range whole).

        The server's end stays as it is until the give-back reaches it: a
        dead loader's lease is settled from it (``Board.orphans``).
        """
        with self.board.locked(self.loader):
            if not self._holds():
                return self._seen[0], self._received_whole()
            whole = self._received_whole()
            if not whole:
                self._set(_STOP, self._get(_NEXT))
                self._set(_CUT, _NONE)
                self._holds()
            return self._seen[0], whole

    # Called by the loader's collate function, under the loader's lock.
    def deliverable(self, position: int) -> bool | None:
        """Whether record ``position`` may go into a batch being collated; None: an offer below it is on its way."""
        if not self._holds():
            return False  # its slot was freed: the loop received the range whole, and this lies past its end
        cut = self._get(_CUT)
        if cut != _NONE and position >= cut:
            return None
        return position < self._seen[2]

    def collated(self, first: int, end: int, begins_batch: bool, others_after: bool) -> None:
        if not self._holds():
            return
        next_received = self._get(_NEXT)
        self._starts = [start for start in self._starts if start >= next_received]
        if begins_batch:
            self._starts.append(first)
        self._frontier = max(self._frontier, end)
        self._mixed_tail = self._mixed_tail or others_after


def encode(claims: Iterable[tuple[int, int, int, int, int, int]]) -> bytes:
    """A batch's claims as ``Tagged.claims``: (loader, slot, lease id, first, end, last) each."""
    return array.array("q", [value for claim in claims for value in claim]).tobytes()


# A batch whose every record lay past a cut.
DROPPED = b"dropped"


class Received:
    """The loop's process: each batch its loaders tagged, claimed on the board; those past a cut are dropped.

    However the loop ends, the leases of loaders that died are settled here
    with what the loop received (``settle_orphans``): at the end, when the
    loop closes this, and at each error of the DataLoader (a killed loader's
    included). Not a generator: a loop may catch a DataLoader's error (a
    collate_fn that raised) and read on.
    """

    _closed = True  # until __init__ has its iterator

    def __init__(self, batches: Iterable, board: Board, handed: HandedLeases):
        self._batches = iter(batches)
        self.board, self.handed = board, handed
        self._closed = False

    def __iter__(self) -> "Received":
        return self

    def __next__(self):
        while not self._closed:
            try:
                tagged = next(self._batches)
            except StopIteration:
                self.close()
                raise
            except BaseException:
                settle_orphans(self.board, self.handed)
                raise
            if not isinstance(tagged, Tagged):
                return tagged
            if tagged.claims == DROPPED:
                continue
            if not tagged.claims or self.board.receive(tagged.claims):
                return tagged.batch
        raise StopIteration

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self._batches, "close", None)
            if close is not None:
                close()
        finally:
            self.board.close()
            settle_orphans(self.board, self.handed)

    def __del__(self):
        self.close()


def settle_orphans(board: Board, handed: HandedLeases) -> None:
    """A dead loader's leases: what the loop received is read, the rest goes back to the queue."""
    for orphan in board.orphans():
        try:
            if orphan.received >= orphan.end:
                handed.complete(orphan.lease_id, orphan.token)
            elif orphan.received > orphan.start:
                handed.cut(orphan.lease_id, orphan.token, orphan.received)
                handed.complete(orphan.lease_id, orphan.token)
            else:
                handed.release(orphan.lease_id, orphan.token, _LOADER_DIED)
        except errors.LeaseLostError:
            pass  # the server took it back first (its holder's heartbeat dropped a while ago)
        except errors.ShardlineError as exc:
            log.warning("lease %s of a loader that died: could not settle it: %s", orphan.lease_id, exc)
