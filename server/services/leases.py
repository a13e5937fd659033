"""The lease hot path: take, complete, fail, extend.

Each operation is one named statement from ``server/sql/`` (one round trip);
the Python here decides which to run and turns rows into results.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction

from .. import metrics, sql
from ..errors import JobFailed, LeaseLost, NotFound
from ..models import JobState
from . import jobs

log = logging.getLogger("shardline.leases")

# How long a caller that got nothing should wait before asking again.
RETRY_PENDING_LOCKED = 0.05   # pending rows exist but concurrent takers hold them
RETRY_MATERIALISING = 0.25    # another taker is creating the next epoch
RETRY_PAUSED = 5.0
RETRY_MAX = 5.0


@dataclass(frozen=True)
class Lease:
    id: int
    token: int
    item: str
    epoch: int
    position: int
    expires_at: datetime


@dataclass(frozen=True)
class Completion:
    id: int
    token: int
    records: int | None = None


@dataclass
class TakeResult:
    leases: list[Lease]
    exhausted: bool
    retry_after: float | None
    completed: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)


_JOB_FIELDS = ("id", "name", "state", "lease_timeout", "max_attempts", "num_epochs", "epochs_materialised", "error")


def _job_row(job_id: int) -> dict:
    from ..models import Job

    row = Job.objects.filter(pk=job_id).values(*_JOB_FIELDS).first()
    if row is None:
        raise NotFound(f"no job with id {job_id}")
    return row


def take(job_id: int, worker: str, count: int = 1, completions: list[Completion] = ()) -> TakeResult:
    """Completes the caller's finished leases, then leases up to ``count`` items."""
    with metrics.timed("take"), transaction.atomic():
        job = _job_row(job_id)
        completed, lost = _complete(completions) if completions else ([], [])
        result = TakeResult(leases=[], exhausted=False, retry_after=None, completed=completed, lost=lost)

        state = job["state"]
        if state in (JobState.DONE, JobState.CANCELLED):
            result.exhausted = True
            return result
        if state == JobState.FAILED:
            raise JobFailed(f"job {job['name']!r} failed: {job['error'] or 'no reason recorded'}")
        if state in (JobState.PAUSED, JobState.SLICING):
            result.retry_after = RETRY_PAUSED
            return result

        leases, reclaimed = _take_once(job, worker, count)
        if len(leases) < count and reclaimed:
            more, _ = _take_once(job, worker, count - len(leases))
            leases += more
        epoch = job["epochs_materialised"]
        while len(leases) < count and epoch < job["num_epochs"]:
            if not jobs.materialise_epoch(job_id, epoch):
                break  # another taker has the job row: it is creating this epoch
            epoch += 1
            more, _ = _take_once(job, worker, count - len(leases))
            leases += more
        result.leases = leases

        if leases:
            if state == JobState.READY:
                jobs.mark_running(job_id)
        else:
            result.exhausted, result.retry_after = _nothing_leased(job_id, epoch < job["num_epochs"])
            if result.exhausted:
                jobs.mark_done(job_id)
        metrics.LEASE_ITEMS.labels("take").inc(len(leases))
        return result


def _take_once(job: dict, worker: str, count: int) -> tuple[list[Lease], int]:
    with connection.cursor() as cursor:
        cursor.execute(
            sql.statement("take"),
            {
                "job": job["id"],
                "worker": worker,
                "count": count,
                "timeout": job["lease_timeout"],
                "max_attempts": job["max_attempts"],
            },
        )
        rows = cursor.fetchall()
    reclaimed = rows[0][0] if rows else 0
    if reclaimed:
        log.info("expired leases taken back", extra={"event": "lease_expired", "job": job["id"], "count": reclaimed})
    leases = [Lease(*row[1:]) for row in rows if row[1] is not None]
    return leases, reclaimed


def _nothing_leased(job_id: int, epochs_left: bool) -> tuple[bool, float | None]:
    """(exhausted, retry_after) for a take that got nothing."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT EXISTS (SELECT 1 FROM shardline_item WHERE job_id = %(job)s AND state = 'pending'),
                   extract(epoch FROM (SELECT min(expires_at) FROM shardline_item
                                        WHERE job_id = %(job)s AND state = 'leased') - now())
            """,
            {"job": job_id},
        )
        has_pending, seconds_to_expiry = cursor.fetchone()
    if has_pending:
        return False, RETRY_PENDING_LOCKED
    if epochs_left:
        return False, RETRY_MATERIALISING
    if seconds_to_expiry is not None:
        # Live leases may still fail or expire and come back: not exhausted.
        return False, round(min(max(float(seconds_to_expiry), 0.1), RETRY_MAX), 3)
    return True, None


def _complete(completions) -> tuple[list[int], list[int]]:
    ids = [c.id for c in completions]
    tokens = [c.token for c in completions]
    with connection.cursor() as cursor:
        cursor.execute(
            sql.statement("complete"),
            {"ids": ids, "tokens": tokens, "records": [c.records for c in completions]},
        )
        completed = [row[0] for row in cursor.fetchall()]
        accepted = set(completed)
        missing = [c for c in completions if c.id not in accepted]
        if missing:
            cursor.execute(
                sql.statement("already_done"),
                {"ids": [c.id for c in missing], "tokens": [c.token for c in missing]},
            )
            repeated = {row[0] for row in cursor.fetchall()}
            completed += [c.id for c in missing if c.id in repeated]
            lost = [c.id for c in missing if c.id not in repeated]
        else:
            lost = []
    for lease_id in lost:
        log.warning("completion refused: lease lost", extra={"event": "lease_lost", "item": lease_id, "reason": "complete"})
    metrics.LEASE_ITEMS.labels("complete").inc(len(completed))
    return completed, lost


def complete(lease_id: int, token: int, records: int | None = None) -> None:
    with metrics.timed("complete"), transaction.atomic():
        _completed, lost = _complete([Completion(lease_id, token, records)])
    if lost:
        raise LeaseLost(f"lease {lease_id} is not held with token {token}: it expired and was taken back, or was never yours")


def fail(lease_id: int, token: int, error: str) -> dict:
    """Gives an item back with an error; returns its new state and attempts."""
    with metrics.timed("fail"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql.statement("fail"), {"id": lease_id, "token": token, "error": error})
            row = cursor.fetchone()
    if row is None:
        log.warning("failure refused: lease lost", extra={"event": "lease_lost", "item": lease_id, "reason": "fail"})
        raise LeaseLost(f"lease {lease_id} is not held with token {token}: it expired and was taken back, or was never yours")
    _id, job_id, state, attempts, max_attempts = row
    log.info("item failed", extra={"event": "item_failed", "job": job_id, "item": lease_id, "state": state, "count": attempts})
    return {"id": lease_id, "state": state, "attempts": attempts, "max_attempts": max_attempts}


def extend(pairs: list[tuple[int, int]]) -> tuple[dict[int, datetime], list[int]]:
    """Heartbeat for (lease id, token) pairs: returns ({id: new expiry}, [lost ids])."""
    with metrics.timed("extend"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql.statement("extend"), {"ids": [p[0] for p in pairs], "tokens": [p[1] for p in pairs]})
            extended = dict(cursor.fetchall())
    lost = [lease_id for lease_id, _token in pairs if lease_id not in extended]
    for lease_id in lost:
        log.warning("heartbeat refused: lease lost", extra={"event": "lease_lost", "item": lease_id, "reason": "extend"})
    return extended, lost
