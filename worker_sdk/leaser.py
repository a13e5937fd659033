"""A process's leases on one job: the one owner of what the process holds.

``Leaser`` takes items, acknowledges finished ones, fails given-up ones and
keeps every held lease alive with its ``Heartbeat`` (heartbeat.py), which
reads what is held through the methods below. Streams (stream.py)
decide *when* an item is finished; only the leaser talks to the server about
leases, so no lease can be forgotten between the two: a finished lease stays
held (and heartbeated) until the server has acknowledged it, however many
requests that takes.

A lease handed to another process with its records (synchronous training:
worker_sdk.sync) is completed or given back by that process
(``sync.HandedLeases``); its taker's leaser keeps holding and heartbeating it
until the server answers that it is done.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

from . import at_end, errors, stall
from .client import Client
from .heartbeat import Heartbeat
from .protocol import Completion, Lease, TakeAnswer, TakeRequest, TakeScope
from .tracker import RangeTracker

log = logging.getLogger("worker_sdk")

# Seconds a take that finds nothing may wait on the server for work (it
# answers as soon as some comes, or the queue ends); a server over WSGI
# answers at once.
TAKE_WAIT = 20.0
# Seconds settle() waits for the completions other requests carry: a take
# ahead answers in milliseconds; a take waiting on the server for work
# committed its completions before it began to wait.
SETTLE_SECONDS = 5.0
# The most completions one request carries: the look-ahead's largest take
# (look_ahead.MAX_COUNT), well within the server's SHARDLINE_MAX_TAKE.
COMPLETE_BATCH = 64
GIVE_BACK_REASON = "taken ahead and not started; given back to a worker with nothing to read"


class Leaser:
    """Takes, acknowledges and heartbeats the leases of one job for one worker name (one per process)."""

    def __init__(
        self,
        client: Client,
        job_id: int,
        worker: str,
        consumer: str,
        lease_timeout: float,
        name: str,
        on_leased: Callable[[Lease], None] | None = None,
        restartable: bool = False,
    ):
        self.client = client
        # Told of every lease this process gets (a LocalWorkMgr records its work).
        self.on_leased = on_leased
        # Its restart takes its leases back (a LocalWorkMgr's stable name): the
        # server leaves them to it when this process's heartbeat drops.
        self.restartable = restartable
        # Handed out before anything is taken: a restarted worker's own leases
        # and the works found only in its LocalWorkMgr's folder (hand_first).
        self._first: collections.deque[Lease] = collections.deque()
        # The server completes many leases per request (POST /api/v1/leases/complete/); False once it said it does not.
        self._complete_many = True
        self.job_id = job_id
        self.worker = worker
        self.consumer = consumer
        self.name = name
        self._held: dict[int, Lease] = {}
        # Finished by their consumers, not yet acknowledged by the server:
        # sent with the next request, and heartbeated until then.
        self._finished: dict[int, Lease] = {}
        # Leases in an acknowledgement on its way. A heartbeat may carry one
        # too (it is not held up by one that waits on the server): the
        # server then reports it lost, which is not news.
        self._sending: set[int] = set()
        self._lock = threading.Condition()
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
        self._heartbeat = Heartbeat(self, lease_timeout)

    # -- what the process holds --------------------------------------------------

    def known(self) -> int:
        """Leases this process holds on the job (finished ones not yet acknowledged included)."""
        with self._lock:
            return len(self._held)

    def track(self, lease: Lease) -> RangeTracker:
        """A tracker for reading ``lease``'s record range: its position is reported, splits asked of it answered."""
        tracker = RangeTracker(lease.start, lease.end)
        with self._lock:
            self._trackers[lease.id] = tracker
        self._heartbeat.reading()
        return tracker

    def stall_clock(self) -> stall.Clock:
        """The clock of this consumer's data stall on the job, in this process: its heartbeats send it."""
        return stall.clock(self.job_id, self.consumer)

    def untrack(self, lease: Lease, tracker: RangeTracker) -> None:
        """``tracker`` (``track(lease)``'s) is done: no longer reported, no split asked of it.

        Only that tracker: the item may be leased again under a newer token
        meanwhile (its lease was lost), and read here by another reader.
        """
        with self._lock:
            if self._trackers.get(lease.id) is tracker:
                del self._trackers[lease.id]

    def tracker(self, lease_id: int) -> RangeTracker | None:
        """The tracker of the record range being read under ``lease_id``; None when none is read now."""
        with self._lock:
            return self._trackers.get(lease_id)

    def hand_first(self, leases: list[Lease]) -> None:
        """Leases to hand out before taking any: held (and heartbeated) from now, local ones aside."""
        with self._lock:
            self._first.extend(leases)
            for lease in leases:
                if not lease.local:
                    self._held[lease.id] = lease
        for lease in leases:
            if self.on_leased is not None and not lease.local:
                self.on_leased(lease)

    def take(
        self,
        finished: list[Lease] = (),
        scope: TakeScope = TakeScope(),
        tracks: bool = False,
        wait: bool = True,
        ahead: bool = False,
        count: int = 1,
    ) -> tuple[list[Lease], TakeAnswer]:
        """Acknowledges ``finished`` (and any earlier finished lease) and leases one item of ``scope``, in one request.

        Returns (new leases, the server's answer). If the request fails, the
        finished leases stay held and go with the next request. ``tracks``:
        the caller claims records and answers splits (worker_sdk.tracker).
        ``wait``: the server may hold a take that finds nothing (TAKE_WAIT seconds).
        ``ahead``: its consumer is still reading; what it leases may be
        asked back until the consumer starts it (``hold_ahead``, ``started``).
        """
        with self._lock:
            for lease in finished:
                if not lease.local:  # nothing of the server's to acknowledge
                    self._finished[lease.id] = lease
            if self._first:
                # The finished ones go with the next take (held until then).
                return [self._first.popleft()], TakeAnswer()
            started = tuple(sorted(self._started))
        sent = self._start_sending()
        request = TakeRequest(
            self.worker,
            consumer=self.consumer,
            count=count,
            complete=tuple(Completion(lease.id, lease.token) for lease in sent),
            wait=TAKE_WAIT if wait else 0.0,
            tracks=tracks,
            scope=scope,
            ahead=ahead,
            started=started,
        )
        try:
            answer = self.client.take(self.job_id, request)
        except BaseException:
            self._stop_sending(sent)
            raise
        leases = list(answer.leases)
        with self._lock:
            # Under the same lock as their end of sending: settle() never
            # sees them unsent and unacknowledged, and sends them again.
            self._sending.difference_update(lease.id for lease in sent)
            for lease in sent:
                self._finished.pop(lease.id, None)
                self._held.pop(lease.id, None)
            self._lock.notify_all()
            self._started.difference_update(started)
            for lease in leases:
                self._held[lease.id] = lease
        if leases:
            self._heartbeat.leased()
        if self.on_leased is not None:
            for lease in leases:
                self.on_leased(lease)
        refused = {lease.id: lease.token for lease in sent}
        for lease_id in answer.lost:
            self.lost(lease_id, "its completion was refused", refused.get(lease_id))
        return leases, answer

    def hold_ahead(self, lease: Lease, claim: Callable[[], bool]) -> bool:
        """``lease`` was taken ahead: a give-back asked of it, or its loss, calls ``claim``; False when it is lost already.

        ``claim`` takes the lease out of its consumer's reach and returns
        True, or returns False once the consumer has started it. A lease a
        heartbeat found lost before this call must not be read at all.
        """
        with self._lock:
            if lease.local:
                return True
            if lease.id not in self._held:
                return False
            self._unstarted[lease.id] = claim
            return True

    def started(self, leases: list[Lease]) -> None:
        """The consumer started these leases taken ahead: the next take says so, and none is given back."""
        with self._lock:
            for lease in leases:
                if not lease.local:  # a work found only in a LocalWorkMgr's folder is no lease of the server's
                    self._unstarted.pop(lease.id, None)
                    self._started.add(lease.id)

    def release_unread(self, lease: Lease, reason: str) -> bool:
        """Gives ``lease`` back unread, its attempt returned: its consumer will not read it (a lease taken ahead).

        False when the server did not take it back (it was lost meanwhile, or unreachable).
        """
        with self._lock:
            if lease.local:
                # A work of a LocalWorkMgr's folder: the next consumer here reads it first, as before.
                self._first.appendleft(lease)
                return True
            self._unstarted.pop(lease.id, None)
            self._sending.add(lease.id)
        released = False
        try:
            self.client.release(lease.id, lease.token, reason)
            released = True
        except errors.LeaseLostError:
            pass  # expired and taken back meanwhile: not news
        except errors.ShardlineError as exc:
            # Nobody reads it here: its lease runs out and the item goes on.
            log.warning("work queue %s: could not give back lease %s: %s", self.name, lease.id, exc)
        finally:
            self._stop_sending([lease])
        with self._lock:
            self._forget_held(lease)
            self._reported_lost.add(lease.id)
        return released

    def asked_back(self, lease_id: int) -> None:
        """A worker with nothing to read asks for a lease taken ahead: it goes unless its consumer started it."""
        with self._lock:
            claim, lease = self._unstarted.pop(lease_id, None), self._held.get(lease_id)
        if lease is None or claim is None:
            return
        if not claim():
            # Its consumer started it (the look-ahead has not told yet): the
            # next heartbeat says so, which drops the request and wakes the
            # asker to ask elsewhere.
            with self._lock:
                if lease_id in self._held:
                    self._started.add(lease_id)
            return
        # On a thread of its own: a release that retries must not hold up
        # the heartbeats of the leases this process keeps.
        threading.Thread(
            target=self._give_back_asked, args=(lease,), name=f"shardline-give-back-{self.name}", daemon=True
        ).start()

    def _give_back_asked(self, lease: Lease) -> None:
        if self.release_unread(lease, GIVE_BACK_REASON):
            log.info("work queue %s: lease %s, taken ahead, given back to an idle worker", self.name, lease.id)

    def complete(self, leases: list[Lease]) -> None:
        """Acknowledges finished leases now, with every other finished one, in one request."""
        with self._lock:
            for lease in leases:
                if not lease.local:
                    self._finished[lease.id] = lease
        self.flush()

    def flush(self) -> None:
        """Sends every finished lease that the server has not acknowledged yet: one request per COMPLETE_BATCH.

        One request, not one per lease: a reader that leases many items at
        once (a synchronous rank's quota) finishes many before a take
        could carry them, and each request costs the server about as much
        as a take (bench/RESULTS.md).
        """
        sent = self._start_sending()
        for first in range(0, len(sent), COMPLETE_BATCH):
            batch = sent[first : first + COMPLETE_BATCH]
            try:
                lost = self._send_completions(batch)
            except BaseException:
                self._stop_sending(sent[first:])  # still finished: the next request sends them (a repeat is fine)
                raise
            for lease in batch:
                if lease.id in lost:
                    self.lost(lease.id, "its completion was refused", lease.token)
            self._reported(batch)

    def _send_completions(self, leases: list[Lease]) -> set[int]:
        """Completes ``leases`` on the server; the ids it refused as lost."""
        if self._complete_many:
            try:
                answer = self.client.complete_many([Completion(lease.id, lease.token) for lease in leases])
                return set(answer.get("lost", ()))
            except errors.APIError as exc:
                if exc.status != 404:
                    raise
                # A server older than this SDK (a fleet upgraded before its
                # server): one request per lease, as it was answered before.
                self._complete_many = False
                log.info(
                    "work queue %s: the server completes one lease per request (it is older than the SDK)", self.name
                )
        lost = set()
        for lease in leases:
            try:
                self.client.complete(lease.id, lease.token)
            except errors.LeaseLostError:
                lost.add(lease.id)
        return lost

    def settle(self, timeout: float = SETTLE_SECONDS) -> bool:
        """Sends every finished lease and waits for those other requests are sending; False if some are still out.

        A snapshot taken next counts every item a consumer here finished
        (a take ahead on another thread may be carrying one).
        """
        deadline = time.monotonic() + timeout
        while True:
            self.flush()
            with self._lock:
                while self._finished and self._finished.keys() <= self._sending:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._lock.wait(left)
                if not self._finished:
                    return True
            # Finished meanwhile: the next round sends them, until the deadline.
            if time.monotonic() >= deadline:
                return False

    def _start_sending(self) -> list[Lease]:
        """The finished leases no other request is sending."""
        with self._lock:
            sent = [lease for lease in self._finished.values() if lease.id not in self._sending]
            self._sending.update(lease.id for lease in sent)
            return sent

    def _stop_sending(self, sent: list[Lease]) -> None:
        with self._lock:
            self._sending.difference_update(lease.id for lease in sent)
            self._lock.notify_all()

    def release_unfinished(self, reason: str) -> None:
        """Gives back unread, without using an attempt, every lease held that no consumer here finished.

        A synchronous rank's loader process calls it as it ends
        (worker_sdk.torch_sync): the records it handed over that the rank never
        received (the DataLoader's prefetch when the epoch stopped) are in no
        one's account, and their items would wait for their lease to expire.
        A lease the rank completed or gave back meanwhile is refused as lost:
        that is not news, and nothing is logged.
        """
        with self._lock:
            leases = [
                lease
                for lease in self._held.values()
                if not lease.local and lease.id not in self._finished and lease.id not in self._sending
            ]
            self._sending.update(lease.id for lease in leases)
        for lease in leases:
            try:
                self.client.release(lease.id, lease.token, reason)
            except errors.LeaseLostError:
                pass
            finally:
                self._stop_sending([lease])
            with self._lock:
                self._forget_held(lease)
                self._reported_lost.add(lease.id)  # the heartbeat need not report it lost either

    def leave_to_receiver(self) -> None:
        """Everything held was handed to another process, and this one ends: the leases stay with their receiver.

        An agreed epoch's loader process whose records ran out (worker_sdk.torch_sync):
        the DataLoader ends it while batches it read may still wait for the
        rank, which completes or gives back each item once it trained on it.
        From now on its heartbeats say that a dropped connection gives
        nothing back, and one goes now: it moves the leases' expiry, so the
        held heartbeat, which said otherwise, gives nothing back as it drops
        either (holder_gone.sql). What the rank never receives expires a
        lease timeout later.
        """
        self.restartable = True
        with self._lock:
            held = [(lease.id, lease.token) for lease in self._held.values() if not lease.local]
        if held:
            try:
                self.client.extend(held, waiting=at_end.process_waits(), restartable=True)
            except errors.ShardlineError as exc:
                log.warning("work queue %s: leaving leases to their receiver failed: %s", self.name, exc)

    def fail(self, leases: list[Lease], error: str) -> None:
        """Gives leases back with an error, for another attempt (or failed after the job's max_attempts)."""
        for lease in leases:
            if lease.local:
                continue  # read again by the next restart, as DeepRec would
            with self._lock:
                self._sending.add(lease.id)
            self._report(
                lease, lambda: self.client.fail(lease.id, lease.token, error), "its failure report was refused"
            )

    def stop_at(self, lease: Lease, position: int | None, reason: str) -> None:
        """Its consumer stopped at record ``position``: ``[start, position)`` is read, the rest goes back as a new item.

        The rest is cut off as a split would (server/sql/cut.sql), so no
        record the consumer received is read again. With nothing received
        (or not a record range) the item is given back whole, as ``fail``.
        """
        with self._lock:
            tracker = self._trackers.pop(lease.id, None)
        if tracker is not None:
            tracker.stop()  # a split the heartbeat answers now cannot cut below what was received
        if lease.local or lease.start is None or position is None or position <= lease.start:
            self.fail([lease], reason)
            return
        if position < lease.end:
            try:
                self.client.split(lease.id, lease.token, position)
            except errors.LeaseLostError:
                self.lost(lease.id, "its cut was refused", lease.token)
                return
            except errors.ShardlineError as exc:
                log.warning("work queue %s: could not give back the rest of lease %s: %s", self.name, lease.id, exc)
                self.fail([lease], reason)
                return
        self.complete([lease])

    def _report(self, lease: Lease, send, refused: str) -> None:
        """Sends one lease's completion or failure (marked as sending by the caller); it is held no more."""
        try:
            send()
        except errors.LeaseLostError:
            self.lost(lease.id, refused, lease.token)
        except BaseException:
            self._stop_sending([lease])  # still finished: the next request sends it
            raise
        self._reported([lease])

    def _reported(self, leases: list[Lease]) -> None:
        """The server answered for ``leases`` (marked as sending): they are held no more."""
        with self._lock:
            for lease in leases:
                self._sending.discard(lease.id)
                if self._forget_held(lease):
                    self._unstarted.pop(lease.id, None)
                    self._started.discard(lease.id)
            self._lock.notify_all()

    def forget_all(self) -> None:
        """The server fenced every lease (a restore): hold nothing, report nothing lost."""
        with self._lock:
            self._reported_lost.update(self._held)
            self._held.clear()
            self._finished.clear()
            self._unstarted.clear()
            self._started.clear()
            for tracker in self._trackers.values():
                tracker.stop()  # its records are read again from the snapshot's position
            self._trackers.clear()

    def lost(self, lease_id: int, why: str, token: int | None = None) -> None:
        """``lease_id`` is this process's no more (the server refused it): forget it, say so once.

        ``token``: the refused lease's. A lease id is its item's, so the item
        may be held again under a newer token: after a restore re-opened it,
        the take that carried the old lease's refused completion can lease
        it anew. That lease stands.
        """
        with self._lock:
            held = self._held.get(lease_id)
            if token is not None and held is not None and held.token != token:
                return
            self._held.pop(lease_id, None)
            self._finished.pop(lease_id, None)
            claim = self._unstarted.pop(lease_id, None)
            self._started.discard(lease_id)
            tracker = self._trackers.pop(lease_id, None)
            if tracker is not None:
                tracker.stop()  # its records are another worker's now
            reported = lease_id in self._reported_lost
            self._reported_lost.add(lease_id)
        # Taken ahead and not started: its consumer never starts it (another
        # worker reads it now). Outside the lock: a claim takes the
        # look-ahead's, which holds this one while it hands a lease over.
        if claim is not None:
            claim()
        if reported:
            return
        log.warning(
            "work queue %s: lease %s was lost (%s): it expired and went to another worker, "
            "or the job was restored; it is not counted twice",
            self.name,
            lease_id,
            why,
        )

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease`` (its token, not only its item) is held and not being acknowledged."""
        with self._lock:
            held = self._held.get(lease.id)
            return held is not None and held.token == lease.token and lease.id not in self._sending

    def _forget_held(self, lease: Lease) -> bool:
        """Under the lock: ``lease`` is held no more, unless its item was leased again since (a newer token)."""
        finished = self._finished.get(lease.id)
        if finished is not None and finished.token == lease.token:
            del self._finished[lease.id]
        held = self._held.get(lease.id)
        if held is not None and held.token != lease.token:
            return False
        self._held.pop(lease.id, None)
        return True

    # -- what the heartbeat reads and hears ---------------------------------------

    def to_heartbeat(self) -> list[tuple[Lease, RangeTracker | None, bool]]:
        """Each lease held and not being acknowledged, its range's tracker if one is read, and whether its consumer started it."""
        with self._lock:
            return [
                (lease, self._trackers.get(lease.id), lease.id in self._started)
                for lease in self._held.values()
                if lease.id not in self._sending
            ]

    def reads_ranges(self) -> bool:
        """Whether a record range is being read under a lease of this leaser."""
        with self._lock:
            return bool(self._trackers)

    def range_read(self, lease_id: int) -> tuple[Lease, RangeTracker] | None:
        """The lease held as ``lease_id`` and its range's tracker, when that range is being read."""
        with self._lock:
            lease, tracker = self._held.get(lease_id), self._trackers.get(lease_id)
        return None if lease is None or tracker is None else (lease, tracker)

    def started_known(self, lease_ids: list[int]) -> None:
        """The server heard that these leases started: no take need say it again."""
        with self._lock:
            self._started.difference_update(lease_ids)

    def done_elsewhere(self, lease: Lease) -> None:
        """The process ``lease`` was handed to completed it (worker_sdk.sync): it is held no more (its item may be, anew)."""
        with self._lock:
            self._forget_held(lease)

    def stop(self) -> None:
        self._heartbeat.stop()
