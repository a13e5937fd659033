"""A range tracker: which records of a leased record range its reader has claimed, and where a split may cut it.

The liquid tail (the server's services/splits.py) splits the unread records
of a lease off to an idle worker. The reader and the server meet here: the
reader claims every record before it reads it (``try_claim``), the leaser's
heartbeat reports ``position`` (the next record to claim) and answers a
split asked of the lease with ``try_split``: the point asked, or the next
unclaimed record if the reader is already past it. Until the server has
acknowledged that answer, the reader may claim records before the point and
waits at the point itself; then the cut stands (``settle_split(True)``: the
range ends there) or is undone (``settle_split(False)``: read on to the old
end). So no record is read on both sides of a cut, and none is left unread.
"""

from __future__ import annotations

import threading
from typing import Iterable

from .protocol import Lease


class RangeTracker:
    """Records ``[start, end)`` of one lease; ``end`` only ever shrinks, by a split."""

    def __init__(self, start: int, end: int):
        self.start = start
        self.end = end
        self._next = start
        self._cut: int | None = None
        # Claimed once per record on the training thread: a plain lock's
        # ``with`` is C, a Condition's is Python (2.5x the cost per claim).
        self._mutex = threading.Lock()
        self._changed = threading.Condition(self._mutex)  # an offer to split was settled, or the range stopped

    @property
    def position(self) -> int:
        """The next record to claim: every record in ``[start, position)`` is claimed."""
        return self._next

    def try_claim(self, position: int) -> bool:
        """Claims record ``position`` (records are claimed in order); False once it lies past the range's end."""
        with self._mutex:
            while self._cut is not None and position >= self._cut:
                self._changed.wait()
            if position >= self.end:
                return False
            self._next = position + 1
            return True

    def try_split(self, at: int, min_records: int = 1) -> int | None:
        """Offers to stop at ``at`` (or the next unclaimed record, if later); None when too little is left.

        Too little is fewer than ``min_records``, or, for a point asked
        closer to the end than twice that (the server plans by time, and a
        slow reader's records are worth splitting off a few at a time), less
        than half of what was asked. The point is the server's estimate of
        where the reader will be: a reader of a short range that had gone a
        few records past it refused when less than all was left, and at 10x
        slices (15 records) no split was cut (bench/RESULTS.md). The offer
        holds claims at and past the point until ``settle_split``.
        """
        with self._mutex:
            if self._cut is not None:
                return None
            point = max(at, self._next)
            fewest = max(1, min(min_records, (self.end - at + 1) // 2))
            if point > self.end - fewest or point <= self.start:
                return None
            self._cut = point
            return point

    def settle_split(self, accepted: bool) -> None:
        """The server's answer to the offer: the range ends at the point, or reads on as before."""
        with self._mutex:
            if accepted and self._cut is not None:
                self.end = self._cut
            self._cut = None
            self._changed.notify_all()

    def stop(self) -> None:
        """The lease was lost: claim nothing more."""
        with self._mutex:
            self.end = min(self.end, self._next)
            self._cut = None
            self._changed.notify_all()


class Budget:
    """How many records a consumer may still claim (a synchronous rank's quota for one epoch)."""

    def __init__(self, records: int):
        self.left = records
        # A claim and its count here are one step for ``free``, which a
        # take ahead sizes itself by while the consumer claims on.
        self._lock = threading.Lock()

    def claim(self, tracker: RangeTracker, position: int) -> bool:
        """``tracker.try_claim(position)``, counted here when it succeeds."""
        with self._lock:
            if not tracker.try_claim(position):
                return False
            self.left -= 1
            return True

    def free(self, held: Iterable[tuple[Lease, RangeTracker | None]]) -> int:
        """The records a take may still lease: those left, less those of ``held`` leases not claimed yet.

        ``held``: each lease with the tracker of its reader, or None when
        nothing of it is read yet (taken ahead).
        """
        with self._lock:
            unclaimed = 0
            for lease, tracker in held:
                if tracker is not None:
                    unclaimed += tracker.end - tracker.position
                elif lease.start is not None and lease.end is not None:
                    unclaimed += lease.end - lease.start
            return self.left - unclaimed
