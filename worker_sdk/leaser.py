"""A process's leases on one job: the only one that talks to the server about them.

``Leaser`` takes items, acknowledges finished ones, fails given-up ones and
keeps every held lease alive with its ``Heartbeat`` (heartbeat.py). What is
held, and each lease's state, is its ``Holdings`` (holdings.py), which the
heartbeat reads too. Streams (stream.py)
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

import logging
import threading
import time
from typing import Callable

from . import at_end, errors, stall
from .client import Client
from .heartbeat import Heartbeat
from .holdings import Holdings
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
    """Takes, acknowledges and heartbeats the leases of one job for one worker name (one per process).

    What it holds, and each lease's state, is its ``held`` (holdings.py); the
    requests are its own.
    """

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
        # The server completes many leases per request (POST /api/v1/leases/complete/); False once it said it does not.
        self._complete_many = True
        self.job_id = job_id
        self.worker = worker
        self.consumer = consumer
        self.name = name
        self.held = Holdings()
        self._heartbeat = Heartbeat(self, lease_timeout)
        # Completions sent on threads of their own (complete(later=True)), until they end.
        self._later: list[threading.Thread] = []
        self._later_lock = threading.Lock()

    def track(self, lease: Lease, tracker: RangeTracker | None = None) -> RangeTracker:
        """A tracker for reading ``lease``'s record range: its position is reported, splits asked of it answered (``Holdings.track``)."""
        tracker = self.held.track(lease, tracker)
        self._heartbeat.reading()
        return tracker

    def stall_clock(self) -> stall.Clock:
        """The clock of this consumer's data stall on the job, in this process: its heartbeats send it."""
        return stall.clock(self.job_id, self.consumer)

    def hand_first(self, leases: list[Lease]) -> None:
        """Leases to hand out before taking any: held (and heartbeated) from now, local ones aside."""
        self.held.hand_first(leases)
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
        leave: bool = False,
    ) -> tuple[list[Lease], TakeAnswer]:
        """Acknowledges ``finished`` (and any earlier finished lease) and leases one item of ``scope``, in one request.

        Returns (new leases, the server's answer). If the request fails, the
        finished leases stay held and go with the next request. ``tracks``:
        the caller claims records and answers splits (worker_sdk.tracker).
        ``wait``: the server may hold a take that finds nothing (TAKE_WAIT seconds).
        ``ahead``: its consumer is still reading; what it leases may be
        asked back until the consumer starts it (``held.hold_ahead``, ``held.started``).
        ``leave``: should it find nothing, the consumer stops taking; the server never holds it.
        """
        first, started = self.held.before_take(finished)
        if first is not None:
            return [first], TakeAnswer()  # the finished ones go with the next take (held until then)
        sent = self.held.start_sending()
        request = TakeRequest(
            self.worker,
            consumer=self.consumer,
            count=count,
            complete=tuple(Completion(lease.id, lease.token) for lease in sent),
            wait=TAKE_WAIT if wait and not leave else 0.0,
            tracks=tracks,
            scope=scope,
            ahead=ahead,
            started=started,
            leave=leave,
        )
        try:
            answer = self.client.take(self.job_id, request)
        except BaseException:
            self.held.stop_sending(sent)
            raise
        leases = list(answer.leases)
        self.held.took(sent, started, leases)
        if leases:
            self._heartbeat.leased()
        if self.on_leased is not None:
            for lease in leases:
                self.on_leased(lease)
        refused = {lease.id: lease.token for lease in sent}
        for lease_id in answer.lost:
            self.lost(lease_id, "its completion was refused", refused.get(lease_id))
        return leases, answer

    # -- leases taken ahead ------------------------------------------------------------

    def release_unread(self, lease: Lease, reason: str) -> bool:
        """Gives ``lease`` back unread, its attempt returned: its consumer will not read it (a lease taken ahead).

        False when the server did not take it back (it was lost meanwhile, or unreachable).
        """
        if not self.held.to_give_back(lease):
            return True  # a work of a LocalWorkMgr's folder: the next consumer here reads it first, as before
        released = False
        try:
            self.client.release(lease.id, lease.token, reason)
            released = True
        except errors.LeaseLostError:
            pass  # expired and taken back meanwhile: not news
        except errors.ShardlineError as exc:
            # Nobody reads it here: its lease runs out and the item goes on.
            log.warning("work queue %s: could not give back lease %s: %s", self.name, lease.id, exc)
        except BaseException:
            self.held.stop_sending([lease])
            raise
        self.held.given_back(lease, refused=not released)
        return released

    def asked_back(self, lease_id: int) -> None:
        """A worker with nothing to read asks for a lease taken ahead: it goes unless its consumer started it."""
        claim, lease = self.held.asked_back(lease_id)
        if lease is None or claim is None:
            return
        if not claim():
            # Its consumer started it (the look-ahead has not told yet): the
            # next heartbeat says so, which drops the request and wakes the
            # asker to ask elsewhere.
            self.held.restarted(lease_id)
            return
        # On a thread of its own: a release that retries must not hold up
        # the heartbeats of the leases this process keeps.
        threading.Thread(
            target=self._give_back_asked, args=(lease,), name=f"shardline-give-back-{self.name}", daemon=True
        ).start()

    def _give_back_asked(self, lease: Lease) -> None:
        if self.release_unread(lease, GIVE_BACK_REASON):
            log.info("work queue %s: lease %s, taken ahead, given back to an idle worker", self.name, lease.id)

    # -- acknowledging ------------------------------------------------------------------

    def complete(self, leases: list[Lease], later: bool = False) -> None:
        """Acknowledges finished leases now, with every other finished one, in one request.

        ``later``: the request goes on a thread of its own and the caller
        goes on (a synchronous rank at its epoch's end); ``settle()``, a
        snapshot and the queue's close wait for it.
        """
        self.held.finish(leases)
        if not later:
            self.flush()
            return
        thread = threading.Thread(target=self._flush_sent_later, name=f"shardline-complete-{self.name}", daemon=True)
        with self._later_lock:
            self._later = [sent for sent in self._later if sent.is_alive()] + [thread]
        thread.start()

    def join_later(self) -> None:
        """Waits for the completions sent on threads (``complete(later=True)``) to be answered or to give up.

        No deadline of its own: each ends within the transport's retries
        (SHARDLINE_RETRY_SECONDS). One that gave up leaves its leases
        finished, for the caller's next request to send.
        """
        with self._later_lock:
            threads, self._later = self._later, []
        for thread in threads:
            thread.join()

    def _flush_sent_later(self) -> None:
        try:
            self.flush()
        except errors.ShardlineError as exc:
            # Still finished: the next request that carries completions sends them.
            log.warning("work queue %s: completions not sent yet: %s", self.name, exc)

    def flush(self) -> None:
        """Sends every finished lease that the server has not acknowledged yet: one request per COMPLETE_BATCH.

        One request, not one per lease: a reader that leases many items at
        once (a synchronous rank's quota) finishes many before a take
        could carry them, and each request costs the server about as much
        as a take (bench/RESULTS.md).
        """
        sent = self.held.start_sending()
        for first in range(0, len(sent), COMPLETE_BATCH):
            batch = sent[first : first + COMPLETE_BATCH]
            try:
                lost = self._send_completions(batch)
            except BaseException:
                self.held.stop_sending(sent[first:])  # still finished: the next request sends them (a repeat is fine)
                raise
            for lease in batch:
                if lease.id in lost:
                    self.lost(lease.id, "its completion was refused", lease.token)
            self.held.answered(batch)

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
        self.join_later()  # what this process sent on threads, however long the transport retries
        deadline = time.monotonic() + timeout
        while True:
            self.flush()
            settled = self.held.wait_sent(deadline)
            if settled is not None:
                return settled
            # Finished meanwhile: the next round sends them, until the deadline.
            if time.monotonic() >= deadline:
                return False

    def release_unfinished(self, reason: str) -> None:
        """Gives back unread, without using an attempt, every lease held that no consumer here finished.

        A synchronous rank's loader process calls it as it ends
        (worker_sdk.torch_sync): the records it handed over that the rank never
        received (the DataLoader's prefetch when the epoch stopped) are in no
        one's account, and their items would wait for their lease to expire.
        A lease the rank completed or gave back meanwhile is refused as lost:
        that is not news, and nothing is logged.
        """
        for lease in self.held.unfinished():
            refused = False
            try:
                self.client.release(lease.id, lease.token, reason)
            except errors.LeaseLostError:
                refused = True
            except BaseException:
                self.held.stop_sending([lease])
                raise
            self.held.given_back(lease, refused)  # the heartbeat need not report it lost either

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
        held = self.held.held_pairs()
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
            self.held.sending([lease])
            self._report(
                lease, lambda: self.client.fail(lease.id, lease.token, error), "its failure report was refused"
            )

    def stop_at(self, lease: Lease, position: int | None, reason: str) -> None:
        """Its consumer stopped at record ``position``: ``[start, position)`` is read, the rest goes back as a new item.

        The rest is cut off as a split would (server/sql/cut.sql), so no
        record the consumer received is read again. With nothing received
        (or not a record range) the item is given back whole, as ``fail``.
        """
        self.held.stop_tracking(lease)
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
            self.held.stop_sending([lease])  # still finished: the next request sends it
            raise
        self.held.answered([lease])

    def lost(self, lease_id: int, why: str, token: int | None = None) -> None:
        """``lease_id`` is this process's no more (the server refused it): forget it, say so once.

        ``token``: the refused lease's. A lease id is its item's, so the item
        may be held again under a newer token: after a restore re-opened it,
        the take that carried the old lease's refused completion can lease
        it anew. That lease stands.
        """
        forgotten, claim, reported = self.held.lose(lease_id, token)
        # Taken ahead and not started: its consumer never starts it (another
        # worker reads it now). Outside the lock: a claim takes the
        # look-ahead's, which holds this one while it hands a lease over.
        if claim is not None:
            claim()
        if not forgotten or reported:
            return
        log.warning(
            "work queue %s: lease %s was lost (%s): it expired and went to another worker, "
            "or the job was restored; it is not counted twice",
            self.name,
            lease_id,
            why,
        )

    def stop(self) -> None:
        self._heartbeat.stop()
