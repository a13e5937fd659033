"""When the slots of ``WorkQueue.dataset()`` take their next item (worker_sdk.interleave).

The rule of a WorkQueueLoader's loader processes too (worker_sdk.turns),
held here in one process: one take at a time, and while a sibling reads
only for a starved consumer.
"""

from __future__ import annotations

import threading
import time

from .look_ahead import LookAhead
from .protocol import Lease
from .queue_end import QueueExhausted, exhausted_message
from .stream import Stream
from .turns import STARVED_SECONDS

POLL_SECONDS = 0.1  # how often a slot waiting for its turn looks at a closed consumer


class Stopped(Exception):
    """The consumer closed the dataset: a slot stops where it is."""


class Slots:
    """When a slot takes: one at a time, and while a sibling reads only for a starved consumer.

    A slot whose siblings read is not an idle worker: its consumer trains on
    what they hold at the process's pace. When every slot took as an idle
    consumer does, each process leased several slices at the start and its
    idle slots asked for splits all along, so the processes of a job cut one
    another's ranges to its end (54-90 splits in a 6-s job of eight
    processes, bench/RESULTS.md). Now:

    - the slot that finds no sibling reading takes as a consumer does
      (``Stream.next``: it may wait on the server, asks for splits, learns
      the end, and then every slot ends); with a look-ahead, only the slot
      it belongs to (``primary``), which then finds its next item leased
      already (but for its first, and after a take ahead found nothing);
    - while a sibling reads, a slot takes once the consumer has waited
      ``STARVED_SECONDS`` seconds on an empty buffer since the last take (a slow
      reader, a blocked item), with ``Stream.try_next``, which answers at
      once: such a slot is never in a wait that a closing consumer cannot
      see the end of, and brings nothing after the close that the close did
      not wait for (a waiting take could lease the rest of a range the close
      gives back, and the process exit holding it);
    - one take at a time, so the slots do not lease several items at once.
    """

    def __init__(self, stop: threading.Event, primary: LookAhead | None = None):
        self._stop = stop
        # The slot whose next item is leased ahead while it reads one: the
        # one slot that takes when no sibling reads (None: any slot may).
        self._primary = primary
        self._reading = 0  # slots holding an item the consumer has not received whole
        self._taking = False
        self._ended = False  # a slot learned the queue's end: every slot ends without asking again
        self._starved = 0.0  # seconds the consumer waited on an empty buffer since the last take
        self._starving_since: float | None = None
        # The stream in a take that may wait on the server (the close does not wait for it).
        self.waiting: Stream | None = None
        self._changed = threading.Condition()

    def next(self, stream: Stream) -> Lease:
        """The slot's next lease; QueueExhausted once the queue has ended, Stopped once the consumer closed.

        What the slot's consumer received whole rides the take when the slot
        takes at once. A slot that must wait for its turn sends it first, so
        that it never waits holding an item its consumer finished. Before,
        every slot sent it on its own before taking: a second round trip at
        each item's end, while a consumer fed by that slot alone waited.
        """
        told = False
        ahead = self._primary if self._primary is not None and self._primary.stream is stream else None
        while True:
            with self._changed:
                alone = self._turn(stream, wait=told, primary=self._primary is None or ahead is not None)
                if alone is not None:
                    self._taking = True
                    if alone:
                        self.waiting = stream
            if alone is None:
                stream.flush_consumed()
                told = True
                continue
            lease = None
            try:
                if ahead is None:
                    lease = stream.next() if alone else stream.try_next()
                elif alone:
                    lease = _next_or_end(ahead)
                else:
                    lease = ahead.poll() or stream.try_next()
            except QueueExhausted:
                with self._changed:
                    self._ended = alone or self._ended
                raise
            finally:
                with self._changed:
                    self._taking, self.waiting = False, None
                    self._starved = 0.0
                    if self._starving_since is not None:
                        self._starving_since = time.monotonic()
                    if lease is not None:
                        self._reading += 1
                    self._changed.notify_all()
            if lease is not None:
                return lease

    def _turn(self, stream: Stream, wait: bool = True, primary: bool = True) -> bool | None:
        """Waits (holding the lock) for this slot's turn to take; True: no sibling reads (None: not its turn, and ``wait`` is False).

        ``primary``: the slot may take when no sibling reads (the others
        take only for a starved consumer while it reads).
        """
        while True:
            if self._ended:
                raise QueueExhausted(exhausted_message(stream.name))
            if self._stop.is_set():
                raise Stopped
            timeout = POLL_SECONDS
            if not self._taking:
                if self._reading == 0 and primary:
                    return True
                left = STARVED_SECONDS - self._starved
                if self._starving_since is not None:
                    left -= time.monotonic() - self._starving_since
                    if left <= 0:
                        return False
                    timeout = min(timeout, left)
            if not wait:
                return None
            self._changed.wait(timeout)

    def done(self) -> None:
        """A slot's item was received whole, or its reading ended otherwise."""
        with self._changed:
            self._reading -= 1
            self._changed.notify_all()

    def starving(self) -> None:
        """The consumer found the buffer empty and waits."""
        with self._changed:
            self._starving_since = time.monotonic()
            self._changed.notify_all()

    def starved(self) -> bool:
        """Whether the consumer waits on the empty buffer now (read without the lock: a hint for a slot's next put)."""
        return self._starving_since is not None

    def fed(self) -> None:
        """The consumer's wait ended."""
        with self._changed:
            if self._starving_since is not None:
                self._starved += time.monotonic() - self._starving_since
                self._starving_since = None


def _next_or_end(ahead: LookAhead) -> Lease:
    try:
        return next(ahead)
    except StopIteration:
        raise QueueExhausted(exhausted_message(ahead.stream.name)) from None
