"""The thread that keeps one ``Leaser``'s leases alive, and what its answers ask of the process.

A ``Heartbeat`` sends what its leaser holds at the pace the server asks,
with the positions of the record ranges being read, the process's
end-of-queue mark (worker_sdk.at_end) and the consumer's data stall
(worker_sdk.stall). From the answers it answers splits asked of a range
being read, hands give-back requests to the leaser and reports lost leases.

It owns the pace and whether a heartbeat is on its way; what is held is
the leaser's holdings (worker_sdk.holdings), read through their methods.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import TYPE_CHECKING

from . import at_end, errors, stall
from .protocol import MAX_TAKE_WAIT, Lease
from .tracker import RangeTracker

if TYPE_CHECKING:
    from .leaser import Leaser

log = logging.getLogger("worker_sdk")

# Heartbeat pace while reading a record range, until the server says its own.
RANGE_HEARTBEAT = 1.0
# Seconds a heartbeat of record ranges may wait on the server for a split
# request; a server over WSGI answers at once.
HEARTBEAT_WAIT = 3.0
# The longest wait between a failing heartbeat's retries. The transport's
# backoff grows to 5 s, and once a restarted server was back the leases ran
# out behind it: a web server's outage under the service clock's GAP is not
# given back, so a beat, the outage and the retry must fit in a lease.
HEARTBEAT_RETRY_PACE = 1.0
# After an answer that told something (not held): the next heartbeat goes
# this soon, to be held. After two in a row, no later than TOLD_AGAIN_PAUSE:
# a server that holds heartbeats awaits the next one 5 s at least
# (server/holders.py), and a holder of items beats every third of a lease.
GIVE_BACK_PAUSE = 0.05
TOLD_AGAIN_PAUSE = 1.0


class Heartbeat:
    """Heartbeats one leaser's leases on a daemon thread until ``stop``."""

    def __init__(self, leaser: Leaser, lease_timeout: float):
        self.leaser = leaser
        self.client = leaser.client
        self.name = leaser.name
        self.interval = max(0.2, lease_timeout / 3)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        # The server's pace for holders of record ranges (a split should land
        # soon); until it has said, RANGE_HEARTBEAT.
        self._range_interval = RANGE_HEARTBEAT
        # Whether the server holds heartbeats (ASGI: the last one waited all it
        # asked), and whether one is on its way: a lease taken while none is
        # starts one, so that the server holds this process's connection
        # from its first lease (until a server says otherwise, assume it does).
        self._server_waits = True
        self._beating = False
        # A waiting mark on its way in a heartbeat of its own (wake()), and
        # whether a newer one came meanwhile.
        self._marking = False
        self._mark_again = False
        self._answering: set[int] = set()  # leases whose split answer is on its way
        self._stall = stall.Report(leaser.job_id, leaser.consumer)
        self._thread = threading.Thread(target=self._run, name=f"shardline-heartbeat-{self.name}", daemon=True)
        self._thread.start()
        at_end.watch(self)  # its heartbeats carry the process's end-of-queue mark

    def leased(self) -> None:
        """New leases are held: with none on its way to a server that holds heartbeats, one goes now."""
        with self._lock:
            start = self._server_waits and not self._beating
        if start:
            self._wake.set()

    def reading(self) -> None:
        """A record range is read from now on: its position is reported at the pace of ranges."""
        self._wake.set()

    def wake(self) -> None:
        """Heartbeat now (the process started or stopped waiting).

        A heartbeat the server holds cannot be called back: the mark then
        goes in one of its own, at once, and the held one goes on.
        """
        with self._lock:
            beating = self._beating
            if beating and self._marking:
                self._mark_again = True  # the sender on its way sends the newest mark again
                return
            self._marking = beating
        if not beating:
            self._wake.set()
            return
        threading.Thread(target=self._mark_now, name=f"shardline-mark-{self.name}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for the thread to end, after ``stop``; whether it ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _mark_now(self) -> None:
        """Sends the process's mark until no newer one came meanwhile (one sender at a time: marks stay in order)."""
        while True:
            with self._lock:
                self._mark_again = False
            held = [(lease.id, lease.token) for lease, _tracker, _started in self.leaser.held.to_heartbeat()]
            if held:
                try:
                    # What else it answers (lost leases, splits) the held
                    # heartbeat and the next bring too.
                    retry_pace = min(self.interval, HEARTBEAT_RETRY_PACE)
                    self.client.extend(held, waiting=at_end.process_waits(), retry_pace=retry_pace)
                except errors.ShardlineError as exc:
                    log.warning("work queue %s: heartbeat failed: %s", self.name, exc)
            with self._lock:
                if not self._mark_again:
                    self._marking = False
                    return

    def _run(self) -> None:
        again = False  # the last heartbeat waited on the server all it asked: beat again at once
        # It told something (a split, a give-back, a lost lease), so the
        # server answered it at once: the next goes soon, to be held again.
        # Until it is, no connection says this process lives, and a server
        # that holds heartbeats expires its leases unless one comes
        # (server/holders.py). After two such answers in a row (a split
        # asked of a range not being read yet) not so soon, so that the two
        # do not ask each other many times a second.
        soon = told = False
        failing = False  # the last one failed: the next goes within HEARTBEAT_RETRY_PACE
        while not self._stop.is_set():
            ranges = self.leaser.held.reads_ranges()
            pace = self._stall.pace(min(self.interval, self._range_interval) if ranges else self.interval)
            if failing:
                # Full jitter, as the transport's backoff: a thousand processes do not retry in step.
                pace = random.uniform(0, min(self.interval, HEARTBEAT_RETRY_PACE))
            delay = 0.0 if again else GIVE_BACK_PAUSE if soon else min(pace, TOLD_AGAIN_PAUSE) if told else pace
            self._wake.wait(delay)
            self._wake.clear()
            again = soon = False
            if self._stop.is_set():
                return
            beats = self.leaser.held.to_heartbeat()
            if not beats:
                continue
            held = [lease for lease, _tracker, _started in beats]
            positions = [None if tracker is None else tracker.position for _lease, tracker, _started in beats]
            started = [was for _lease, _tracker, was in beats]
            report = self._stall.due()
            with self._lock:
                self._beating = True
            try:
                # The server holds the heartbeat for its pace, and the next
                # one leaves as it returns: as many heartbeats as unheld ones
                # at that pace, and a connection of this process open all the
                # while it holds leases. A process that dies drops it, so its
                # leases go back at once, not a lease timeout later. Reading
                # record ranges, it is held HEARTBEAT_WAIT at the most and
                # returns early for a split asked of one of them. A server
                # over WSGI answers at once and says when to beat again.
                tracked = any(tracker is not None for _lease, tracker, _started in beats)
                hold = min(self.interval, HEARTBEAT_WAIT) if tracked else min(pace, MAX_TAKE_WAIT)
                # Not retried as it was sent: the next one carries every
                # lease held then, taken since included, and a holder whose
                # held heartbeat dropped keeps only what it beats for again
                # (the server's holder_gone.sql).
                answer = self.client.extend(
                    [(lease.id, lease.token) for lease in held],
                    waiting=at_end.process_waits(),
                    positions=positions,
                    wait=hold,
                    stall=report,
                    retry=False,
                    restartable=self.leaser.restartable,
                    started=started,
                    returns=True,
                )
                self._stall.sent(report)
                # The server knows: no take need say it again.
                self.leaser.held.started_known([lease.id for lease, was in zip(held, started) if was])
                if failing:
                    failing = False
                    log.info("work queue %s: heartbeats reach the server again", self.name)
                for lease_id, at in answer.get("splits", {}).items():
                    # Also leases taken since the heartbeat left: the server
                    # answers for every lease of this worker a split was asked of.
                    reading = self.leaser.held.range_read(int(lease_id))
                    if reading is not None:
                        self._answer(*reading, at, answer.get("split_min_records", 1))
            except errors.ConnectionError as exc:
                if not failing:
                    log.warning("work queue %s: heartbeat failed, retrying: %s", self.name, exc)
                failing = True
                continue
            except errors.ShardlineError as exc:
                log.warning("work queue %s: heartbeat failed: %s", self.name, exc)
                # Within a second too: the server awaits the next heartbeat
                # after its last answer (returns), and this one extended nothing.
                failing = True
                continue
            finally:
                with self._lock:
                    self._beating = False
            for lease_id in answer.get("give_back", []):
                self.leaser.asked_back(int(lease_id))
            told_before = told
            told = bool(answer.get("splits") or answer.get("give_back") or answer.get("lost"))
            soon = told and not told_before
            sent = {lease.id: lease for lease in held}
            for lease_id in answer.get("done", []):
                lease = sent.get(int(lease_id))
                if lease is not None:  # completed by the process it was handed to (worker_sdk.sync)
                    self.leaser.held.done_elsewhere(lease)
            interval = answer.get("heartbeat_in")
            self._range_interval = RANGE_HEARTBEAT if interval is None else float(interval)
            held_back = interval == 0  # a held heartbeat comes back with 0, one answered at once without
            finished = bool(answer.get("done"))
            if held_back or (interval is None and not finished):
                with self._lock:
                    self._server_waits = held_back
            # What it carried was finished meanwhile (nothing to hold it for):
            # the next goes at once, for what is held now.
            again = held_back or finished
            for lease_id in answer.get("lost", []):
                lease = sent.get(int(lease_id))
                # Not one acknowledged while the heartbeat was on its way, nor
                # the item leased again since under a new token.
                if lease is not None and self.leaser.held.holds(lease):
                    self.leaser.lost(lease.id, "the heartbeat was refused")

    def _answer(self, lease: Lease, tracker: RangeTracker, at: int, min_records: int) -> None:
        """Answers a split on a thread of its own, unless one for the lease is on its way.

        Not on this thread: an answer is retried until the server takes it,
        and meanwhile the heartbeats go on, which the server awaits after
        each answer (``returns``). Until the cut, the server tells the split
        again at every heartbeat; its answer goes once.
        """
        with self._lock:
            if lease.id in self._answering:
                return
            self._answering.add(lease.id)

        def answer() -> None:
            try:
                self._answer_split(lease, tracker, at, min_records)
            finally:
                with self._lock:
                    self._answering.discard(lease.id)

        threading.Thread(target=answer, name=f"shardline-split-{self.name}", daemon=True).start()

    def _answer_split(self, lease: Lease, tracker: RangeTracker, at: int, min_records: int) -> None:
        """Answers a split asked of ``lease``: stop at ``at`` or where the reader is, or refuse.

        The answer is sent until the server has taken it or the lease is
        lost: a cut is idempotent, and until its outcome is known the reader
        waits at the point (it can neither read on nor stop there safely).
        """
        end = tracker.end
        point = tracker.try_split(at, min_records)
        while True:
            try:
                self.client.split(lease.id, lease.token, end if point is None else point)  # the end: a refusal
            except errors.LeaseLostError:
                tracker.settle_split(False)
                if self.leaser.held.holds(lease):
                    self.leaser.lost(lease.id, "its split was refused")
                return
            except errors.APIError as exc:
                if exc.status and exc.status < 500:  # refused: nothing was cut
                    log.warning("work queue %s: split of lease %s refused: %s", self.name, lease.id, exc)
                    tracker.settle_split(False)
                    return
                retry = exc
            except errors.ShardlineError as exc:
                retry = exc
            else:
                tracker.settle_split(point is not None)
                if point is not None:
                    log.info(
                        "work queue %s: lease %s split at record %s; records [%s, %s) went to another worker",
                        self.name,
                        lease.id,
                        point,
                        point,
                        end,
                    )
                return
            if point is None or self._stop.wait(1.0):
                tracker.settle_split(False)  # a refusal changes nothing; a closing queue stops asking
                return
            log.warning("work queue %s: answering a split of lease %s failed, retrying: %s", self.name, lease.id, retry)
