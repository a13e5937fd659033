"""A lease's records as its reader yields them: each record of a slice claimed before it is handed on, the lease settled at the end.

The stream (worker_sdk.stream) says what a consumer leases and when it
acknowledges; this is how a consumer's reader goes through one lease:
claiming each record of a range (worker_sdk.tracker) so that a split can
stop the reader at its cut, counting a synchronous rank's budget, and
settling the lease with the stream once the reader is done or fails.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Iterator

from .protocol import Lease
from .stream import Stream
from .tracker import RangeTracker

_NOTHING = object()


def read(stream: Stream, lease: Lease, records: Iterable) -> Iterator:
    """``records`` (a reader's output for ``lease``), acknowledging the lease when the reader is done.

    The lease is completed once the reader is exhausted, before its last
    record is handed on: a consumer that hands records to another process
    (a DataLoader's loader) or a buffer is then never idle while holding
    an item it has finished (with ``lag=None``, as the next take's
    acknowledgement: a look-ahead sends it as the consumer starts the
    next lease). A reader that raises, or a consumer that stops before
    the end, gives the item back for another attempt.

    For a record range (a slice), each record is claimed before it is
    handed on: when a split gave the rest of the range to another worker,
    the reader is stopped at the split point. ``records`` must then be the
    range's records in order, as every reader of ``worker_sdk.readers``
    yields them.
    """
    tracker = stream.track(lease) if lease.start is not None and lease.end is not None else None
    claim = claimer(stream, tracker)
    iterator = iter(records)
    position = lease.start
    last = _NOTHING
    try:
        for record in iterator:
            if claim is not None:
                if not claim(position):
                    break  # the rest of the range was split off
                position += 1
            if last is not _NOTHING:
                yield last
            last = record
    except GeneratorExit:
        _untrack(stream, lease, tracker)
        stream.settle(lease, "the consumer stopped before finishing this item")
        raise
    except Exception as exc:
        _untrack(stream, lease, tracker)
        stream.settle(lease, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()  # the reader's file, when the split stopped it early
    _untrack(stream, lease, tracker)
    if stream.lag is None:
        # Read ahead of its consumer's own takes (worker_sdk.look_ahead):
        # acknowledged with the next take ahead, which leaves as the
        # consumer starts the lease after this one.
        stream.consumed(lease)
    else:
        stream.settle(lease)
    if last is not _NOTHING:
        yield last


def claimer(stream: Stream, tracker: RangeTracker | None) -> Callable[[int], bool] | None:
    """Claims a record of ``tracker``'s range for ``stream``'s consumer (False: a split gave it to another worker), counting its budget.

    Bound once per reader, called once per record; None when nothing is claimed.
    """
    if tracker is None:
        return None
    if stream.budget is None:
        return tracker.try_claim
    return functools.partial(stream.budget.claim, tracker)


def _untrack(stream: Stream, lease: Lease, tracker: RangeTracker | None) -> None:
    if tracker is not None:
        stream.untrack(lease, tracker)
