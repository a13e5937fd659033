"""A DataLoader's loader process, with a board of worker_sdk.receipts: the records of each batch it collates, and its leases' acknowledgements.

The loader's dataset iterator notes every record it hands to the
DataLoader's fetcher (``LoaderReceipts.records``); the DataLoader's collate
function, wrapped (``Collate``), leaves out the records a split gave away
and tags the batch with the rest, which the loop's process claims as it
receives it. A range is acknowledged once the loop has it whole.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable, Iterator, NamedTuple

from . import errors
from .protocol import Lease
from .receipts import DROPPED, OFFER_POLL, Board, SharedTracker, Tagged, encode
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
    hold one the loop has finished while it does).
    """

    def __init__(self, board: Board, loader: int, stream: Stream, batched: bool, drop_last: bool = False):
        self.board, self.loader, self.stream, self.batched = board, loader, stream, batched
        self.drop_last = drop_last
        self._produced: list[_Produced] = []  # records handed to the DataLoader's fetcher since the last batch
        # Under _lock (the loader's thread and the watcher): by slot, leases
        # the loop has not received whole; slots whose reader is done.
        self._lock = threading.Lock()
        self._reading: dict[int, SharedTracker] = {}
        self._read: set[int] = set()
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
            for record in self.stream.records(lease, records):
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
                    break  # the rest of the range was split off
                if held is not _NOTHING:
                    self._produced.append(_Produced(tracker, position - 1, False))
                    yield held
                held = record
                position += 1
            if held is _NOTHING:
                self._settle(slot)  # nothing in it to wait for
                return
            with self._lock:
                self._read.add(slot)
            self._watch()
            self._produced.append(_Produced(tracker, position - 1, True))
            yield held
        except GeneratorExit:
            self.stop(_STOPPED)
            raise
        except Exception as exc:
            with self._lock:
                self._forget(slot)
            self.stream.settle(lease, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def _settle_received(self) -> list[Lease]:
        """Marks as consumed (for the stream's next take) the leases read to their end that the loop received whole."""
        with self._lock:
            done = [slot for slot in self._read if self._reading[slot].received_whole()]
            leases = [self._forget(slot).lease for slot in done]
        for lease in leases:
            self.stream.consumed(lease)
        return leases

    def _settle(self, slot: int) -> None:
        with self._lock:
            lease = self._forget(slot).lease
        self.stream.consumed(lease)

    def _watch(self) -> None:
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch_board, name="shardline-receipts", daemon=True)
            self._watcher.start()

    def _watch_board(self) -> None:
        while not self._closed.wait(_WATCH_POLL):
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
        """The loader's leases ended: acknowledged once the loop has received their batches on the way.

        A loop that stops before it receives them keeps what it received,
        and the rest goes back (``stop``). The fetcher's last batch, which it
        collates once this loader's records end, is acknowledged unreceived
        (with drop_last, its records go back instead): no take would carry
        it later. Slots stay taken, so that the loop's process delivers
        what is on its way, until the board's next pass.
        """
        while not self.board.closed:
            with self._lock:
                waiting = [tracker for slot, tracker in self._reading.items() if slot in self._read]
            if all(tracker.collated_received() for tracker in waiting):
                break
            time.sleep(_WATCH_POLL)
        else:
            self.stop("the consumer stopped before receiving this item's last batches")
            return
        self._stop_watching()
        with self._lock:
            trackers = [self._reading.pop(slot) for slot in list(self._read)]
            self._read.clear()
        # With drop_last, the fetcher drops its last batch unless it is full:
        # those records are never delivered, and their ranges end before them.
        # Otherwise it is collated after this, and delivered.
        dropped: dict[int, int] = {}
        if self.drop_last:
            for note in self._produced:
                if note.tracker is not None:
                    dropped.setdefault(note.tracker.slot, note.position)
            self._produced = []
        for tracker in trackers:
            self.board.acknowledged(self.loader, tracker.slot)
            self.stream.leaser().held.untrack(tracker.lease, tracker)
            if tracker.slot in dropped:
                # Untracked first: the batches before the point are still on their way.
                self.stream.stop_at(tracker.lease, dropped[tracker.slot], _DROPPED_LAST)
            else:
                self.stream.consumed(tracker.lease)
        self.stream.flush_consumed()

    def stop(self, reason: str) -> None:
        """The loop stopped: each lease keeps what the loop received, and the rest goes back."""
        self._stop_watching()
        with self._lock:
            # Read before the slots are freed: a freed slot is no tracker's.
            received = [(tracker, tracker.received_whole(), tracker.position) for tracker in self._reading.values()]
            for slot in list(self._reading):
                self._forget(slot)
        for tracker, whole, position in received:
            if whole:
                self.stream.consumed(tracker.lease)
            else:
                self.stream.stop_at(tracker.lease, position, reason)
        self.stream.flush_consumed()

    def _forget(self, slot: int) -> SharedTracker:
        """Under _lock: the slot's lease is done here (its tracker reports and answers no more)."""
        tracker = self._reading.pop(slot)
        self._read.discard(slot)
        self.stream.leaser().held.untrack(tracker.lease, tracker)
        self.board.free_slot(self.loader, slot)
        return tracker

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
        with self._lock:  # not under the board's lock: _forget takes them in this order
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
        return Tagged(collate_fn(kept_records if self.batched else kept_records[0]), claims)

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
