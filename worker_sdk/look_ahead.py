"""A consumer's next lease, taken on a thread while the consumer reads the one it holds.

Without it, a loop over whole items (``items()``, a DataLoader without
loader processes) waits for a take's round trip before every item: 5-6 ms
on the training thread per item (bench/item_overhead.py), the tax a user
sees with no straggler at all. ``LookAhead`` keeps ``depth`` leases taken
ahead, so the loop's next item is in memory when it asks, and the finished
one is acknowledged by the take that leases the one after.

An item taken ahead must not hold the tail. Until the consumer starts it, a
worker with nothing to read may ask for it back
(server/services/give_back.py); the process's leaser gives it back unread
unless the consumer started it first, and one lock decides which
(``LookAhead._claim`` against ``__next__`` and ``poll``, all under the
look-ahead's condition). A lease the server says is lost before the consumer
starts it (it expired while the process was stopped, and another worker
reads it) is taken out of reach the same way, and never started here. The
takes made here answer at once and never end the stream: when one finds
nothing, the consumer takes for itself once it is done with what it holds,
so the end of a queue and every wait are as without the look-ahead
(worker_sdk.stream). A consumer that must not wait on the server now
(``poll``: a slot of ``WorkQueue.dataset`` whose sibling reads) gets what
was taken ahead, or nothing, and may then take at once outside the
look-ahead (``Stream.try_next``). ``worker_sdk.taker`` hands the leases
over one per call, for ``take()``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Iterator

from . import errors
from .ahead_depth import Depth
from .protocol import Lease
from .queue_end import QueueExhausted
from .stream import Stream

log = logging.getLogger("worker_sdk")

# close() waits this long for a take ahead on its way; one still out after
# it gives back what it leases itself.
_CLOSE_SECONDS = 5.0
# The most leases one take ahead asks for (a deep look-ahead fills in a few).
MAX_COUNT = 64
# How long a look-ahead with ``retries`` left waits before it takes again
# after a take found nothing (the server's retry_after while an epoch is made).
_RETRY_SECONDS = 0.05
STOPPED_REASON = "the consumer stopped before starting this item (taken ahead)"
# A take ahead that left before a restore may reach the server before it
# (the restore fences what it brought) or after it (valid leases): both are
# given back unread, and the reason must be true of either.
RESTORED_REASON = "taken ahead while a restore of the job was on its way: not read"


class LookAhead(Iterator[Lease]):
    """``stream``'s leases for one consumer, ``depth`` of them taken ahead on a thread, more for a quick loop.

    ``most``: how many it may keep ahead when the loop works on an item for
    less than two take round trips (worker_sdk.ahead_depth; None: always
    ``depth``).

    The stream must have ``lag=None``: each lease is acknowledged as
    consumed once the consumer asks for the next one. The consumer's side
    (``__next__``) touches one lock when a lease is ready: what it finished,
    what it starts, and the lease it takes are handed over there, and the
    thread tells the stream and the leaser with its next take. ``close()``
    gives back what was taken ahead and not started; the lease in hand is
    the caller's to finish or abort.
    """

    def __init__(
        self,
        stream: Stream,
        depth: int = 1,
        name: str = "shardline-look-ahead",
        refill: int | None = None,
        retries: int = 0,
        most: int | None = None,
    ):
        if stream.lag is not None:
            raise ValueError("LookAhead reads a stream with lag=None (its consumer says what it consumed)")
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        self._stream = stream
        self._depth = Depth(depth, most)  # under _cond
        # It takes again once fewer than this are ahead (default: _refill_at);
        # lower, fewer takes of more leases each.
        self._refill = None if refill is None else max(1, min(refill, depth))
        self._handed_at: float | None = None  # when the consumer got its lease in hand (its time on it follows)
        # Takes that found nothing it makes again, until its consumer begins,
        # before it waits for the consumer's own: one opened before then (the
        # next epoch's) may meet that epoch being made by another take.
        self._retries = retries
        self._begun = False  # its consumer asked for its first lease
        self._cond = threading.Condition()
        # Under _cond: taken ahead and not started, oldest first, each with
        # the stream's generation when its take left (a restore since fenced
        # it); finished by the consumer and started by it, both not yet told.
        self._ahead: collections.deque[tuple[Lease, int]] = collections.deque()
        self._done: list[Lease] = []
        self._started: list[tuple[Lease, int]] = []
        self._stale: list[Lease] = []  # taken before a restore, found by the consumer: given back
        self._returning = 0  # of them, being given back now (outside _cond)
        self._taking = False  # a take ahead is on its way
        self._consumer_takes = False  # the consumer takes for itself (nothing came ahead)
        self._idle = False  # the last take ahead found nothing: wait for the consumer's own
        self._closed = False
        self._current: Lease | None = None
        stream.untold = self._tell
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def stream(self) -> Stream:
        """The stream it takes from (its consumer's)."""
        return self._stream

    @property
    def begun(self) -> bool:
        """Whether its consumer has asked for a lease (one opened ahead of it: worker_sdk.sync.OpenedEpoch)."""
        return self._begun

    def _run(self) -> None:
        stream = self._stream
        while True:
            with self._cond:
                while True:
                    # Read before the take leaves: a restore from now on makes what it brings stale.
                    generation = stream.generation
                    if self._closed or not (
                        len(self._ahead) >= self._refill_at()
                        or self._idle
                        or self._consumer_takes
                        or self._restoring(generation)
                    ):
                        break
                    self._cond.wait()
                if self._closed:
                    return
                self._taking = True
                count = min(self._depth.size() - len(self._ahead), MAX_COUNT)
            leases: list[Lease] = []
            took: float | None = None
            try:
                self._tell()
                leaser = stream.leaser()
                restores = leaser.held.restores
                began = time.monotonic()
                leases = stream.next_ahead(count)
                took = time.monotonic() - began
            except errors.ShardlineError as exc:
                # The consumer's own take meets the same condition and says it.
                log.debug("work queue %s: a take ahead failed: %s", stream.name, exc)
            except Exception:
                log.exception("work queue %s: a take ahead failed", stream.name)
            finally:
                # Whatever happened, the consumer is not left waiting on this take.
                lost: list[Lease] = []
                with self._cond:
                    self._taking = False
                    closed = self._closed
                    if took is not None and leases:  # one that found nothing says little of the next
                        self._depth.took(took)
                    for lease in [] if closed else leases:
                        # Under _cond: a give-back asked of it, or the news
                        # that it is lost, finds it in reach from now on.
                        if leaser.held.hold_ahead(lease, lambda lease=lease: self._claim(lease)):
                            self._ahead.append((lease, generation))
                        else:
                            lost.append(lease)  # a heartbeat said so before it got here, or a restore forgot it
                    # Refused because a restore forgot the process's leases
                    # since the take left: perhaps leased after the restore
                    # and still standing, given back (a lost one is refused
                    # by the server), and nothing is taken here until it is.
                    stale_lost = lost if lost and leaser.held.restores != restores else []
                    self._returning += len(stale_lost)
                    if len(lost) == len(leases) and self._retries > 0 and not closed:
                        self._retries -= 1
                        self._cond.wait(_RETRY_SECONDS)  # the consumer, should it begin, waits for the next
                    elif len(lost) == len(leases):
                        # Nothing came (or nothing that is still ours): no
                        # take ahead again until the consumer's own.
                        self._idle = True
                    self._cond.notify_all()
            for lease in lost:
                if not stale_lost:
                    stream.forget(lease)
            self._give_back_stale(stale_lost)
            if leases and closed:
                for lease in leases:
                    stream.give_back(lease, STOPPED_REASON)
                return

    def _restoring(self, generation: int) -> bool:
        """Under _cond: leases from before a restore are still held here, not yet given back.

        Taken ahead while a restore was on its way, they may hold items the
        restore re-opened; a take now would lease the items after them, and
        the consumer would read those first. It waits until the consumer has
        given them back, and then reads from the snapshot's position in order.
        """
        return self._returning > 0 or bool(self._stale) or any(taken != generation for _, taken in self._ahead)

    def _refill_at(self) -> int:
        """Under _cond: it takes again once fewer than this are ahead.

        A depth that follows the loop holds two round trips of its work
        (worker_sdk.ahead_depth): it takes again once half is left, so that
        each take brings half the depth, not the one or two started since
        the last (a quick loop then sent twice the takes).
        """
        if self._refill is not None:
            return self._refill
        size = self._depth.size()
        return (size + 1) // 2 if self._depth.grows else size

    def _tell(self) -> None:
        """Tells the stream what the consumer finished and the leaser what it started (the next take carries both)."""
        with self._cond:
            done, self._done = self._done, []
            started, self._started = self._started, []
        for lease in done:
            self._stream.consumed(lease)
        generation = self._stream.generation
        started = [lease for lease, taken in started if taken == generation]  # a restore fenced the others
        if started:
            self._stream.leaser().held.started(started)

    def _claim(self, lease: Lease) -> bool:
        """A give-back asked of ``lease``: True (out of the consumer's reach now) unless the consumer started it."""
        with self._cond:
            entry = next((entry for entry in self._ahead if entry[0] == lease), None)
            if entry is None:
                return False
            self._ahead.remove(entry)
            # Under _cond: a closing consumer's abort must not find it open.
            self._stream.forget(lease)
            # Another worker has nothing to read: taking ahead again would
            # lease the item back before it could. The consumer takes for
            # itself next, as at the end of a queue.
            self._idle = True
        return True

    def __next__(self) -> Lease:
        with self._cond:
            # From now on a take that finds nothing leaves the next to the
            # consumer, which then waits on the server or finds the end.
            self._finish_current()
            # The thread's take goes first: it answers at once, and a loop
            # with little to do per item would otherwise always take for
            # itself before the thread, woken, got to its turn.
            while True:
                while not self._ahead and (self._taking or not self._idle or self._returning) and not self._closed:
                    self._cond.wait()
                lease = self._start_ahead()
                if lease is not None or not (self._taking or self._returning) or self._closed:
                    break
                # Only leases from before a restore were here, and a take
                # that left before it is still out (or what it brought is
                # being given back): a take of its own now would lease past them.
            stale = self._stale_to_give_back()
            if lease is None:
                self._consumer_takes = True
        self._give_back_stale(stale)
        if lease is not None:
            return lease
        # Nothing came ahead: this consumer takes for itself, as it would
        # without a look-ahead (waiting on the server, finding the end).
        try:
            self._tell()
            lease = self._stream.next()
        except QueueExhausted:
            raise StopIteration from None
        finally:
            with self._cond:
                self._consumer_takes = False
                self._idle = False
                self._cond.notify_all()
        with self._cond:
            self._current = lease
            self._handed_at = time.monotonic()
        return lease

    def poll(self) -> Lease | None:
        """The lease taken ahead, if one is here or on its way; None, with no take of its own, if none is.

        For a consumer that must not wait on the server now (a slot of
        ``WorkQueue.dataset`` whose sibling reads: worker_sdk.interleave).
        What it finished is handed over as with ``next()``.
        """
        with self._cond:
            self._finish_current()
            while True:
                while not self._ahead and (self._taking or self._returning) and not self._closed:
                    self._cond.wait()  # a take ahead answers at once
                lease = self._start_ahead()
                if lease is not None or not (self._taking or self._returning) or self._closed:
                    break
            stale = self._stale_to_give_back()
        self._give_back_stale(stale)
        return lease

    def _finish_current(self) -> None:
        """Under _cond: the consumer asks for its next lease, so it is done with the one in hand."""
        self._begun, self._retries = True, 0
        if self._handed_at is not None:
            self._depth.worked(time.monotonic() - self._handed_at)
            self._handed_at = None
        if self._current is not None:
            self._done.append(self._current)
            self._current = None

    def _start_ahead(self) -> Lease | None:
        """Under _cond: the oldest lease taken ahead that no restore fenced, now the consumer's (None: none)."""
        while self._ahead:
            lease, generation = self._ahead.popleft()
            self._cond.notify_all()
            if generation == self._stream.generation:
                self._current = lease
                self._started.append((lease, generation))
                self._handed_at = time.monotonic()
                return lease
            self._stale.append(lease)
        return None

    def _stale_to_give_back(self) -> list[Lease]:
        """Under _cond: the leases from before a restore that the consumer found, now its to give back."""
        stale, self._stale = self._stale, []
        self._returning += len(stale)
        return stale

    def _give_back_stale(self, stale: list[Lease]) -> None:
        """Gives back leases from before a restore, counted in ``_returning`` by the caller under _cond."""
        try:
            for lease in stale:
                # Fenced, the server refuses it; leased after the restore, it goes back unread.
                try:
                    self._stream.give_back(lease, RESTORED_REASON)
                except Exception:
                    # Not given back, its lease runs out and the item goes on;
                    # the thread that called this must live on.
                    log.exception("work queue %s: could not give back lease %s", self._stream.name, lease.id)
        finally:
            if stale:
                with self._cond:
                    self._returning -= len(stale)
                    self._cond.notify_all()

    def close(self) -> None:
        """Stops taking ahead and gives back what was taken and not started (the lease in hand stays open)."""
        with self._cond:
            self._closed = True
            left = [lease for lease, _generation in self._ahead] + self._stale
            self._ahead.clear()
            self._stale = []
            self._cond.notify_all()
        self._tell()
        for lease in left:
            self._stream.give_back(lease, STOPPED_REASON)
        if self._thread is not threading.current_thread():
            self._thread.join(_CLOSE_SECONDS)


def leases(stream: Stream, depth: int, refill: int | None = None, most: int | None = None) -> Iterator[Lease]:
    """``stream.leases()`` with ``depth`` leases taken ahead (0: none, and ``stream`` then has ``lag=1``).

    ``refill``: take again once fewer than that are ahead (default: the
    depth of the moment); ``most``: ``LookAhead``'s.

    Closed before the queue's end (the consumer stopped), it gives back what
    was taken ahead unread and the lease in hand for another attempt.
    """
    if depth == 0:
        yield from stream.leases()
        return
    yield from consume(LookAhead(stream, depth, refill=refill, most=most))


def consume(ahead: LookAhead) -> Iterator[Lease]:
    """``ahead``'s leases until its queue ends, as ``leases()`` (a look-ahead opened before its consumer began)."""
    try:
        yield from ahead
    except GeneratorExit:
        ahead.close()
        ahead.stream.abort("the consumer stopped before finishing this item")
        raise
    finally:
        ahead.close()
