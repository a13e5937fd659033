"""A DataLoader's loader process, with a board of worker_sdk.receipts: the records of each batch it collates, and its leases' acknowledgements.

The loader's dataset iterator notes every record it hands to the
DataLoader's fetcher (``LoaderReceipts.records``); the DataLoader's collate
function, wrapped (``Collate``), leaves out the records a split gave away
and tags the batch with the rest, which the loop's process claims as it
receives it. A range is acknowledged once the loop has it whole.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Iterable, Iterator, NamedTuple

from . import errors, lease_records
from .loader_board import OFFER_POLL, Board
from .protocol import Lease
from .receipts import DROPPED, SharedTracker, Tagged, encode
from .stream import Stream

log = logging.getLogger("worker_sdk")

_STOPPED = "the consumer stopped before receiving this item's last record"
_DROPPED_LAST = "the DataLoader dropped its last batch (drop_last): these records were never delivered"
# Seconds between the watcher's looks at what the loop received.
_WATCH_POLL = 0.01
_NOTHING = object()
_UNTRACKED_SLOT = -1


class _Produced(NamedTuple):
    tracker: SharedTracker | None  # None: a record claimed as produced (its lease found no slot)
    position: int
    last: bool


_UNTRACKED = _Produced(None, 0, False)


class LoaderReceipts:
    """One loader process's side: its leases' slots, the records it produced since its last batch, and its batches.

    ``batched``: the DataLoader collates lists of records (a batch size),
    not each record alone; ``drop_last``: it drops its last batch unless full.

    A lease read to its end is acknowledged once the loop received it whole:
    with the loader's next take if that comes first, or by a thread that
    watches the board (a loader reads the next lease meanwhile, and must not
    hold one the loop has finished while it does). A lease's slot is freed
    once the server answered for it: a loader killed before that leaves it
    to the loop's process to settle (``receipts.settle_orphans``).
    """

    def __init__(self, board: Board, loader: int, stream: Stream, batched: bool, drop_last: bool = False):
        self.board, self.loader, self.stream, self.batched = board, loader, stream, batched
        self.drop_last = drop_last
        self.pass_number = board.pass_number
        self._parent = os.getppid()
        self._produced: list[_Produced] = []  # records handed to the DataLoader's fetcher since the last batch
        # Under _lock (the loader's thread and its watchers), by slot: leases
        # not settled yet, those whose reader is done, and those settled
        # whose answer has not come (their slots stay taken until it does).
        self._lock = threading.Lock()
        self._reading: dict[int, SharedTracker] = {}
        self._read: set[int] = set()
        self._settled: dict[int, SharedTracker] = {}
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None

    def records(self, lease: Lease, records: Iterable) -> Iterator:
        """``records`` (a reader's output for ``lease``), each noted for the batch it goes into; the lease is acknowledged once received whole."""
        self._settle_received()
        ranged = lease.start is not None and lease.end is not None
        # A whole item is never split: acknowledged as its reader ends, it
        # rides the loader's next take, and the server learns the loader's
        # pace from it before leasing it more (a slow worker near the end
        # waits, services/leases.py).
        slot = self.board.take_slot(self.loader, lease) if ranged else None
        if slot is None:
            # Claimed as produced, as without a board.
            for record in lease_records.read(self.stream, lease, records):
                self._produced.append(_UNTRACKED)
                yield record
            return
        tracker = SharedTracker(self.board, self.loader, slot, lease)
        self.stream.leaser().track(lease, tracker)  # its heartbeat reports the loop's position and answers splits
        with self._lock:
            self._reading[slot] = tracker
        iterator = iter(records)
        position = tracker.start
        held = _NOTHING
        try:
            for record in iterator:
                if tracker.past_end(position):
                    break  # the rest of the range was split off, or given back
                if held is not _NOTHING:
                    self._produced.append(_Produced(tracker, position - 1, False))
                    yield held
                held = record
                position += 1
            with self._lock:
                mine = self._reading.get(slot) is tracker
                if mine and held is not _NOTHING:
                    self._read.add(slot)
            if not mine:
                return  # settled already: a batch of it failed to collate
            if held is _NOTHING:
                self._settle(slot)  # nothing in it to wait for
                return
            self._watch()
            self._produced.append(_Produced(tracker, position - 1, True))
            yield held
        except GeneratorExit:
            self.stop(_STOPPED)
            raise
        except Exception as exc:
            # The item goes back whole for another attempt, as a reader's
            # error does without a board; its batches on their way are dropped.
            if self._give_back([tracker], None):
                self.stream.settle(lease, f"{type(exc).__name__}: {exc}")
                self._free_answered()
            raise
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def _settle_received(self) -> list[Lease]:
        """Marks as consumed (for the stream's next take) the leases read to their end that the loop received whole."""
        self._free_answered()
        with self._lock:
            done = [slot for slot in self._read if self._reading[slot].received_whole()]
            leases = [self._settled_now(slot).lease for slot in done]
        for lease in leases:
            self.stream.consumed(lease)
        return leases

    def _settle(self, slot: int) -> None:
        with self._lock:
            lease = self._settled_now(slot).lease
        self.stream.consumed(lease)

    def _settled_now(self, slot: int) -> SharedTracker:
        """Under _lock: the slot's lease is settled here (its tracker reports and answers no more); its slot is freed once answered."""
        tracker = self._reading.pop(slot)
        self._read.discard(slot)
        self.stream.leaser().held.untrack(tracker.lease, tracker)
        self._settled[slot] = tracker
        return tracker

    def _free_answered(self, every: bool = False) -> None:
        """Frees the slots of settled leases the server answered for (``every``: all of them, as the loader ends)."""
        held = self.stream.leaser().held
        with self._lock:
            done = [slot for slot, tracker in self._settled.items() if every or held.answered_for(tracker.lease)]
            for slot in done:
                del self._settled[slot]
        for slot in done:
            self.board.free_slot(self.loader, slot)

    def _give_back(self, trackers: Iterable[SharedTracker], reason: str | None) -> bool:
        """Stops each range where the loop is: what it received is read, the rest goes back (``reason`` None: the caller settles them).

        False when none of them was still this loader's to settle.
        """
        decided = []
        with self._lock:
            for tracker in trackers:
                if self._reading.get(tracker.slot) is not tracker:
                    continue  # settled meanwhile (the watcher, or an earlier give-back)
                position, whole = tracker.give_back()
                decided.append((self._settled_now(tracker.slot).lease, position, whole))
        if reason is None:
            return bool(decided)
        for lease, position, whole in decided:
            if whole:
                self.stream.consumed(lease)
            else:
                self.stream.stop_at(lease, position, reason)
        self.stream.flush_consumed()
        self._free_answered()
        return bool(decided)

    def _watch(self) -> None:
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch_board, name="shardline-receipts", daemon=True)
            self._watcher.start()

    def _watch_board(self) -> None:
        while not self._closed.wait(_WATCH_POLL):
            self._acknowledge_received()

    def _acknowledge_received(self) -> None:
        try:
            if self._settle_received():
                self.stream.flush_consumed()  # unless the loader's take carried them first
        except errors.ShardlineError as exc:
            # Sent again with the loader's next take or request.
            log.warning("work queue %s: could not acknowledge what the loop received: %s", self.stream.name, exc)

    def _stop_watching(self) -> None:
        """The watcher ends, and what it acknowledged is sent before this returns (the process may exit next)."""
        self._closed.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()

    def finish(self) -> None:
        """The loader's leases ended: each is acknowledged once the loop has received its batches.

        A loop that stops before it receives them keeps what it received,
        and the rest goes back (``stop``). The fetcher collates its last
        batch once this returns: the leases with records in it are settled
        by a thread that the process's exit waits for (with drop_last, their
        records from there go back now instead: that batch is never sent).
        """
        while not self.board.closed_since(self.pass_number):
            with self._lock:
                waiting = [tracker for slot, tracker in self._reading.items() if slot in self._read]
            if all(tracker.collated_received() for tracker in waiting):
                break
            time.sleep(_WATCH_POLL)
        else:
            self.stop("the consumer stopped before receiving this item's last batches")
            return
        self._stop_watching()
        in_last_batch = {note.tracker.slot: note.tracker for note in self._produced if note.tracker is not None}
        if self.drop_last:
            self._produced = []
            self._give_back(in_last_batch.values(), _DROPPED_LAST)
        self._acknowledge_received()  # every other range was received whole
        with self._lock:
            left = bool(self._reading)
        if not left:
            self._free_answered(every=True)
            return
        # Not a daemon: the loader process's exit waits for it.
        threading.Thread(target=self._settle_last_batch, name="shardline-receipts-last").start()

    def _settle_last_batch(self) -> None:
        """Acknowledges the leases of the fetcher's last batch once the loop receives it; gives back what it did not, should it stop."""
        try:
            while True:
                with self._lock:
                    left = list(self._reading.values())
                if not left:
                    return
                if self.board.closed_since(self.pass_number) or os.getppid() != self._parent:
                    self._give_back(left, _STOPPED)
                    return
                self._acknowledge_received()
                time.sleep(_WATCH_POLL)
        except errors.ShardlineError as exc:
            log.warning("work queue %s: could not settle the last batch's leases: %s", self.stream.name, exc)
        finally:
            self._free_answered(every=True)

    def stop(self, reason: str) -> None:
        """The loop stopped: each lease keeps what the loop received, and the rest goes back."""
        self._stop_watching()
        with self._lock:
            reading = list(self._reading.values())
        try:
            self._give_back(reading, reason)
        finally:
            self._free_answered(every=True)

    def collate(self, data, collate_fn: Callable) -> Tagged:
        """The batch of what the fetcher gathered since the last one, its records past a cut left out, tagged with the rest."""
        produced, self._produced = self._produced, []
        records = list(data) if self.batched else [data]
        if len(records) != len(produced):
            raise RuntimeError(
                f"a batch of {len(records)} records where this loader produced {len(produced)}: "
                "WorkQueueLoader collates what its dataset yields since the last batch"
            )
        kept_records, kept = [], []
        with self._lock:  # not under the board's lock: _settle_received takes them in this order
            reading = dict(self._reading)
        while True:
            with self.board.locked(self.loader):
                verdicts = [
                    True if note.tracker is None else note.tracker.deliverable(note.position) for note in produced
                ]
                if None not in verdicts:
                    for record, note, verdict in zip(records, produced, verdicts):
                        if verdict:
                            kept_records.append(record)
                            kept.append(note)
                    claims = self._claims(kept, reading)
                    break
            time.sleep(OFFER_POLL)  # an offer to cut below one of them is on its way to the server
        if not kept:
            return Tagged(None, DROPPED)  # every record lay past a cut: the loop's process drops it
        try:
            batch = collate_fn(kept_records if self.batched else kept_records[0])
        except Exception as exc:
            # The loop never gets these records, and may go on past the
            # error: their ranges stop where the loop is, and the rest goes
            # back (their batches on the way are dropped).
            failed = {note.tracker.slot: note.tracker for note in kept if note.tracker is not None}
            self._give_back(
                failed.values(), f"the DataLoader's collate_fn raised {type(exc).__name__} on a batch of it"
            )
            raise
        return Tagged(batch, claims)

    def _claims(self, notes: list[_Produced], reading: dict[int, SharedTracker]) -> bytes:
        """The claims of a batch of ``notes`` (under the loader's lock), noting on each tracker where its part begins."""
        groups: list[list[int]] = []  # [loader, slot, lease, first, end, last]; slot -1: records claimed as produced
        for note in notes:
            tracker = note.tracker
            slot, lease = (_UNTRACKED_SLOT, _UNTRACKED_SLOT) if tracker is None else (tracker.slot, tracker.lease.id)
            if groups and groups[-1][1] == slot and groups[-1][2] == lease:
                groups[-1][4], groups[-1][5] = note.position + 1, int(note.last)
                continue
            groups.append([self.loader, slot, lease, note.position, note.position + 1, int(note.last)])
        for index, group in enumerate(groups):
            tracker = reading.get(group[1])
            if tracker is not None and tracker.lease.id == group[2]:
                tracker.collated(group[3], group[4], begins_batch=index == 0, others_after=index < len(groups) - 1)
        return encode([tuple(group) for group in groups if group[1] != _UNTRACKED_SLOT])


class Collate:
    """The DataLoader's collate function in a loader process with a board: the batch, tagged (``LoaderReceipts.collate``)."""

    def __init__(self, collate_fn: Callable):
        self.collate_fn = collate_fn

    def __call__(self, data):
        receipts = current()
        if receipts is None:
            return self.collate_fn(data)
        return receipts.collate(data, self.collate_fn)


_current = threading.local()


def adopt(receipts: LoaderReceipts | None) -> None:
    """The loader's receipts, for its collate function (the same thread as its dataset's iterator)."""
    _current.value = receipts


def current() -> LoaderReceipts | None:
    return getattr(_current, "value", None)
