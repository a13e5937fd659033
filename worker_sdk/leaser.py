"""A process's leases on one job: the one owner of what the process holds.

``Leaser`` takes items, acknowledges finished ones, fails given-up ones and
keeps every held lease alive with a heartbeat thread. Streams (stream.py)
decide *when* an item is finished; only the leaser talks to the server about
leases, so no lease can be forgotten between the two: a finished lease stays
held (and heartbeated) until the server has acknowledged it, however many
requests that takes.

Its heartbeats also carry the process's end-of-queue mark (worker_sdk.at_end)
to every job the process holds leases of.

A lease handed to another process with its records (synchronous training:
worker_sdk.sync) is completed or given back by that process
(``sync.HandedLeases``); its taker's leaser keeps holding and heartbeating it
until the server answers that it is done.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
from typing import Callable

from . import at_end, errors, stall
from .client import Client
from .protocol import MAX_TAKE_WAIT, Completion, Lease, TakeAnswer, TakeRequest, TakeScope
from .tracker import RangeTracker

log = logging.getLogger("worker_sdk")

# Heartbeat pace while reading a record range, until the server says its own.
RANGE_HEARTBEAT = 1.0
# Seconds a take that finds nothing may wait on the server for work (it
# answers as soon as some comes, or the queue ends), and a heartbeat of
# record ranges for a split request; a server over WSGI answers at once.
TAKE_WAIT = 20.0
HEARTBEAT_WAIT = 3.0
# The longest wait between a failing heartbeat's retries. The transport's
# backoff grows to 5 s, and once a restarted server was back the leases ran
# out behind it: a web server's outage under the service clock's GAP is not
# given back, so a beat, the outage and the retry must fit in a lease.
HEARTBEAT_RETRY_PACE = 1.0
GIVE_BACK_PAUSE = 0.05
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
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.interval = max(0.2, lease_timeout / 3)
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
        # The consumer's data stall (worker_sdk.stall), sent with the heartbeats.
        self._stall = stall.Report(job_id, self.consumer)
        self._thread = threading.Thread(target=self._heartbeat, name=f"shardline-heartbeat-{name}", daemon=True)
        self._thread.start()
        at_end.watch(self)  # its heartbeats carry the process's end-of-queue mark

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
        self._wake.set()  # report the position at the pace of record ranges from now on
        return tracker

    def stall_clock(self) -> stall.Clock:
        """The clock of this consumer's data stall on the job, in this process: its heartbeats send it."""
        return stall.clock(self.job_id, self.consumer)

    def untrack(self, lease: Lease) -> None:
        with self._lock:
            self._trackers.pop(lease.id, None)

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
        finally:
            self._stop_sending(sent)
        leases = list(answer.leases)
        with self._lock:
            for lease in sent:
                self._finished.pop(lease.id, None)
                self._held.pop(lease.id, None)
            self._started.difference_update(started)
            for lease in leases:
                self._held[lease.id] = lease
            if leases and self._server_waits and not self._beating:
                self._wake.set()
        if self.on_leased is not None:
            for lease in leases:
                self.on_leased(lease)
        for lease_id in answer.lost:
            self._lost(lease_id, "its completion was refused")
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

    def _asked_back(self, lease_id: int) -> None:
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
        """Acknowledges finished leases now (each with its own request)."""
        with self._lock:
            for lease in leases:
                if not lease.local:
                    self._finished[lease.id] = lease
        self.flush()

    def flush(self) -> None:
        """Sends every finished lease that the server has not acknowledged yet."""
        for lease in self._start_sending():
            self._report(lease, lambda: self.client.complete(lease.id, lease.token), "its completion was refused")

    def _start_sending(self) -> list[Lease]:
        """The finished leases no other request is sending."""
        with self._lock:
            sent = [lease for lease in self._finished.values() if lease.id not in self._sending]
            self._sending.update(lease.id for lease in sent)
            return sent

    def _stop_sending(self, sent: list[Lease]) -> None:
        with self._lock:
            self._sending.difference_update(lease.id for lease in sent)

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
                self._lost(lease.id, "its cut was refused")
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
            self._lost(lease.id, refused)
        finally:
            self._stop_sending([lease])
        with self._lock:
            if self._forget_held(lease):
                self._unstarted.pop(lease.id, None)
                self._started.discard(lease.id)

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

    def _lost(self, lease_id: int, why: str) -> None:
        with self._lock:
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

    # -- heartbeat -----------------------------------------------------------------

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

    def _mark_now(self) -> None:
        """Sends the process's mark until no newer one came meanwhile (one sender at a time: marks stay in order)."""
        while True:
            with self._lock:
                self._mark_again = False
                held = [(lease.id, lease.token) for lease in self._held.values() if lease.id not in self._sending]
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

    def _heartbeat(self) -> None:
        again = False  # the last heartbeat waited on the server all it asked: beat again at once
        # It brought give-backs: the next goes soon (the server answers it at
        # once while one it refused is still asked of it, until the take that
        # says the lease started clears it) to be held again.
        soon = False
        failing = False  # the last one did not reach the server: the next goes within HEARTBEAT_RETRY_PACE
        while not self._stop.is_set():
            with self._lock:
                ranges = bool(self._trackers)
            pace = self._stall.pace(min(self.interval, self._range_interval) if ranges else self.interval)
            if failing:
                # Full jitter, as the transport's backoff: a thousand processes do not retry in step.
                pace = random.uniform(0, min(self.interval, HEARTBEAT_RETRY_PACE))
            self._wake.wait(0.0 if again else GIVE_BACK_PAUSE if soon else pace)
            self._wake.clear()
            again = soon = False
            if self._stop.is_set():
                return
            with self._lock:
                held = [lease for lease in self._held.values() if lease.id not in self._sending]
                trackers = {lease.id: self._trackers.get(lease.id) for lease in held}
                started = [lease.id in self._started for lease in held]
            if not held:
                continue
            positions = [None if trackers[lease.id] is None else trackers[lease.id].position for lease in held]
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
                hold = min(self.interval, HEARTBEAT_WAIT) if any(trackers.values()) else min(pace, MAX_TAKE_WAIT)
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
                    restartable=self.restartable,
                    started=started,
                )
                self._stall.sent(report)
                with self._lock:  # the server knows: no take need say it again
                    self._started.difference_update(lease.id for lease, was in zip(held, started) if was)
                if failing:
                    failing = False
                    log.info("work queue %s: heartbeats reach the server again", self.name)
                for lease_id, at in answer.get("splits", {}).items():
                    # Also leases taken since the heartbeat left: the server
                    # answers for every lease of this worker a split was asked of.
                    with self._lock:
                        lease, tracker = self._held.get(int(lease_id)), self._trackers.get(int(lease_id))
                    if lease is not None and tracker is not None:
                        self._answer_split(lease, tracker, at, answer.get("split_min_records", 1))
            except errors.ConnectionError as exc:
                if not failing:
                    log.warning("work queue %s: heartbeat failed, retrying: %s", self.name, exc)
                failing = True
                continue
            except errors.ShardlineError as exc:
                log.warning("work queue %s: heartbeat failed: %s", self.name, exc)
                continue
            finally:
                with self._lock:
                    self._beating = False
            for lease_id in answer.get("give_back", []):
                self._asked_back(int(lease_id))
                soon = True
            for lease_id in answer.get("done", []):
                with self._lock:  # completed by the process it was handed to (worker_sdk.sync)
                    self._held.pop(int(lease_id), None)
            interval = answer.get("heartbeat_in")
            self._range_interval = RANGE_HEARTBEAT if interval is None else float(interval)
            held_back = interval == 0  # a held heartbeat comes back with 0, one answered at once without
            finished = bool(answer.get("done"))
            if held_back or (interval is None and not finished):
                self._server_waits = held_back
            # What it carried was finished meanwhile (nothing to hold it for):
            # the next goes at once, for what is held now.
            again = held_back or finished
            sent = {lease.id: lease for lease in held}
            for lease_id in answer.get("lost", []):
                lease = sent.get(int(lease_id))
                # Not one acknowledged while the heartbeat was on its way, nor
                # the item leased again since under a new token.
                if lease is not None and self._holds(lease):
                    self._lost(lease.id, "the heartbeat was refused")

    def _holds(self, lease: Lease) -> bool:
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
                if self._holds(lease):
                    self._lost(lease.id, "its split was refused")
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

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
