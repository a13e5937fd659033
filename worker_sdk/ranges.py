"""Leased items for readers of one's own: the position API of the liquid tail.

``WorkQueue.ranges()`` yields one ``WorkRange`` per leased item. A reader
that claims each record before using it lets the server split the unread
rest of its range off to an idle worker (server/services/splits.py):

    for work in queue.ranges():
        for position, row in enumerate(my_reader(work.path, work.start, work.end), start=work.start):
            if not work.try_claim(position):
                break  # the rest of the range went to another worker
            train_on(row)

or, with the SDK's readers (lines, TFRecord, Parquet), ``work.records()``.
A work that is not a record range (a file read whole) cannot be split: every
claim succeeds. Each item is acknowledged when the next one is asked for,
and the next is leased ahead while the loop reads one (``WorkQueue(look_ahead=1)``).
"""

from __future__ import annotations

from contextlib import closing
from typing import Callable, Iterable, Iterator

from . import formats, look_ahead, readers, stall
from .protocol import Lease
from .stream import Stream
from .tracker import RangeTracker

_END = object()


class WorkRange:
    """One leased item: its string, file, record range and where to seek; claim records with ``try_claim``."""

    def __init__(self, stream: Stream, lease: Lease):
        self.lease = lease
        self.item = lease.item
        self.path = formats.parse(lease.item).path
        self.start = lease.start
        self.offset = lease.offset
        self.seek = lease.seek
        self._stream = stream
        self._tracker: RangeTracker | None = None

    @property
    def end(self) -> int | None:
        """One past the range's last record: lowered when a split hands the rest to another worker."""
        return self.lease.end if self._tracker is None else self._tracker.end

    def try_claim(self, position: int) -> bool:
        """Claims record ``position`` before it is used (in order, from ``start``); False: stop, it is not yours."""
        if self.lease.start is None:
            return True
        if self._tracker is None:
            self._tracker = self._stream.track(self.lease)
        return self._tracker.try_claim(position)

    def records(self, reader: Callable[[Lease], Iterable] | None = None) -> Iterator:
        """The range's records, each claimed before it is yielded (``reader(lease)``, default the SDK's readers).

        The loop's wait for each record is its data stall (worker_sdk.stall),
        counted on the same meter as its waits for the next range.
        """
        source = iter((reader or readers.of_lease)(self.lease))
        meter = self._stream.meter
        position = self.start or 0
        try:
            while True:
                meter.wait()
                record = next(source, _END)
                meter.got()
                if record is _END or not self.try_claim(position):
                    return
                position += 1
                yield record
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    def release(self) -> None:
        if self._tracker is not None:
            self._stream.untrack(self.lease, self._tracker)
            self._tracker = None


def ranges(stream: Stream, depth: int = 0, most: int | None = None) -> Iterator[WorkRange]:
    """One WorkRange per leased item of ``stream``; each completed when the next is asked for.

    ``depth``: leases taken ahead while the loop reads one (worker_sdk.look_ahead;
    ``stream`` then has ``lag=None``), so that the loop does not wait on a
    take between two ranges (``most``: ``look_ahead.LookAhead``'s). A range
    taken ahead and not started is given back to a worker with nothing to
    read, as a whole item is.
    """
    with closing(stall.timed(look_ahead.leases(stream, depth, most=most), stream.meter)) as leases:
        for lease in leases:
            work = WorkRange(stream, lease)
            try:
                yield work
            finally:
                work.release()
