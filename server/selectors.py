"""Reads for the API, the dashboard and /metrics. Nothing here writes.

Watermarks come from the counters table (a few rows per epoch), never from
counting item rows, so they cost the same on a job of a million items.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from .models import FINAL_STATES, Item, Job, Worker

RATE_WINDOW = timedelta(minutes=1)


def epoch_counts(job: Job) -> list[dict]:
    """Per-epoch counts; epochs not materialised yet are all pending."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT epoch, sum(pending), sum(leased), sum(done), sum(failed)
              FROM shardline_counter
             WHERE job_id = %s
             GROUP BY epoch
             ORDER BY epoch
            """,
            [job.id],
        )
        rows = {row[0]: row[1:] for row in cursor.fetchall()}
    epochs = []
    for epoch in range(job.num_epochs):
        pending, leased, done, failed = (int(v) for v in rows.get(epoch, (job.units_count, 0, 0, 0)))
        epochs.append(
            {
                "epoch": epoch,
                "total": job.units_count,
                "pending": pending,
                "leased": leased,
                "done": done,
                "failed": failed,
                "materialised": epoch < job.epochs_materialised,
            }
        )
    return epochs


def completed_in_window(job: Job, window: timedelta = RATE_WINDOW) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM shardline_item WHERE job_id = %s AND completed_at > now() - %s",
            [job.id, window],
        )
        return cursor.fetchone()[0]


def watermarks(job: Job) -> dict:
    epochs = epoch_counts(job)
    totals = {key: sum(e[key] for e in epochs) for key in ("total", "pending", "leased", "done", "failed")}
    recent = completed_in_window(job)
    rate = recent / RATE_WINDOW.total_seconds()
    remaining = totals["pending"] + totals["leased"]
    if job.state in FINAL_STATES or remaining == 0:
        eta = 0.0 if job.state == "done" or remaining == 0 else None
    else:
        eta = remaining / rate if rate > 0 else None
    current = next((e["epoch"] for e in epochs if e["pending"] + e["leased"] > 0), None)
    return {
        "job": job.id,
        "name": job.name,
        "state": job.state,
        **totals,
        "items_per_epoch": job.units_count,
        "num_epochs": job.num_epochs,
        "current_epoch": current,
        "rate_per_second": round(rate, 3),
        "eta_seconds": None if eta is None else round(eta, 1),
        "live_workers": live_workers(job),
        "epochs": epochs,
        "as_of": timezone.now(),
    }


def live_workers(job: Job) -> int:
    cutoff = timezone.now() - timedelta(seconds=max(2 * job.lease_timeout, 30))
    return Worker.objects.filter(job=job, last_seen__gte=cutoff).count()


def jobs(state: str | None = None):
    query = Job.objects.all()
    if state:
        query = query.filter(state=state)
    return query


def items(job: Job, *, state: str | None = None, epoch: int | None = None, worker: str | None = None):
    """Audit rows with the item string; ordered by id (epoch-major)."""
    from django.db.models import OuterRef, Subquery

    from .models import Unit

    query = Item.objects.filter(job=job)
    if state:
        query = query.filter(state=state)
    if epoch is not None:
        query = query.filter(epoch=epoch)
    if worker:
        query = query.filter(worker=worker)
    unit = Unit.objects.filter(job_id=OuterRef("job_id"), idx=OuterRef("unit_idx")).values("item")[:1]
    return query.annotate(item=Subquery(unit))


AUDIT_COLUMNS = (
    "id", "item", "epoch", "position", "state", "attempts", "worker",
    "leased_at", "completed_at", "duration", "records", "error",
)


def audit_rows_sql(job: Job, *, state=None, epoch=None, worker=None) -> tuple[str, list]:
    """The CSV export's query: streamed through a server-side cursor."""
    where = ["i.job_id = %s"]
    params: list = [job.id]
    if state:
        where.append("i.state = %s")
        params.append(state)
    if epoch is not None:
        where.append("i.epoch = %s")
        params.append(epoch)
    if worker:
        where.append("i.worker = %s")
        params.append(worker)
    query = (
        "SELECT i.id, u.item, i.epoch, i.position, i.state, i.attempts, i.worker, "
        "i.leased_at, i.completed_at, i.duration, i.records, i.error "
        "FROM shardline_item AS i JOIN shardline_unit AS u ON u.job_id = i.job_id AND u.idx = i.unit_idx "
        f"WHERE {' AND '.join(where)} ORDER BY i.id"
    )
    return query, params


def workers(job: Job | None = None):
    query = Worker.objects.select_related("job")
    if job is not None:
        query = query.filter(job=job)
    return query


def job_totals_for_metrics() -> list[dict]:
    cutoff = timezone.now() - timedelta(hours=1)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT j.name, j.state, j.units_count, j.num_epochs, j.epochs_materialised,
                   coalesce(sum(c.pending), 0), coalesce(sum(c.leased), 0),
                   coalesce(sum(c.done), 0), coalesce(sum(c.failed), 0)
              FROM shardline_job AS j
              LEFT JOIN shardline_counter AS c ON c.job_id = j.id
             WHERE j.state NOT IN ('done', 'cancelled', 'failed') OR j.finished_at > %s
             GROUP BY j.id
            """,
            [cutoff],
        )
        rows = cursor.fetchall()
    result = []
    for name, state, units, epochs, materialised, pending, leased, done, failed in rows:
        result.append(
            {
                "name": name,
                "state": state,
                # Epochs not materialised yet are all pending.
                "pending": int(pending) + units * (epochs - materialised),
                "leased": int(leased),
                "done": int(done),
                "failed": int(failed),
            }
        )
    return result
