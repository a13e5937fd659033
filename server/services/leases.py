"""The lease hot path: take, complete, fail, release (heartbeats are in services/heartbeats.py).

Each operation is one named statement from ``server/sql/`` (one round trip);
the Python here decides which to run and turns rows into results.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace

from django.db import transaction

from worker_sdk.protocol import Completion, Lease, TakeAnswer, TakeRequest

from .. import clock, metrics, sql
from ..callers import SERVER, Caller
from ..errors import JobCancelled, JobFailed, LeaseLost, NotFound
from ..models import JobState
from . import give_back, jobs, splits, units
from . import lost as lost_leases

log = logging.getLogger("shardline.leases")

# How long a caller that got nothing should wait before asking again.
RETRY_PENDING_LOCKED = 0.05  # pending rows exist but concurrent takers hold them
RETRY_MATERIALISING = 0.25  # another taker is creating the next epoch
RETRY_PAUSED = 5.0
RETRY_DEFERRED = 0.5  # a slow worker near the end waits while faster ones finish
# Straggler-aware leasing looks at worker paces only when fewer items than
# this remain (see take.sql, `tail`); elsewhere it costs one counter sum.
TAIL_WINDOW = 10_000
RETRY_MAX = 1.0  # waiting workers at the end of a job should see a failed or expired item soon
# The audit's word for a lease a take made past the records it asked for (``within``).
OVER_QUOTA_REASON = "leased past the take's max_records, given back in the same take"
# How long a take's Idempotency-Key is kept (services/requests.py), well
# beyond the SDK's default retry window (SHARDLINE_RETRY_SECONDS, 120 s).
REQUEST_KEY_TTL = 600


def lease_of(row) -> Lease:
    """The lease of a row of take.sql or recorded_leases.sql: its own range, or its unit's."""
    start = row.unit_start if row.range_start is None else row.range_start
    end = row.unit_end if row.range_end is None else row.range_end
    offset = row.offset if start == row.unit_start else None  # a remainder starts inside its slice
    seek = None if row.offset is None else (row.unit_start, row.offset)
    source = row.source
    if isinstance(source, str):
        source = json.loads(source)
    return Lease(row.id, row.token, row.item, row.epoch, row.position, row.expires_at, offset, start, end, seek, source)


@dataclass
class TakeResult:
    leases: list[Lease]
    exhausted: bool
    retry_after: float | None
    completed: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    # When only leases stand between the job and its end: how many the caller
    # holds, how many others hold, and how many of those are worth waiting
    # for (at_end.sql). A caller with none to wait for is at its end.
    leased_by_you: int | None = None
    leased_by_others: int | None = None
    waiting_on: int | None = None
    # True when take.sql's one statement made the whole answer (it leased
    # all that was asked): its request record then answers a repeat.
    whole: bool = False
    # Nothing now, but something may come that a waiting take would be woken
    # for (server/waiting.py): an item failing or being split off, the end of
    # leases worth waiting for, a paused job resuming. ``wake_by``: seconds
    # until the earliest lease expiry, when waiting must end regardless.
    waitable: bool = False
    wake_by: float | None = None
    # At ``wake_by`` the take runs again (not only when a lease expires): the
    # wait is for a split asked for this taker, whose request goes stale then
    # if its holder never answered, or for pending rows another taker holds
    # a moment (_nothing_leased).
    rerun: bool = False
    # Deferred (a slow worker near the end): its wait ends only with the
    # job's state or at wake_by, not for items that idle workers' takes are
    # woken for (server/waiting.py).
    deferred: bool = False
    # Why nothing comes while the job is paused: who paused it, and when.
    paused: str | None = None
    # Why nothing comes after a long wait for slicing (models.SLICING_PATIENCE).
    slicing: str | None = None

    def answer(self) -> TakeAnswer:
        """What the caller is told (the wire's take answer)."""
        return TakeAnswer(
            leases=tuple(self.leases),
            exhausted=self.exhausted,
            retry_after=self.retry_after,
            completed=tuple(self.completed),
            lost=tuple(self.lost),
            leased_by_you=self.leased_by_you,
            leased_by_others=self.leased_by_others,
            waiting_on=self.waiting_on,
            paused=self.paused,
            slicing=self.slicing,
            deferred=self.deferred,
        )


def take(job_id: int, request: TakeRequest, key: str | None = None, caller: Caller = SERVER) -> TakeResult:
    """Completes the caller's finished leases, then leases up to ``request.count`` items in its scope.

    ``caller``: whose leases these become (and whose completions count), and
    the jobs it may see: a job out of its scope is not found.

    ``request.consumer`` names the process that uses what the worker reads;
    see at_end.sql for why the server needs to know. ``key`` (an
    Idempotency-Key) is recorded with the leases of the first statement; a
    repeat of it fails that statement (services/requests.py). The scope's
    ``max_records`` bounds the records of all the take's leases together
    (``within``), in its transaction, so no other taker finds a range held
    meanwhile.

    In steady state this is one statement (take.sql): one round trip and one
    commit per request. More run only at the edges: right after expired leases
    were taken back, at an epoch boundary, and when nothing could be leased;
    and for a synchronous rank's take (scoped ``upto_epoch``) while the epoch
    after its own is not made, one probe of item_pending (materialise_epoch.sql)
    that makes it once its own are leased out (a planned epoch's rank takes
    its quota in a few takes; an agreed one takes a whole work at a time).
    """
    scope = request.scope
    if scope.max_records is not None:
        with transaction.atomic():
            result = take(job_id, replace(request, scope=replace(scope, max_records=None)), key, caller)
            result.leases = within(result.leases, scope.max_records, caller)
            return result
    count = request.count
    with metrics.timed("take"):
        job, leases, reclaimed, completed = _take_once(
            job_id, request, count, caller, request.complete, key, request.started
        )
        deferred = job["deferred"]
        completions = request.complete
        lost = _lost(completions, completed, caller) if len(completed) < len(completions) else []
        metrics.LEASE_ITEMS.labels("complete").inc(len(completed))
        result = TakeResult(
            leases=leases, exhausted=False, retry_after=None, completed=completed, lost=lost, whole=len(leases) == count
        )

        state = job["state"]
        if state not in (JobState.READY, JobState.RUNNING):
            return _not_active(job_id, state, result)

        if len(leases) < count and reclaimed and not deferred:
            leases += _take_once(job_id, request, count - len(leases), caller)[1]
        epoch = job["epochs_materialised"]
        upto = scope.upto_epoch
        last = job["num_epochs"] if upto is None else min(job["num_epochs"], upto + 1)
        creating = False  # another taker is creating the epoch this take would lease from
        while len(leases) < count and epoch < last and not deferred:
            if not units.materialise_epoch(job_id, epoch):
                creating = True
                break  # another taker holds the job row: it is creating this epoch
            epoch += 1
            made = _take_once(job_id, request, count - len(leases), caller)[1]
            if not made:
                # An epoch that gave this take nothing (below its from_epoch,
                # or leased by others meanwhile): the caller asks again, and
                # each request makes one epoch at most that is not its own,
                # so that no request inserts a whole job's epochs at once.
                break
            leases += made
        if upto is not None and epoch == last == job["epochs_materialised"] < job["num_epochs"] and not creating:
            # A take scoped to the epochs up to ``upto`` (a synchronous rank)
            # that made none: once those epochs are leased out, the next one
            # is made now, rather than by the ranks' first takes at its
            # start, which race to make it (one makes it, the others come
            # back with nothing and take again: a round trip more at every
            # epoch's start, bench/RESULTS.md). Still one epoch at most per request.
            units.materialise_epoch(job_id, epoch, drained=True)

        if leases:
            if state == JobState.READY:
                jobs.mark_running(job_id)
        elif deferred:
            # If the caller asked to wait, held on the server and run again
            # every RETRY_DEFERRED; the job's end answers it at once.
            # Answered at once, a slow worker deferred at a job's end slept
            # out its retry after the end came: its loop ended up to
            # RETRY_DEFERRED late (bench/RESULTS.md). Not woken for items that
            # come back: their wakes go to the oldest waiting takes, and this
            # one would take an idle worker's and stay deferred.
            result.retry_after = RETRY_DEFERRED
            result.waitable = result.rerun = result.deferred = True
            result.wake_by = RETRY_DEFERRED
        else:
            # The job can end here only if this take may lease from its last epoch.
            final = upto is None or upto >= job["num_epochs"] - 1
            _nothing_leased(job_id, request, epoch < last, final, result, creating)
            if result.exhausted:
                jobs.mark_done(job_id)
        metrics.LEASE_ITEMS.labels("take").inc(len(leases))
        return result


def within(leases: list[Lease], records: int, caller: Caller = SERVER) -> list[Lease]:
    """``leases``, in order, holding ``records`` records at the most in all (a synchronous rank's quota).

    The range that crosses the bound is cut there (its rest a new pending
    item); leases past it go back pending unread, their attempt returned, in
    the take's transaction: no other taker ever finds them held. A lease of
    a whole item counts no records.
    """
    kept = []
    for lease in leases:
        if records <= 0:
            release(lease.id, lease.token, OVER_QUOTA_REASON, caller)
            continue
        lease = splits.trim(lease, records, caller)
        if lease.start is not None and lease.end is not None:
            records -= lease.end - lease.start
        kept.append(lease)
    return kept


def _not_active(job_id: int, state: str, result: TakeResult) -> TakeResult:
    # Each end says why: only a finished job is exhausted. A cancelled or
    # failed one is an error, so a training script never mistakes it for
    # having read everything.
    if state == JobState.DONE:
        result.exhausted = True
    elif state == JobState.CANCELLED:
        raise JobCancelled(jobs.cancellation_message(jobs.get_job(job_id)))
    elif state == JobState.FAILED:
        job = jobs.get_job(job_id)
        raise JobFailed(f"job {job.name!r} failed: {job.error or 'no reason recorded'}")
    else:  # paused, or still slicing
        result.retry_after = RETRY_PAUSED
        result.waitable = True
        job = jobs.get_job(job_id)
        if state == JobState.PAUSED:
            result.paused = jobs.pause_message(job)
        result.slicing = job.slicing_stalled(clock.now())
    return result


def _take_once(
    job_id: int,
    request: TakeRequest,
    count: int,
    caller: Caller,
    completions: tuple[Completion, ...] = (),
    key: str | None = None,
    started: tuple[int, ...] = (),
) -> tuple[dict, list[Lease], int, list[int]]:
    """Runs take.sql for ``count`` items: returns (job state and epochs, leases, leases reclaimed, completions accepted)."""
    rows = sql.run(
        "take",
        {
            "job": job_id,
            "worker": request.worker,
            "consumer": request.taker,
            "count": count,
            "ids": [c.id for c in completions],
            "tokens": [c.token for c in completions],
            "records": [c.records for c in completions],
            "tail_window": TAIL_WINDOW,
            "key": key,
            "ttl": REQUEST_KEY_TTL,
            "tracks": request.tracks,
            "ahead": request.ahead,
            "leave": request.leave,
            "started": list(started),
            **request.scope.sql(),
            **caller.sql,
        },
    )
    if not rows:
        raise NotFound(f"no job with id {job_id}")
    first = rows[0]
    if first.reclaimed:
        metrics.LEASES_RECLAIMED.inc(first.reclaimed)
        log.info("expired leases taken back", extra={"event": "lease_expired", "job": job_id, "count": first.reclaimed})
    leases = [lease_of(row) for row in rows if row.id is not None]
    job = {
        "state": first.state,
        "num_epochs": first.num_epochs,
        "epochs_materialised": first.epochs_materialised,
        "deferred": first.deferred,
    }
    return job, leases, first.reclaimed, list(first.completed)


def answer_again(job_id: int, key: str, completions: tuple[Completion, ...], caller: Caller = SERVER) -> TakeResult:
    """A repeat's answer, from the request's record: its leases still held, and its completions as accepted."""
    leases = [lease_of(row) for row in sql.run("recorded_leases", {"job": job_id, "key": key, **caller.sql})]
    completed: list[int] = []
    lost = _lost(completions, completed, caller) if completions else []
    retry_after = None if leases else RETRY_PENDING_LOCKED
    return TakeResult(leases=leases, exhausted=False, retry_after=retry_after, completed=completed, lost=lost)


def _nothing_leased(
    job_id: int, request: TakeRequest, epochs_left: bool, final: bool, result: TakeResult, creating: bool
) -> None:
    """Fills in exhausted, retry_after and the lease counts of a take that got nothing.

    ``final``: the take may lease from the job's last epoch, so nothing left
    for it is the job's end (with ``upto_epoch`` below it, only the caller's).
    ``epochs_left``: epochs up to the take's are still to be made;
    ``creating``: because another taker holds the job row, making one.
    """
    worker = request.worker
    has_pending, seconds_to_expiry, mine, others, waiting_on = sql.run(
        "at_end", {"job": job_id, "worker": worker, "consumer": request.taker, **request.scope.sql()}
    )[0]
    if has_pending or epochs_left:
        result.retry_after = RETRY_PENDING_LOCKED if has_pending else RETRY_MATERIALISING
        # Another taker holds the rows or is creating the epoch (``creating``),
        # or the rows came back after take.sql's snapshot (a take woken just
        # as an item fails): a waiting take runs again in a moment rather
        # than answering nothing. Not a take ahead, whose filter leaves out a
        # split's pending pieces, nor one that made an epoch below its
        # from_epoch: held, either would run again and again (the second,
        # making a job's epochs one after another in one request).
        if (has_pending or creating) and not request.ahead:
            result.waitable = result.rerun = True
            result.wake_by = result.retry_after  # its rerun, not a lease's expiry
    elif seconds_to_expiry is None:
        result.leased_by_you, result.leased_by_others, result.waiting_on = 0, 0, 0
        result.exhausted = final
    else:
        # Leases may still fail or expire and come back: not exhausted. The
        # counts let the caller tell whether any of them is worth waiting for.
        result.retry_after = round(min(max(float(seconds_to_expiry), 0.1), RETRY_MAX), 3)
        result.leased_by_you, result.leased_by_others, result.waiting_on = mine, others, waiting_on
        result.wake_by = max(float(seconds_to_expiry), 0.0)
        # A take ahead asks nothing of others: its consumer reads what it
        # holds; nor does one that leaves (its consumer reads through a sibling).
        asks = not request.ahead and not request.scope.sync and not request.leave
        if asks and (give_back.request(job_id, worker, request.taker) or splits.request(job_id, worker, request.taker)):
            # An item taken ahead is being given back, or unread records of a
            # lease are being split off, for this worker: worth waiting for,
            # and soon.
            result.retry_after = splits.TAIL_HEARTBEAT
            result.waiting_on = max(waiting_on, 1)
            result.wake_by = min(result.wake_by, splits.STALE_REQUEST)
            result.rerun = True
        result.waitable = result.waiting_on > 0
        if not result.waitable and not request.leave:  # a take that leaves never counted as waiting (take.sql)
            # The caller is at its end: it no longer counts as waiting, so
            # that others wait for what its consumer still reads.
            sql.run("stop_waiting", {"job": job_id, "worker": worker})


def _lost(completions, completed: list[int], caller: Caller) -> list[int]:
    """The completions not accepted, less those accepted earlier with the same token (a retried request)."""
    accepted = set(completed)
    missing = [c for c in completions if c.id not in accepted]
    if not missing:
        return []
    rows = sql.run("already_done", {"ids": [c.id for c in missing], "tokens": [c.token for c in missing], **caller.sql})
    repeated = {row.id for row in rows}
    completed += [c.id for c in missing if c.id in repeated]
    lost = [c.id for c in missing if c.id not in repeated]
    lost_leases.report("complete", lost)
    return lost


def _complete(completions, caller: Caller) -> tuple[list[int], list[int], set[int]]:
    """(completed ids, lost ids, jobs whose items were completed)."""
    rows = sql.run(
        "complete",
        {
            "ids": [c.id for c in completions],
            "tokens": [c.token for c in completions],
            "records": [c.records for c in completions],
            **caller.sql,
        },
    )
    completed = [row.id for row in rows]
    lost = _lost(completions, completed, caller)
    metrics.LEASE_ITEMS.labels("complete").inc(len(completed))
    return completed, lost, {row.job_id for row in rows}


def _complete_and_finish(completions, caller: Caller) -> tuple[list[int], list[int]]:
    """(completed ids, lost ids); each job whose last lease this completes is done, in the same commit.

    One commit: the completion of a job's last lease and the job's end reach
    the takes waiting on it together, and they are answered without a
    statement each (server/waiting.py, DONE_GRACE).
    """
    with transaction.atomic():
        completed, lost, job_ids = _complete(completions, caller)
        unfinished = [job_id for job_id in sorted(job_ids) if not jobs.finish_if_done(job_id)]
    # Looked at again after the commit: two last completions committing
    # together each saw the other's lease still held inside their own
    # transactions, and neither finished the job. After its commit, the
    # later of the two sees both.
    for job_id in unfinished:
        jobs.finish_if_done(job_id)
    return completed, lost


def complete(lease_id: int, token: int, records: int | None = None, caller: Caller = SERVER) -> None:
    with metrics.timed("complete"):  # a lost lease counts as outcome lease_lost
        _completed, lost = _complete_and_finish([Completion(lease_id, token, records)], caller)
        if lost:
            raise LeaseLost(
                f"lease {lease_id} is not held with token {token}: it expired and was taken back, or was never yours"
            )


def complete_many(completions: tuple[Completion, ...], caller: Caller = SERVER) -> tuple[list[int], list[int]]:
    """(accepted ids, lost ids): each completion as ``complete`` makes it, all in one statement.

    A lost one changes nothing and does not stop the others: its holder
    learns it from the answer, as from a take that carried it.
    """
    with metrics.timed("complete"):
        completed, lost = _complete_and_finish(completions, caller)
    return sorted(completed), sorted(lost)


def resume(job_id: int, worker: str, caller: Caller = SERVER) -> list[Lease]:
    """The leases ``worker`` held on the job, given back to a restarted process of that name with new tokens.

    See resume_leases.sql. Nothing when the worker held none (its leases
    expired and went to others, or it is new).
    """
    with metrics.timed("resume"):
        leases = [lease_of(row) for row in sql.run("resume_leases", {"job": job_id, "worker": worker, **caller.sql})]
    if leases:
        log.info(
            "leases resumed by a restarted worker",
            extra={"event": "lease_resumed", "job": job_id, "worker": worker, "count": len(leases)},
        )
    return leases


def release(lease_id: int, token: int, reason: str, caller: Caller = SERVER) -> None:
    """Gives an item back unread without using an attempt (a synchronous rank's epoch stopped before it)."""
    with metrics.timed("release"):
        rows = sql.run("release", {"id": lease_id, "token": token, "reason": reason, **caller.sql})
        if not rows:
            metrics.LEASES_LOST.labels("release").inc()
            raise LeaseLost(
                f"lease {lease_id} is not held with token {token}: it expired and was taken back, or was never yours"
            )


def fail(lease_id: int, token: int, error: str, caller: Caller = SERVER) -> dict:
    """Gives an item back with an error; returns its new state and attempts."""
    with metrics.timed("fail"):
        rows = sql.run("fail", {"id": lease_id, "token": token, "error": error, **caller.sql})
        row = rows[0] if rows else None
        if row is None:
            lost_leases.report("fail", [lease_id])
            raise LeaseLost(
                f"lease {lease_id} is not held with token {token}: it expired and was taken back, or was never yours"
            )
    _id, job_id, state, attempts, max_attempts = row
    if state == "failed":
        jobs.finish_if_done(job_id)
    log.info(
        "item failed",
        extra={"event": "item_failed", "job": job_id, "item": lease_id, "state": state, "count": attempts},
    )
    return {"id": lease_id, "state": state, "attempts": attempts, "max_attempts": max_attempts}
