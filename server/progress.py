"""How far a job has come: one definition of its totals, rate, live workers and ETA.

The watermarks API, the job page, the jobs list and /metrics all read a
``JobProgress``, so no two of them can disagree on screen. A page of jobs
costs four queries whatever its size: the counters rows, the expired leases
(an index range), the last two minutes of throughput rows and a count of
live workers.

An expired lease counts as pending, not leased: its holder stopped
heartbeating, and the next take hands it out again (take.sql ``reclaimed``).
Reclaiming expired leases in the background instead would need a process
(Celery beat) whose absence would make every page wrong again; this read is
true with no process running at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count

from . import clock, sql
from .models import FINAL_STATES, Job, JobState, Worker

COUNTS = ("pending", "leased", "done", "failed")


@dataclass(frozen=True)
class EpochProgress:
    epoch: int
    total: int
    pending: int  # expired leases included
    leased: int  # live leases only
    done: int
    failed: int
    expired: int  # leases past their expiry, not yet taken back by a take
    materialised: bool


@dataclass(frozen=True)
class JobProgress:
    job: Job
    epochs: tuple[EpochProgress, ...]
    # Completions per second over the last minute, and workers seen within
    # their liveness window; None for a job that has ended (neither means
    # anything once nothing can be handed out).
    rate_per_second: float | None
    live_workers: int | None
    as_of: datetime

    def _sum(self, key: str) -> int:
        return sum(getattr(epoch, key) for epoch in self.epochs)

    @property
    def total(self) -> int:
        return self._sum("total")

    @property
    def pending(self) -> int:
        return self._sum("pending")

    @property
    def leased(self) -> int:
        return self._sum("leased")

    @property
    def done(self) -> int:
        return self._sum("done")

    @property
    def failed(self) -> int:
        return self._sum("failed")

    @property
    def expired(self) -> int:
        return self._sum("expired")

    @property
    def remaining(self) -> int:
        return self.pending + self.leased

    @property
    def current_epoch(self) -> int | None:
        return next((e.epoch for e in self.epochs if e.pending + e.leased > 0), None)

    @property
    def eta_seconds(self) -> float | None:
        """Seconds to the end at the current rate: only while the job runs (0 once it is done)."""
        if self.job.state == JobState.DONE:
            return 0.0
        if self.job.state != JobState.RUNNING or not self.rate_per_second:
            return None
        return self.remaining / self.rate_per_second

    def as_watermarks(self) -> dict:
        eta = self.eta_seconds
        return {
            "job": self.job.id,
            "name": self.job.name,
            "state": self.job.state,
            "total": self.total,
            **{key: getattr(self, key) for key in COUNTS},
            "expired": self.expired,
            "items_per_epoch": self.job.units_count,
            "num_epochs": self.job.num_epochs,
            "current_epoch": self.current_epoch,
            "rate_per_second": None if self.rate_per_second is None else round(self.rate_per_second, 3),
            "eta_seconds": None if eta is None else round(eta, 1),
            "live_workers": self.live_workers,
            "epochs": [epoch.__dict__ for epoch in self.epochs],
            "as_of": self.as_of,
        }


def of(job: Job) -> JobProgress:
    return of_jobs([job])[job.id]


def of_jobs(jobs: list[Job]) -> dict[int, JobProgress]:
    """Progress of each job, by id."""
    if not jobs:
        return {}
    ids = [job.id for job in jobs]
    live_ids = [job.id for job in jobs if job.state not in FINAL_STATES]
    counts = _counts(ids)
    rates = _rates(live_ids)
    live = dict(
        Worker.objects.live()
        .filter(job_id__in=live_ids)
        .values_list("job_id")
        .annotate(n=Count("id"))
        .values_list("job_id", "n")
    )
    now = clock.now()
    result = {}
    for job in jobs:
        epochs = []
        for epoch in range(job.num_epochs):
            pending, leased, done, failed, expired = counts.get((job.id, epoch), (job.units_count, 0, 0, 0, 0))
            epochs.append(
                EpochProgress(
                    epoch=epoch,
                    # A split adds an item to its epoch (services/splits.py).
                    total=pending + leased + done + failed,
                    pending=pending + expired,
                    leased=leased - expired,
                    done=done,
                    failed=failed,
                    expired=expired,
                    materialised=epoch < job.epochs_materialised,
                )
            )
        final = job.state in FINAL_STATES
        result[job.id] = JobProgress(
            job=job,
            epochs=tuple(epochs),
            as_of=now,
            rate_per_second=None if final else rates.get(job.id, 0.0),
            live_workers=None if final else live.get(job.id, 0),
        )
    return result


def _counts(ids: list[int]) -> dict[tuple[int, int], tuple[int, ...]]:
    """(pending, leased, done, failed, expired) per (job, epoch) with item rows."""
    return {(row.job_id, row.epoch): tuple(row[2:]) for row in sql.run("progress_counts", {"ids": ids})}


def _rates(ids: list[int]) -> dict[int, float]:
    """Completions per second over the last minute, from the per-minute rows (shardline_throughput).

    The minute before the current one counts for the part of it that lies
    within the last 60 seconds (the sliding-window estimate).
    """
    if not ids:
        return {}
    return {
        row.job_id: (row.current + row.previous * max(0.0, 60.0 - row.seconds_into) / 60.0) / 60.0
        for row in sql.run("progress_rates", {"ids": ids})
    }
