"""One consumer's run of leases (when its queue has ended: worker_sdk.queue_end).

A consumer is one loop that reads items: an ``items()`` loop, a tf.data
generator, a queue runner, one slot of ``WorkQueue.dataset``. Its stream
knows which leases it is still reading and hands finished ones to the
process's ``Leaser``, the one owner of held leases.

The acknowledgement rule: a consumer never holds an item it has finished
while it waits. A stream acknowledges its finished leases in the same
request that asks for the next item, so a consumer that waits at the end of
the queue holds nothing it has finished; one that is still reading what it
holds (a reader behind a buffer, ``lag`` > 1) is marked at its end, and the
server stops counting its leases as worth waiting for (server/sql/at_end.sql).
"""

from __future__ import annotations

import collections
import logging
import random
import threading
from typing import Callable, Iterator

from . import stall
from .at_end import mark_at_end, process_waits
from .leaser import Leaser
from .protocol import Lease, TakeScope
from .queue_end import QueueExhausted, exhausted_message, queue_ended
from .tracker import Budget, RangeTracker

log = logging.getLogger("worker_sdk")


class Stream:
    """One consumer's leases: those it reads now (``open``), oldest first.

    ``lag`` is how many of its newest leases a consumer may still be reading
    when it asks for another: 1 for a loop that handles one item at a time,
    3 for input_producer (one item in the reader, one in its queue, one
    waiting to be enqueued). Older leases are acknowledged with the next take,
    in the same request. ``lag=None``: the consumer says when it received an
    item's last record (``consumed``), however far its reader ran ahead
    (WorkQueue.dataset's slots). A stream that ends keeps what it still reads
    until ``finish()``.
    """

    def __init__(
        self,
        leaser: Callable[[], Leaser],
        name: str,
        lag: int | None = 1,
        tracks: bool = False,
        upto_epoch: int | None = None,
        sync: bool = False,
    ):
        self._leaser = leaser
        self.name = name
        self.lag = lag
        # Its reader claims records one by one (lease_records.read, a WorkRange): the
        # server may ask a split of what it leases from the start.
        self.tracks = tracks
        # A rank of synchronous training (worker_sdk.sync): it reads epochs up
        # to ``upto_epoch`` and ends when nothing is left to lease there.
        self.upto_epoch = upto_epoch
        self.sync = sync
        # From this epoch on only (None: from the first): an epoch read alone.
        self.from_epoch: int | None = None
        # Its records are handed to another process, which completes or gives
        # back each item once it knows what it trained on (worker_sdk.sync's
        # Ledger): this stream acknowledges nothing itself.
        self.handoff = False
        # The records it may still read (a synchronous rank's quota): each
        # take asks for no more, and each record claimed counts.
        self.budget: Budget | None = None
        # Whether this consumer may end when a take at the tail finds nothing
        # but other leases (a loader of an in-order DataLoader while a sibling
        # reads: worker_sdk.loader_siblings); its take says so to the server.
        self.may_leave: Callable[[], bool] | None = None
        self.open: collections.deque[Lease] = collections.deque()
        self._widest = 0  # records of the widest range it leased (what a take ahead sizes its count by)
        self.ended = False
        # Counts restores (reset()): a lease taken ahead before one is fenced,
        # and its consumer must not read it (worker_sdk.look_ahead).
        self.generation = 0
        # Leases its consumer received whole (lag=None), to acknowledge with
        # the next take; under _lock with ``open`` and ``ended``.
        self._consumed: list[Lease] = []
        # A look-ahead over this stream hands it what its consumer finished
        # with its next take; this hands them over now (``acknowledge_now``).
        self.untold: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        # The pause last logged: said once when a pause begins, not at every take while it lasts.
        self._paused: str | None = None
        # Whether a long wait for slicing was logged (once: its text counts the seconds).
        self._said_slicing = False
        # The training loop's waits for this consumer's data, where the loop
        # itself reads from it (items(), ranges(), take(); worker_sdk.stall).
        # Its clock is found through the leaser, not self: a stream and its
        # meter must not keep each other alive (a dropped stream leaves the
        # process's end-of-queue mark at once).
        self.meter = stall.Meter(lambda: leaser().stall_clock())

    def next(self) -> Lease:
        """The next lease; QueueExhausted at the end (JobCancelledError, JobFailedError when the job says so)."""
        if self.ended:
            raise QueueExhausted(exhausted_message(self.name))
        if self._stopped.is_set():
            raise QueueExhausted(f"work queue {self.name}: the consumer stopped")
        leaser = self._leaser()
        finished = []
        while self.lag is not None and len(self.open) >= self.lag:
            finished.append(self.open.popleft())
        if self.handoff:
            finished = []  # the items are the receiving process's to complete
        # A take that finds nothing waits on the server, but not before the
        # process is known to be at an end: one consumer's wait can hold up
        # another job's consumers that wait for this process's leases there
        # (two queues read in lockstep), and they learn that it waits only
        # from its mark. So a first take that finds nothing answers at once;
        # the mark is made, and the next take waits.
        wait = process_waits()
        try:
            while True:
                with self._lock:
                    finished, self._consumed = finished + self._consumed, []
                # Held before the take too: a completion another thread sent
                # meanwhile (a loader's receipts) may be answered before this
                # take's answer comes, and the server counted that lease.
                known = leaser.held.known()
                # Looked at before the take: a sibling that reads now clears
                # its mark only before its own next take (worker_sdk.loader_siblings).
                leave = self.may_leave is not None and self.may_leave()
                leases, answer = leaser.take(finished, self.scope(), self.tracks, wait=wait, leave=leave)
                finished = []
                self._say_paused(answer.paused)
                self._say_slicing(answer.slicing)
                if leases:
                    self._opened(leases[0])
                    return leases[0]
                if queue_ended(answer, max(known, leaser.held.known())):
                    with self._lock:
                        self.ended = True
                    self.flush_consumed()  # received meanwhile: no take of this stream will carry them
                    raise QueueExhausted(exhausted_message(self.name))
                if answer.waiting_on is not None:
                    if leave:
                        self.flush_consumed()
                        raise QueueExhausted(f"work queue {self.name}: left to the loaders still reading")
                    mark_at_end(self, True)
                    if not wait:
                        wait = True
                        continue  # marked: now wait on the server
                elif answer.deferred and not wait and not leave:
                    # Kept from the last items (a slow worker): a take that
                    # waits is held, and the job's end answers it at once;
                    # asleep for retry_after, the loop ended up to that late.
                    wait = True
                    continue
                wait = True
                # Jitter keeps the idle workers at the end of a job from polling in step.
                if self._stopped.wait((answer.retry_after or 0.05) * random.uniform(0.5, 1.0)):
                    raise QueueExhausted(f"work queue {self.name}: the consumer stopped")
        finally:
            mark_at_end(self, self._holds_at_end())

    def try_next(self) -> Lease | None:
        """One take that neither waits on the server nor ends the stream: a lease, or None when none comes at once.

        For a consumer with ``lag=None`` that has other leases to read
        meanwhile (a slot of WorkQueue.dataset whose siblings read): nothing
        pending now, or the queue's end, is for a later ``next()`` to find.
        Unlike ``next_ahead`` it takes as the consumer itself, which reads
        what it leases at once: the server may answer with a split it asks
        of another worker, and never defers it as a take ahead.
        """
        if self.ended or self._stopped.is_set():
            return None
        with self._lock:
            finished, self._consumed = self._consumed, []
        leases, answer = self._leaser().take(finished, self.scope(), self.tracks, wait=False)
        self._say_paused(answer.paused)
        if not leases:
            return None
        self._opened(leases[0])
        return leases[0]

    def next_ahead(self, count: int = 1) -> list[Lease]:
        """One take ahead of the consumer, which reads what it holds: up to ``count`` leases, none when none come at once.

        It never waits and never ends the stream: nothing pending now, or the
        queue's end, is for the consumer's own ``next()`` to find once it is
        done with what it holds (worker_sdk.look_ahead). What it leases stays
        the server's to ask back until the consumer starts it.
        """
        if self.ended or self._stopped.is_set():
            return []
        scope = self.scope()
        if scope.max_records is not None and scope.max_records <= 0:
            return []  # what it holds fills its budget: the consumer's own take comes once it has read them
        if scope.max_records is not None:
            # No more leases than the budget has room for, if they are as
            # wide as the widest it leased (one before it leased any): the
            # server gives back, in the take, what lies past the bound, which
            # costs it about as much as leasing it.
            widest = self._widest
            count = min(count, -(-scope.max_records // widest) if widest > 0 else 1)
        with self._lock:
            finished, self._consumed = self._consumed, []
        leases, _answer = self._leaser().take(finished, scope, self.tracks, wait=False, ahead=True, count=count)
        self._opened(*leases)
        return leases

    def _opened(self, *leases: Lease) -> None:
        self.open.extend(leases)
        for lease in leases:
            if lease.start is not None and lease.end is not None:
                self._widest = max(self._widest, lease.end - lease.start)

    def leaser(self) -> Leaser:
        """The process's leaser of this stream's job."""
        return self._leaser()

    def give_back(self, lease: Lease, reason: str) -> None:
        """``lease``, taken ahead, will not be read here: given back unread, its attempt returned."""
        self.forget(lease)
        self._leaser().release_unread(lease, reason)

    def forget(self, lease: Lease) -> None:
        """``lease``, taken ahead, is not this stream's to read or acknowledge any more (it was given back)."""
        with self._lock:
            try:
                self.open.remove(lease)
            except ValueError:
                pass

    def scope(self) -> TakeScope:
        """What its next take may lease: its epochs, and at most the records its budget has left."""
        return TakeScope(self.upto_epoch, self.from_epoch, self.sync, self._records_left())

    def _records_left(self) -> int | None:
        """The budget less the records of its leases not claimed yet (taken ahead, or being read).

        A lease between its reader's end and leaving ``open`` counts whole:
        too few records asked for, never too many.
        """
        if self.budget is None:
            return None
        leaser = self._leaser()
        return self.budget.free([(lease, leaser.held.tracker(lease.id)) for lease in list(self.open)])

    def _say_paused(self, paused: str | None) -> None:
        if paused and paused != self._paused:
            log.warning("work queue %s waits: %s", self.name, paused)
        elif self._paused and not paused:
            log.info("work queue %s: the job was resumed", self.name)
        self._paused = paused

    def _say_slicing(self, slicing: str | None) -> None:
        if slicing and not self._said_slicing:
            log.warning("work queue %s waits: %s", self.name, slicing)
        self._said_slicing = self._said_slicing or bool(slicing)

    def stall_clock(self) -> stall.Clock:
        """The data-stall clock of the consumer this stream leases for, in this process."""
        return self._leaser().stall_clock()

    def timed_next(self) -> Lease:
        """``next()``, the loop's wait for it counted by ``meter`` (take(), lease(): one item at a time)."""
        self.meter.wait()
        lease = self.next()
        self.meter.got()
        return lease

    def timed_leases(self) -> Iterator[Lease]:
        """``leases()``, each wait for the next one counted by ``meter`` (the loop reads each item itself)."""
        return stall.timed(self.leases(), self.meter)

    def leases(self) -> Iterator[Lease]:
        """``next()`` until the queue ends; closed before its end (the consumer stopped), it gives back what is open.

        Use it with ``contextlib.closing``, so that a consumer that stops early
        gives its item back at once.
        """
        try:
            while True:
                try:
                    yield self.next()
                except QueueExhausted:
                    return
        except GeneratorExit:
            if not self.handoff:
                self.abort("the consumer stopped before finishing this item")
            raise

    def track(self, lease: Lease) -> RangeTracker:
        """A range tracker for reading ``lease`` (the leaser reports it and answers splits from it)."""
        return self._leaser().track(lease)

    def untrack(self, lease: Lease, tracker: RangeTracker) -> None:
        """``track(lease)``'s tracker is done (the reader ended or stopped)."""
        self._leaser().held.untrack(lease, tracker)

    def settle(self, lease: Lease, error: str | None = None) -> None:
        """One lease is finished (or given up with ``error``), whatever its place in the stream."""
        try:
            self.open.remove(lease)
        except ValueError:
            return
        if error is None:
            self._leaser().complete([lease])
        else:
            self._leaser().fail([lease], error)
        mark_at_end(self, self._holds_at_end())

    def consumed(self, lease: Lease) -> None:
        """The consumer received ``lease``'s last record (lag=None): acknowledged with this stream's next take."""
        with self._lock:
            try:
                self.open.remove(lease)
            except ValueError:
                return
            later = not self.ended
            if later:
                self._consumed.append(lease)
        if not later:
            self._leaser().complete([lease])
        mark_at_end(self, self._holds_at_end())

    def stop_at(self, lease: Lease, position: int | None, reason: str) -> None:
        """The consumer stopped at record ``position`` of ``lease``: what it received is read, the rest goes back.

        ``position`` None (or the range's first record): nothing of it was
        received, and the item is given back whole for another attempt.
        """
        with self._lock:
            try:
                self.open.remove(lease)
            except ValueError:
                return
        self._leaser().stop_at(lease, position, reason)

    def flush_consumed(self, later: bool = False) -> None:
        """Acknowledges now what the consumer received whole (it closes: no take will carry them).

        ``later``: on a thread, the consumer going on meanwhile (``Leaser.complete``).
        """
        with self._lock:
            leases, self._consumed = self._consumed, []
        if leases:
            self._leaser().complete(leases, later=later)

    def acknowledge_now(self) -> None:
        """Acknowledges now whatever its consumer has finished (a snapshot is taken next)."""
        if self.untold is not None:
            self.untold()
        self.flush_consumed()

    def finish(self) -> None:
        """The consumer read everything it was given: acknowledge what is open."""
        leases, self.open = list(self.open), collections.deque()
        if leases:
            self._leaser().complete(leases)
        self.flush_consumed()
        mark_at_end(self, False)
        self.meter.stop(worked=True)

    def abort(self, error: str) -> None:
        """The consumer stopped in the middle: give its open items back for another attempt."""
        leases, self.open = list(self.open), collections.deque()
        if leases:
            self._leaser().fail(leases, error)
        self.flush_consumed()
        mark_at_end(self, False)
        self.meter.stop(worked=True)

    def stop(self) -> None:
        """Ends a wait for the next item from another thread (the consumer is closing): no take leases anything after it.

        A take already on its way may still bring a lease; its taker gives it back.
        """
        self._stopped.set()

    def reset(self) -> None:
        """After a restore (every lease fenced): hold nothing, and read again."""
        self.open.clear()
        with self._lock:
            self._consumed = []
        self.ended = False
        self.generation += 1
        mark_at_end(self, False)

    def _holds_at_end(self) -> bool:
        return self.ended and bool(self.open)
