"""Reads for the API, the dashboard and /metrics. Nothing here writes.

Watermarks come from the counters table (a few rows per epoch), never from
counting item rows, so they cost the same on a job of a million items.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from .models import FINAL_STATES, Item, Job, Worker

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


def completion_rate(job: Job) -> float:
    """Completions per second over the last minute, from the per-minute rows (take.sql `rated`).

    The minute before the current one counts for the part of it that lies
    within the last 60 seconds (the sliding-window estimate): two rows per
    connection read, however fast the job completes items.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT coalesce(sum(done) FILTER (WHERE minute = date_trunc('minute', now())), 0),
                   coalesce(sum(done) FILTER (WHERE minute < date_trunc('minute', now())), 0),
                   extract(epoch FROM now() - date_trunc('minute', now()))
              FROM shardline_throughput
             WHERE job_id = %s AND minute >= date_trunc('minute', now()) - interval '1 minute'
            """,
            [job.id],
        )
        current, previous, into_minute = cursor.fetchone()
    return (float(current) + float(previous) * max(0.0, 60.0 - float(into_minute)) / 60.0) / 60.0


def watermarks(job: Job) -> dict:
    epochs = epoch_counts(job)
    totals = {key: sum(e[key] for e in epochs) for key in ("total", "pending", "leased", "done", "failed")}
    rate = completion_rate(job)
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


# -- dashboard -----------------------------------------------------------------


def job_summaries(jobs: list[Job]) -> dict[int, dict]:
    """Totals, recent rate and live workers for a page of jobs, in three queries whatever the page size."""
    ids = [job.id for job in jobs]
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT job_id, sum(pending), sum(leased), sum(done), sum(failed)
              FROM shardline_counter WHERE job_id = ANY(%s) GROUP BY job_id
            """,
            [ids],
        )
        counts = {row[0]: [int(v) for v in row[1:]] for row in cursor.fetchall()}
        cursor.execute(
            """
            SELECT job_id, count(*) FROM shardline_item
             WHERE job_id = ANY(%s) AND completed_at > now() - interval '1 minute'
             GROUP BY job_id
            """,
            [ids],
        )
        per_minute = dict(cursor.fetchall())
        cursor.execute(
            """
            SELECT w.job_id, count(*) FROM shardline_worker AS w JOIN shardline_job AS j ON j.id = w.job_id
             WHERE w.job_id = ANY(%s)
               AND w.last_seen > now() - greatest(2 * j.lease_timeout, 30) * interval '1 second'
             GROUP BY w.job_id
            """,
            [ids],
        )
        live = dict(cursor.fetchall())
    summaries = {}
    for job in jobs:
        pending, leased, done, failed = counts.get(job.id, [0, 0, 0, 0])
        pending += job.units_count * (job.num_epochs - job.epochs_materialised)
        total = job.units_count * job.num_epochs
        rate = per_minute.get(job.id, 0)
        remaining = pending + leased
        summaries[job.id] = {
            "total": total,
            "pending": pending,
            "leased": leased,
            "done": done,
            "failed": failed,
            "per_minute": rate,
            "eta_seconds": (remaining / rate * 60) if rate and remaining and job.state not in FINAL_STATES else None,
            "live_workers": live.get(job.id, 0),
        }
    return summaries


def throughput(job: Job, minutes: int = 30) -> list[tuple[datetime, int]]:
    """Completions per minute over the last ``minutes`` minutes (zeros included), oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT minute, coalesce(n, 0)
              FROM generate_series(date_trunc('minute', now()) - (%(m)s - 1) * interval '1 minute',
                                   date_trunc('minute', now()), interval '1 minute') AS minute
              LEFT JOIN (SELECT minute AS m, sum(done)::bigint AS n
                           FROM shardline_throughput
                          WHERE job_id = %(job)s AND minute >= date_trunc('minute', now()) - (%(m)s - 1) * interval '1 minute'
                          GROUP BY 1) AS c ON c.m = minute
             ORDER BY minute
            """,
            {"job": job.id, "m": minutes},
        )
        return cursor.fetchall()


def workers_with_health(job: Job) -> list[dict]:
    """Workers of a job, with a straggler mark (mean item time over 2x the median) and a gone mark."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
    rows = list(Worker.objects.filter(job=job).order_by("name"))
    means = sorted(w.mean_item_seconds for w in rows if w.mean_item_seconds is not None)
    median = means[len(means) // 2] if len(means) % 2 else (sum(means[len(means) // 2 - 1:len(means) // 2 + 1]) / 2 if means else None)
    gone_after = timedelta(seconds=max(2 * job.lease_timeout, 30))
    return [
        {
            "name": w.name,
            "items_done": w.items_done,
            "items_failed": w.items_failed,
            "mean_item_seconds": w.mean_item_seconds,
            "last_seen": w.last_seen,
            "straggler": bool(median and w.mean_item_seconds is not None and len(means) > 1 and w.mean_item_seconds > 2 * median),
            "gone": now - w.last_seen > gone_after,
        }
        for w in rows
    ]


def recent_failures(job: Job, limit: int = 10):
    from .models import Event

    return Event.objects.filter(job=job, kind__in=["failed", "retried", "expired"]).order_by("-at", "-id")[:limit]


def audit_page(job: Job, *, state=None, epoch=None, worker=None, page: int = 1, page_size: int = 50):
    """One page of audit rows, most recently completed first; (rows, has_next). No count over the job."""
    query = items(job, state=state, epoch=epoch, worker=worker)
    # Each order is served by an index, so a page costs the same on a million items.
    if state in ("pending", "leased"):
        query = query.order_by("epoch", "position")        # item_pending / item_job_epoch_position
    elif state == "failed":
        query = query.order_by("-id")                       # item_failed
    else:
        # Completed items, newest first (item_completed); without a state
        # filter the audit is the record of completions.
        query = query.filter(completed_at__isnull=False).order_by("-completed_at", "-id")
    start = (page - 1) * page_size
    rows = list(query[start:start + page_size + 1])
    return rows[:page_size], len(rows) > page_size


def item_dead_rows() -> int:
    """Dead row versions in shardline_item, from Postgres's statistics (0 before any are counted)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'shardline_item'), 0)")
        return cursor.fetchone()[0]
