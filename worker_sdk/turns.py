"""When the loader processes of one WorkQueueLoader take: one at a time, and while a sibling reads only for a starved loop.

The rule of ``WorkQueue.dataset()``'s slots (worker_sdk.interleave), held in
shared memory across a DataLoader's loader processes. A loader whose
siblings read is not an idle worker: the training loop trains on what they
hold, at the process's pace. When every loader took as an idle consumer
does, a process of two loaders leased two slices at the start (the slow
process read both at its pace) and its idle loader asked for splits while
its sibling kept the loop fed (bench/RESULTS.md). Now:

- the loader that finds no sibling reading takes as a consumer does
  (``Stream.next``: it may wait on the server, asks for splits, learns the
  end, and then every loader ends);
- while a sibling reads, a loader takes once the training loop has waited
  ``STARVED_SECONDS`` for data since the last take (a reader slower than the
  loop, a blocked item), with ``Stream.try_next``, which answers at once;
- one take at a time.

It needs batches in the order they are read (``in_order=False``): a
DataLoader in order asks each loader in turn, and would wait on a loader
that waits for its turn. The training loop's process says when it waits
(``Hunger``, written by that one thread without a lock); the loaders'
counts are under a lock of the DataLoader's multiprocessing context.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from time import monotonic
from typing import Iterator

from .protocol import Lease
from .queue_end import QueueExhausted, exhausted_message
from .stream import Stream

# Its own name under the SDK's, so that its account of each take while a
# sibling reads (debug: one per item for a loop that always starves) can be
# turned on alone.
log = logging.getLogger("worker_sdk.turns")

# Seconds the training loop waits for data, summed since the last take,
# before another reader takes while a sibling reads: long enough that a
# reader that keeps up never adds a lease, short beside any job worth
# slicing. Summed, so that a reader a little slower than the loop adds one
# once the loop's waits add up.
STARVED_SECONDS = 0.2
# Seconds of each wait that do not count: a DataLoader handing over a batch
# it had ready takes the loop 0.2-0.4 ms (1.6 ms at p99), so without this a
# loop fed all along summed STARVED_SECONDS within about a thousand records
# (bench/RESULTS.md).
HANDOVER_SECONDS = 0.001
# Seconds of the loop's wait for its first batch of a pass that do not
# count: loader processes start, take and open their first item then, and
# on a busy machine that took 0.2-0.35 s where the loop was fed all along
# after it (a sibling took at the start of the pass, and asked for a split).
# A first item that blocks still gets a sibling to take after this.
FIRST_BATCH_SECONDS = 1.0
# Seconds between a waiting loader's looks at its siblings and the loop.
_POLL = 0.01

# Hunger's slots (the loop's process writes them).
_STARVED, _SINCE, _CLOSED, _FED = 0, 1, 2, 3
# LoaderTurns's slots (under its lock).
_READING, _TAKING, _ENDED, _AT_TAKE = 0, 1, 2, 3


class Hunger:
    """The training loop's waits for data, each less its handover, summed: written by the loop's thread, read by loaders.

    The loop's process counts them with ``stall.timed(batches, hunger)``.
    """

    def __init__(self, context):
        self._values = context.RawArray("d", 4)

    def reset(self) -> None:
        self._values[_STARVED] = self._values[_SINCE] = self._values[_CLOSED] = self._values[_FED] = 0.0

    def _not_counted(self) -> float:
        """Seconds of the wait in progress that are not hunger: a handover, or the pass's start."""
        return HANDOVER_SECONDS if self._values[_FED] else FIRST_BATCH_SECONDS

    # A meter of stall.timed: the loop's process wraps its batches in it.
    def wait(self) -> None:
        """The loop asks for its next batch."""
        self._values[_SINCE] = monotonic()

    def got(self) -> None:
        """The loop has it, or the end."""
        since = self._values[_SINCE]
        if since:
            self._values[_STARVED] += max(0.0, monotonic() - since - self._not_counted())
            self._values[_SINCE] = 0.0
        self._values[_FED] = 1.0

    def stop(self) -> None:
        """The loop is done with its batches (their end, or it closed them): the loaders' turns end."""
        self._values[_CLOSED] = 1.0

    @property
    def closed(self) -> bool:
        return bool(self._values[_CLOSED])

    def starved(self) -> float:
        """Seconds waited so far beyond each wait's handover, the wait in progress included.

        CLOCK_MONOTONIC is one clock for every process of the machine.
        """
        while True:
            since = self._values[_SINCE]
            total = self._values[_STARVED]
            not_counted = self._not_counted()
            if self._values[_SINCE] == since:  # not torn by a got() between the reads
                return total + (max(0.0, monotonic() - since - not_counted) if since else 0.0)


class LoaderTurns:
    """Made by the loop's process before its loaders start (forked or spawned with the dataset)."""

    def __init__(self, context=None):
        context = context or multiprocessing.get_context()
        self.hunger = Hunger(context)
        self._lock = context.Lock()
        self._values = context.RawArray("d", 4)

    def reset(self) -> None:
        """A new pass of the loop (its loaders start, or persistent ones start again)."""
        self.hunger.reset()
        with self._lock:
            for index in range(len(self._values)):
                self._values[index] = 0.0

    def leases(self, stream: Stream) -> Iterator[Lease]:
        """A loader process: its leases, taken in turn, until the queue's end or the loop's close.

        Each lease counts as read by this loader until the consumer asks for
        the next one (it has produced the item's records) or closes this.
        """
        try:
            while True:
                try:
                    lease = self._next(stream)
                except QueueExhausted:
                    return
                try:
                    yield lease
                finally:
                    with self._lock:
                        self._values[_READING] -= 1
        except GeneratorExit:
            stream.abort("the consumer stopped before finishing this item")
            raise

    def _next(self, stream: Stream) -> Lease:
        while True:
            alone, starved = self._turn(stream)
            lease = None
            try:
                lease = stream.next() if alone else stream.try_next()
            except QueueExhausted:
                if alone:
                    with self._lock:
                        self._values[_ENDED] = 1.0
                raise
            finally:
                with self._lock:
                    self._values[_TAKING] = 0.0
                    self._values[_AT_TAKE] = self.hunger.starved()
                    if lease is not None:
                        self._values[_READING] += 1
            if not alone:
                # The one reason a process reads two items at once, or asks for a split while it reads.
                log.debug(
                    "work queue %s: a loader asked for work while a sibling reads, the loop having waited %.3f s"
                    " for data since the last take: %s",
                    stream.name,
                    starved,
                    f"took lease {lease.id}" if lease is not None else "none came at once",
                )
            if lease is not None:
                return lease

    def _turn(self, stream: Stream) -> tuple[bool, float]:
        """Waits for this loader's turn to take (and marks it taking).

        Returns whether no sibling reads, and the seconds the loop waited for
        data since the last take.
        """
        while True:
            if self.hunger.closed:
                raise QueueExhausted(f"work queue {stream.name}: the consumer stopped")
            with self._lock:
                if self._values[_ENDED]:
                    raise QueueExhausted(exhausted_message(stream.name))
                if not self._values[_TAKING]:
                    alone = not self._values[_READING]
                    starved = self.hunger.starved() - self._values[_AT_TAKE]
                    if alone or starved >= STARVED_SECONDS:
                        self._values[_TAKING] = 1.0
                        return alone, starved
            time.sleep(_POLL)
