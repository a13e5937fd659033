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
from typing import Iterable, NamedTuple

from . import errors
from .loader_board import CUT, END, LAST, NEXT, NONE, START, STOP, Board
from .protocol import Lease
from .sync import HandedLeases

log = logging.getLogger("worker_sdk")

_LOADER_DIED = "the loader process reading it died before the loop received any of it"


class Tagged(NamedTuple):
    """A batch on its way from a loader to the loop, with the records it holds.

    ``claims``: int64 groups of (loader, slot, lease id, first position,
    end position, last) as bytes, which torch's pin_memory passes unchanged.
    """

    batch: object
    claims: bytes


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
        self.start = board.get(loader, slot, START)
        # Under the loader's lock: where collated batches on their way begin
        # with a record of this range (the points a split may cut at below
        # the frontier), the first record not collated yet, and whether its
        # last batch holds another lease's records too.
        self._starts: list[int] = []
        self._frontier = self.start
        self._mixed_tail = False
        end = board.get(loader, slot, END)
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
            self._get(NEXT),
            self._get(END),
            self.board.end_of(self.loader, self.slot),
            bool(self._get(LAST)),
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
            if not self._holds() or self._get(CUT) != NONE or self._mixed_tail or self._get(STOP) != NONE:
                return None
            end = self._get(END)
            point = max(at, self._get(NEXT))
            points = [start for start in self._starts if start >= point]
            point = points[0] if points else max(point, self._frontier)
            fewest = max(1, min(min_records, (end - at + 1) // 2))
            if point > end - fewest or point <= self.start:
                return None
            self._set(CUT, point)
            return point

    def settle_split(self, accepted: bool) -> None:
        with self.board.locked(self.loader):
            if not self._holds():
                return
            cut = self._get(CUT)
            if accepted and cut != NONE:
                self._set(END, min(self._get(END), cut))
            self._set(CUT, NONE)

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
                self._set(STOP, self._get(NEXT))
                self._set(CUT, NONE)
                self._holds()
            return self._seen[0], whole

    # Called by the loader's collate function, under the loader's lock.
    def deliverable(self, position: int) -> bool | None:
        """Whether record ``position`` may go into a batch being collated; None: an offer below it is on its way."""
        if not self._holds():
            return False  # its slot was freed: the loop received the range whole, and this lies past its end
        cut = self._get(CUT)
        if cut != NONE and position >= cut:
            return None
        return position < self._seen[2]

    def collated(self, first: int, end: int, begins_batch: bool, others_after: bool) -> None:
        if not self._holds():
            return
        next_received = self._get(NEXT)
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
