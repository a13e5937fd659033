"""What a process holds on one job, and each lease's state there: the leaser's bookkeeping, without a request.

``Holdings`` owns every lease the process holds until the server has
answered for it: finished and not yet acknowledged, being acknowledged,
taken ahead and not started, its record range being read. Every change
is one method under one lock, so no reader of it (the heartbeat, a
consumer's thread, a take ahead) sees a lease between two states. The
requests themselves are the ``Leaser``'s (leaser.py), which calls these
before and after each.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Callable

from .protocol import Lease
from .tracker import RangeTracker


class Holdings:
    def __init__(self):
        # Reentrant: a method may be called with the lock held (Condition's default lock is an RLock).
        self.lock = threading.Condition()
        # Handed out before anything is taken: a restarted worker's own leases
        # and the works found only in its LocalWorkMgr's folder (hand_first).
        self._first: collections.deque[Lease] = collections.deque()
        self._held: dict[int, Lease] = {}
        # Finished by their consumers, not yet acknowledged by the server:
        # sent with the next request, and heartbeated until then.
        self._finished: dict[int, Lease] = {}
        # Leases in an acknowledgement on its way. A heartbeat may carry one
        # too (it is not held up by one that waits on the server): the
        # server then reports it lost, which is not news.
        self._sending: set[int] = set()
        self._reported_lost: set[int] = set()
        # The record ranges being read, by lease: their positions go with
        # each heartbeat, and splits asked of them are answered from them.
        self._trackers: dict[int, RangeTracker] = {}
        # Leases taken ahead of their consumer (worker_sdk.look_ahead), by id:
        # the consumer's claim, which takes one out of its reach unless it
        # started it already (its lock decides which comes first). A
        # give-back asked of one is answered with it. Those started go with
        # the next take, which tells the server not to ask for them.
        self._unstarted: dict[int, Callable[[], bool]] = {}
        self._started: set[int] = set()
        # Leases held here that the server refused (lost: expired and read by
        # another worker, or fenced) or that went back unanswered, each
        # counted once: what a synchronous rank asks to know whether its
        # epoch kept everything it leased.
        self.lost = 0
        # Restores that made it forget every lease (forget_all). A lease a
        # take brought, refused by hold_ahead after one of them, may still be
        # the process's on the server: worker_sdk.look_ahead gives it back.
        self.restores = 0

    # -- held leases ---------------------------------------------------------------

    def known(self) -> int:
        """Leases this process holds on the job (finished ones not yet acknowledged included)."""
        with self.lock:
            return len(self._held)

    def hand_first(self, leases: list[Lease]) -> None:
        """Leases to hand out before taking any: held (and heartbeated) from now, local ones aside."""
        with self.lock:
            self._first.extend(leases)
            for lease in leases:
                if not lease.local:
                    self._held[lease.id] = lease

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease`` (its token, not only its item) is held and not being acknowledged."""
        with self.lock:
            held = self._held.get(lease.id)
            return held is not None and held.token == lease.token and lease.id not in self._sending

    def answered_for(self, lease: Lease) -> bool:
        """Whether the server answered for ``lease`` (its acknowledgement, give-back or loss): held no more under its token."""
        with self.lock:
            held = self._held.get(lease.id)
            return held is None or held.token != lease.token

    def held_pairs(self) -> list[tuple[int, int]]:
        """(id, token) of every lease of the server's held."""
        with self.lock:
            return [(lease.id, lease.token) for lease in self._held.values() if not lease.local]

    def done_elsewhere(self, lease: Lease) -> None:
        """The process ``lease`` was handed to completed it (worker_sdk.sync): it is held no more (its item may be, anew)."""
        with self.lock:
            self._forget(lease)

    def forget_all(self) -> None:
        """The server fenced every lease (a restore): hold nothing, report nothing lost (but count them)."""
        with self.lock:
            self.restores += 1
            self._reported_lost.update(self._held)
            self.lost += len(self._held)
            self._held.clear()
            self._finished.clear()
            self._unstarted.clear()
            self._started.clear()
            for tracker in self._trackers.values():
                tracker.stop()  # its records are read again from the snapshot's position
            self._trackers.clear()

    def lose(self, lease_id: int, token: int | None) -> tuple[bool, Callable[[], bool] | None, bool]:
        """``lease_id`` is the process's no more: (whether it was forgotten, its claim if taken ahead, reported before).

        ``token``: the refused lease's. A lease id is its item's, so the item
        may be held again under a newer token; that lease stands.
        """
        with self.lock:
            held = self._held.get(lease_id)
            if token is not None and held is not None and held.token != token:
                return False, None, True
            if self._held.pop(lease_id, None) is not None:
                self.lost += 1
            self._finished.pop(lease_id, None)
            claim = self._unstarted.pop(lease_id, None)
            self._started.discard(lease_id)
            tracker = self._trackers.pop(lease_id, None)
            if tracker is not None:
                tracker.stop()  # its records are another worker's now
            reported = lease_id in self._reported_lost
            self._reported_lost.add(lease_id)
            return True, claim, reported

    def _forget(self, lease: Lease) -> bool:
        """Under the lock: ``lease`` is held no more, unless its item was leased again since (a newer token)."""
        finished = self._finished.get(lease.id)
        if finished is not None and finished.token == lease.token:
            del self._finished[lease.id]
        held = self._held.get(lease.id)
        if held is not None and held.token != lease.token:
            return False
        self._held.pop(lease.id, None)
        return True

    # -- taking --------------------------------------------------------------------

    def before_take(self, finished: list[Lease]) -> tuple[Lease | None, tuple[int, ...]]:
        """``finished`` is to be acknowledged; (a lease to hand out first if any, the started ids the take names)."""
        with self.lock:
            self.finish(finished)
            if self._first:
                return self._first.popleft(), ()
            return None, tuple(sorted(self._started))

    def took(self, sent: list[Lease], started: tuple[int, ...], leases: list[Lease]) -> None:
        """A take answered: ``sent`` acknowledged (or refused), ``started`` heard, ``leases`` held."""
        with self.lock:
            # Under one lock with their end of sending: settle() never sees
            # them unsent and unacknowledged, and sends them again.
            self._sending.difference_update(lease.id for lease in sent)
            for lease in sent:
                self._finished.pop(lease.id, None)
                self._held.pop(lease.id, None)
            self.lock.notify_all()
            self._started.difference_update(started)
            for lease in leases:
                self._held[lease.id] = lease

    # -- taken ahead -----------------------------------------------------------------

    def hold_ahead(self, lease: Lease, claim: Callable[[], bool]) -> bool:
        """``lease`` was taken ahead: a give-back asked of it, or its loss, calls ``claim``; False when it is lost already.

        ``claim`` takes the lease out of its consumer's reach and returns
        True, or returns False once the consumer has started it. A lease a
        heartbeat found lost before this call must not be read at all.
        """
        with self.lock:
            if lease.local:
                return True
            if lease.id not in self._held:
                return False
            self._unstarted[lease.id] = claim
            return True

    def started(self, leases: list[Lease]) -> None:
        """The consumer started these leases taken ahead: the next take says so, and none is given back."""
        with self.lock:
            for lease in leases:
                if not lease.local:  # a work found only in a LocalWorkMgr's folder is no lease of the server's
                    self._unstarted.pop(lease.id, None)
                    self._started.add(lease.id)

    def asked_back(self, lease_id: int) -> tuple[Callable[[], bool] | None, Lease | None]:
        """A give-back asked of ``lease_id``: its claim (None once started) and the lease (None once not held)."""
        with self.lock:
            return self._unstarted.pop(lease_id, None), self._held.get(lease_id)

    def restarted(self, lease_id: int) -> None:
        """Its consumer started it before a give-back could claim it: the next heartbeat says so."""
        with self.lock:
            if lease_id in self._held:
                self._started.add(lease_id)

    def started_known(self, lease_ids: list[int]) -> None:
        """The server heard that these leases started: no take need say it again."""
        with self.lock:
            self._started.difference_update(lease_ids)

    def to_give_back(self, lease: Lease) -> bool:
        """``lease`` goes back unread: being sent from now. False for a local work, which the next consumer reads first."""
        with self.lock:
            if lease.local:
                self._first.appendleft(lease)
                return False
            self._unstarted.pop(lease.id, None)
            self._sending.add(lease.id)
            return True

    def given_back(self, lease: Lease, refused: bool = False) -> None:
        """The server answered a give-back of ``lease`` (``refused``: it was lost, or no answer came): held no more,
        and its loss is not news."""
        with self.lock:
            if refused:
                self.lost += 1
            self._sending.discard(lease.id)
            self.lock.notify_all()
            self._forget(lease)
            self._reported_lost.add(lease.id)

    # -- acknowledging ---------------------------------------------------------------

    def finish(self, leases: list[Lease]) -> None:
        """``leases`` are finished: each is acknowledged with the next request that carries completions."""
        with self.lock:
            for lease in leases:
                if not lease.local:  # nothing of the server's to acknowledge
                    self._finished[lease.id] = lease

    def start_sending(self) -> list[Lease]:
        """The finished leases no other request is sending, marked as sent by the caller."""
        with self.lock:
            sent = [lease for lease in self._finished.values() if lease.id not in self._sending]
            self._sending.update(lease.id for lease in sent)
            return sent

    def sending(self, leases: list[Lease]) -> None:
        with self.lock:
            self._sending.update(lease.id for lease in leases)

    def stop_sending(self, sent: list[Lease]) -> None:
        """``sent`` got no answer: still finished, the next request sends them."""
        with self.lock:
            self._sending.difference_update(lease.id for lease in sent)
            self.lock.notify_all()

    def answered(self, leases: list[Lease]) -> None:
        """The server answered for ``leases`` (marked as sending): they are held no more."""
        with self.lock:
            for lease in leases:
                self._sending.discard(lease.id)
                if self._forget(lease):
                    self._unstarted.pop(lease.id, None)
                    self._started.discard(lease.id)
            self.lock.notify_all()

    def unfinished(self) -> list[Lease]:
        """Every lease of the server's held that no consumer here finished, marked as being sent (given back)."""
        with self.lock:
            leases = [
                lease
                for lease in self._held.values()
                if not lease.local and lease.id not in self._finished and lease.id not in self._sending
            ]
            self._sending.update(lease.id for lease in leases)
            return leases

    def wait_sent(self, deadline: float) -> bool | None:
        """Waits while every finished lease is on its way: True once none is left, False at ``deadline``.

        None: some finished lease is not being sent (it finished meanwhile),
        for the caller to send.
        """
        with self.lock:
            while self._finished and self._finished.keys() <= self._sending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True if not self._finished else None

    # -- record ranges ----------------------------------------------------------------

    def track(self, lease: Lease, tracker: RangeTracker | None = None) -> RangeTracker:
        """A tracker for reading ``lease``'s record range: its position is reported, splits asked of it answered.

        ``tracker``: one of the caller's making with RangeTracker's interface
        (a loader's, whose loop claims in another process: worker_sdk.receipts).
        """
        tracker = tracker or RangeTracker(lease.start, lease.end)
        with self.lock:
            self._trackers[lease.id] = tracker
        return tracker

    def untrack(self, lease: Lease, tracker: RangeTracker) -> None:
        """``tracker`` (``track(lease)``'s) is done: no longer reported, no split asked of it.

        Only that tracker: the item may be leased again under a newer token
        meanwhile (its lease was lost), and read here by another reader.
        """
        with self.lock:
            if self._trackers.get(lease.id) is tracker:
                del self._trackers[lease.id]

    def stop_tracking(self, lease: Lease) -> None:
        """``lease``'s consumer stopped: a split the heartbeat answers now cannot cut below what was received."""
        with self.lock:
            tracker = self._trackers.pop(lease.id, None)
        if tracker is not None:
            tracker.stop()

    def tracker(self, lease_id: int) -> RangeTracker | None:
        """The tracker of the record range being read under ``lease_id``; None when none is read now."""
        with self.lock:
            return self._trackers.get(lease_id)

    def reads_ranges(self) -> bool:
        """Whether a record range is being read under a lease held here."""
        with self.lock:
            return bool(self._trackers)

    def range_read(self, lease_id: int) -> tuple[Lease, RangeTracker] | None:
        """The lease held as ``lease_id`` and its range's tracker, when that range is being read."""
        with self.lock:
            lease, tracker = self._held.get(lease_id), self._trackers.get(lease_id)
        return None if lease is None or tracker is None else (lease, tracker)

    # -- what the heartbeat sends ------------------------------------------------------

    def to_heartbeat(self) -> list[tuple[Lease, RangeTracker | None, bool]]:
        """Each lease held and not being acknowledged, its range's tracker if one is read, and whether its consumer started it."""
        with self.lock:
            return [
                (lease, self._trackers.get(lease.id), lease.id in self._started)
                for lease in self._held.values()
                if lease.id not in self._sending
            ]
