"""What one process reads a WorkQueue with: its leaser (one heartbeat thread), its streams and its takers.

A WorkQueue is shared by every consumer of a process and survives a fork
(a DataLoader's loader processes inherit it). What reads through it does
not: a forked child starts its own leaser under its own worker name, and
never heartbeats, completes or gives back its parent's leases. This object
owns that per-process state, so the rule lives in one place: whatever a
call finds from another process is dropped, and rebuilt here on first use.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable

from . import look_ahead
from .leaser import SETTLE_SECONDS, Leaser
from .stream import Stream
from .taker import Taker

log = logging.getLogger("worker_sdk")


class Consumers:
    """This process's leaser, streams and takers for one queue (``WorkQueue.consumers``): what the SDK's adapters read with.

    ``name``: the queue's, for its streams' messages. ``make_leaser``
    builds the process's leaser (it creates or attaches the job first);
    ``lock`` is the queue's, held while the leaser is made, so
    that threads making their first take at once (``dataset()``'s interleave
    slots) share one, and a job replaced meanwhile is never half-seen.
    """

    def __init__(
        self, name: str, make_leaser: Callable[[], Leaser], lock: threading.RLock, look_ahead_depth: int, most: int
    ):
        self._name = name
        self._make_leaser = make_leaser
        self._lock = lock
        self._depth, self._most = look_ahead_depth, most
        self._leaser: Leaser | None = None
        self._pid: int | None = None
        # Every stream of this process, ended or not: close() acknowledges
        # what ended ones still hold, a restore re-opens them all.
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        self._takers: weakref.WeakSet[Taker] = weakref.WeakSet()
        # Look-aheads opened before their consumer begins (a synchronous
        # rank's next epoch): close() gives back what they took and it never read.
        self._opened: weakref.WeakSet[look_ahead.LookAhead] = weakref.WeakSet()
        self._default: Taker | None = None

    @property
    def current(self) -> Leaser | None:
        """This process's leaser if it has one now (None: none started, or only a parent's)."""
        return self._leaser if self._pid == os.getpid() else None

    def leaser(self) -> Leaser:
        """This process's leaser, started on first use (after a fork: the child's own)."""
        pid = os.getpid()
        leaser = self._leaser
        if leaser is not None and self._pid == pid:
            return leaser  # a stream asks for it several times per item: no lock once it is made
        with self._lock:
            if self._leaser is None or self._pid != pid:
                if self._pid is not None and self._pid != pid:
                    # A parent's consumers: read for it, never by this process.
                    self._streams = weakref.WeakSet()
                    self._takers = weakref.WeakSet()
                    self._opened = weakref.WeakSet()
                    self._default = None
                self._leaser = self._make_leaser()
                self._pid = pid
            return self._leaser

    def stream(
        self, lag: int | None = 1, tracks: bool = False, upto_epoch: int | None = None, sync: bool = False
    ) -> Stream:
        """A new consumer of the queue (see worker_sdk.stream); ``tracks``: its reader claims records.

        ``upto_epoch`` and ``sync``: a rank of synchronous training (worker_sdk.sync).
        """
        stream = Stream(self.leaser, self._name, lag, tracks, upto_epoch, sync)
        self._streams.add(stream)
        return stream

    def whole_items_stream(self) -> Stream:
        """A stream for a loop over whole items, shaped for ``look_ahead.leases(stream, depth)``."""
        return self.loop_stream(tracks=False)

    def loop_stream(self, tracks: bool) -> Stream:
        """A stream for a loop of this process that reads one lease at a time, shaped for ``look_ahead.leases(stream, depth)``.

        ``tracks``: its reader claims the records of record ranges (``ranges()``,
        a DataLoader's reader without loader processes), so their leases,
        taken ahead too, may be split from the start.
        """
        return self.stream(None if self._depth else 1, tracks)

    def taker(self) -> Taker:
        """A consumer that takes one item per call (``take()``), the queue's look-ahead of them leased ahead."""
        taker = Taker(self.whole_items_stream(), self._depth, self._most)
        self._takers.add(taker)
        return taker

    def default_taker(self) -> Taker:
        """This process's shared taker: the one eager ``take()`` hands items from, one after another."""
        if self._default is None or self._pid != os.getpid():
            self.leaser()
            self._default = self.taker()
        return self._default

    def opened_ahead(
        self, stream: Stream, depth: int, refill: int | None = None, retries: int = 0
    ) -> look_ahead.LookAhead:
        """A look-ahead over ``stream`` (one of these) that takes now, before its consumer begins.

        Its consumer reads it with ``look_ahead.consume``; what it took and
        no consumer began goes back unread with its ``close()``, with
        ``close_opened()``, or as the queue closes. ``retries``: takes that
        found nothing made again first.
        """
        ahead = look_ahead.LookAhead(stream, depth, refill=refill, retries=retries)
        self._opened.add(ahead)
        return ahead

    def close_opened(self) -> None:
        """Gives back what every look-ahead opened here took, unless its consumer began (it reads it)."""
        for ahead in list(self._opened):
            if not ahead.begun:
                ahead.close()

    def release_unfinished(self, reason: str) -> None:
        """Gives back unread every item this process holds and no consumer of it finished (a loader process ending)."""
        leaser = self.current
        if leaser is not None:
            leaser.release_unfinished(reason)

    def leave_handed(self) -> None:
        """This process handed every item it holds to another and ends: they stay leased for the receiver."""
        leaser = self.current
        if leaser is not None:
            leaser.leave_to_receiver()

    def reset_after_restore(self) -> None:
        """The server fenced every lease: forget them, and let finished consumers read again from the snapshot."""
        leaser = self.current
        if leaser is not None:
            leaser.held.forget_all()
        for stream in list(self._streams):
            stream.reset()

    def settle(self) -> None:
        """Acknowledges what every consumer here has finished, those another thread is sending included."""
        leaser = self.current
        if leaser is None:
            return
        for stream in list(self._streams):
            stream.acknowledge_now()
        if not leaser.settle():
            log.warning(
                "work queue: completions still on their way after %s s; a snapshot may not count them", SETTLE_SECONDS
            )

    def drop(self) -> None:
        """Stops this process's leaser and forgets it (a replaced job's leases mean nothing now)."""
        if self._leaser is not None:
            self.reset_after_restore()
            self._leaser.stop()
            self._leaser, self._pid = None, None

    def close(self) -> None:
        """Gives back what takers leased ahead, acknowledges what ended streams hold, stops the heartbeat."""
        leaser = self.current
        if leaser is None:
            return
        for taker in list(self._takers):
            taker.close()  # what take() leased ahead goes back unread
        for ahead in list(self._opened):
            ahead.close()  # so does what a consumer that never began took
        for stream in list(self._streams):
            if stream.ended:
                stream.finish()
        leaser.join_later()  # completions sent on a thread (a synchronous epoch's last) are answered first
        leaser.flush()
        leaser.stop()
        self._leaser = None
