"""Reads for the API, the dashboard and /metrics. Nothing here writes.

A job's progress (totals, rate, live workers, ETA) is ``server.progress``.
"""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta

from django.db.models import Q

from . import clock, sql
from .models import FINAL_STATES, Item, ItemState, Job, ServiceNow, Worker


def jobs(state: str | None = None, search: str | None = None, sort: str = "-created"):
    """Jobs with ``elapsed`` (from start to end, or to now while unfinished; null before a start)."""
    from django.db.models import DurationField, ExpressionWrapper, F
    from django.db.models.functions import Coalesce

    query = Job.objects.annotate(
        elapsed=ExpressionWrapper(
            Coalesce(F("finished_at"), ServiceNow()) - F("started_at"), output_field=DurationField()
        )
    )
    if state:
        query = query.filter(state=state)
    if search:
        query = query.filter(name__icontains=search)
    field = sort.lstrip("-")
    column = {"created": "created_at", "name": "name", "state": "state", "elapsed": "elapsed"}[field]
    order = F(column).desc(nulls_last=True) if sort.startswith("-") else F(column).asc(nulls_last=True)
    return query.order_by(order, "-id")


def items(job: Job, *, state: str | None = None, epoch: int | None = None, worker: str | None = None):
    """Item rows with the item string; ``worker`` matches a worker name or its prefix (host:pid -> its tasks)."""
    from django.db.models import F, Func, OuterRef, Subquery, TextField

    from .models import Unit

    query = Item.objects.filter(job=job)
    if state == COMPLETED:
        query = query.filter(completed_at__isnull=False)
    elif state:
        query = query.filter(state=state)
    if epoch is not None:
        query = query.filter(epoch=epoch)
    if worker:
        query = query.filter(worker__startswith=worker)
    unit = Unit.objects.filter(job_id=OuterRef("job_id"), idx=OuterRef("unit_idx")).values("item")[:1]
    # A split's pieces are named by their own ranges (shardline_item_name, server/sql/schema.sql).
    name = Func(
        Subquery(unit), F("range_start"), F("range_end"), function="shardline_item_name", output_field=TextField()
    )
    return query.annotate(item=name)


# The audit's selections: an item state, or "completed" (every item a worker
# finished, done or failed, newest first: the dashboard's default view).
COMPLETED = "completed"
AUDIT_STATES = (COMPLETED, *ItemState.values)
AUDIT_COLUMNS = (
    "id",
    "item",
    "epoch",
    "position",
    "state",
    "attempts",
    "worker",
    "leased_at",
    "completed_at",
    "duration",
    "records",
    "error",
)


def audit_selection(job: Job, *, state=None, epoch=None, worker=None):
    """The audit rows for these filters, in the order the dashboard shows them.

    The page and the CSV export read this one queryset, so a download is
    exactly the selection on screen. Each order is served by an index, so a
    page costs the same on a million items.
    """
    query = items(job, state=state, epoch=epoch, worker=worker)
    if state in (ItemState.PENDING, ItemState.LEASED):
        return query.order_by("epoch", "position")  # item_pending / item_job_epoch_position
    if state in (COMPLETED, ItemState.DONE):
        return query.order_by("-completed_at", "-id")  # item_completed
    if state == ItemState.FAILED:
        return query.order_by("-id")  # item_failed
    return query.order_by("id")


def unit_names(job: Job, limit: int) -> list[str]:
    """The job's first ``limit`` units (its works, with the prefix, or its slices), in list order."""
    from .models import Unit

    return list(Unit.objects.filter(job=job).order_by("idx").values_list("item", flat=True)[:limit])


def workers(job: Job | None = None):
    query = Worker.objects.select_related("job")
    if job is not None:
        query = query.filter(job=job)
    return query


def throughput(job: Job, minutes: int = 30) -> list[tuple[datetime, int]]:
    """Completions per minute over the last ``minutes`` minutes (zeros included), oldest first."""
    return [(row.minute, row.done) for row in sql.run("throughput", {"job": job.id, "minutes": minutes})]


def workers_with_health(job: Job) -> list[dict]:
    """Workers of a job, with a straggler mark (time per record over 2x the median) and a gone mark.

    Per record, as the straggler rule of take.sql: split pieces differ in
    size, and per item a worker that finished a small piece looked fast.
    """
    rows = list(Worker.objects.filter(job=job).with_liveness().order_by("name"))
    paces = [w.record_seconds for w in rows if w.record_seconds is not None]
    median = statistics.median(paces) if paces else None
    return [
        {
            "name": w.name,
            "items_done": w.items_done,
            "items_failed": w.items_failed,
            "records_done": w.records_done,
            "mean_item_seconds": w.mean_item_seconds,
            "record_seconds": w.record_seconds,
            "last_seen": w.last_seen,
            "waiting": w.waiting_since is not None,
            "straggler": bool(
                median and w.record_seconds is not None and len(paces) > 1 and w.record_seconds > 2 * median
            ),
            "gone": not w.is_live,
        }
        for w in rows
    ]


def data_stalls(job: Job) -> list[dict]:
    """Each training loop's data stall on the job, most starved first: ``fraction`` of its time it waited for data."""
    from .models import DataStall

    rows = DataStall.objects.filter(job=job).values("worker", "waited", "total", "reported_at")
    stalls = [{**row, "fraction": row["waited"] / row["total"] if row["total"] > 0 else None} for row in rows]
    return sorted(stalls, key=lambda row: (-(row["fraction"] or 0.0), row["worker"]))


def data_stalls_for_metrics(jobs: list[Job]) -> list[tuple[str, str, float, float]]:
    """(job name, loop, seconds waited, seconds in all) of ``jobs``' loops that reported in the last hour.

    A loop that stopped reporting an hour ago leaves /metrics: so do the
    names of restarted processes (host:pid), which would otherwise pile up.
    """
    from .models import DataStall

    return list(
        DataStall.objects.filter(job__in=[job.id for job in jobs], reported_at__gt=clock.now() - timedelta(hours=1))
        .order_by("job_id", "worker")
        .values_list("job__name", "worker", "waited", "total")
    )


def recent_failures(job: Job, limit: int = 10):
    """Failures, retries and expiries, newest first, each with its item's string (``item_name``)."""
    from .models import EventKind

    return _events_with_item_names(job, [EventKind.FAILED, EventKind.RETRIED, EventKind.EXPIRED], limit)


def recent_splits(job: Job, limit: int = 10):
    """Splits of the liquid tail, newest first (one event per cut lease), with the item strings."""
    from .models import EventKind

    return _events_with_item_names(job, [EventKind.SPLIT], limit)


def _events_with_item_names(job: Job, kinds: list[str], limit: int):
    from django.db.models import F, Func, OuterRef, Subquery, TextField

    from .models import Event, Unit

    unit = Unit.objects.filter(job_id=OuterRef("job_id"), idx=OuterRef("item__unit_idx")).values("item")[:1]
    name = Func(
        Subquery(unit),
        F("item__range_start"),
        F("item__range_end"),
        function="shardline_item_name",
        output_field=TextField(),
    )
    return Event.objects.filter(job=job, kind__in=kinds).annotate(item_name=name).order_by("-at", "-id")[:limit]


def item_events(job: Job, item_id: int):
    """What happened to one item besides its leases: failures, retries, expiries, lost leases."""
    from .models import Event

    return Event.objects.filter(job=job, item_id=item_id).order_by("at", "id")


def audit_page(job: Job, *, page: int = 1, page_size: int = 50, **filters):
    """One page of the audit selection; (rows, has_next). No count over the job."""
    start = (page - 1) * page_size
    rows = list(audit_selection(job, **filters)[start : start + page_size + 1])
    return rows[:page_size], len(rows) > page_size


def epoch_records(job: Job, upto: int) -> dict:
    """Records per epoch, and unread in epochs up to ``upto`` (None: not known; see epoch_records.sql).

    ``slicing``: the counts wait for the job's slicing (its units are not all
    there yet); a synchronous rank asks again rather than a second question first.
    """
    rows = sql.run("epoch_records", {"job": job.id, "upto": upto})
    row = rows[0] if rows else None
    return {
        "upto_epoch": upto,
        "slicing": job.slicing,
        "per_epoch": None if row is None else row.per_epoch,
        "unread": None if row is None else row.unread,
        "leased": None if row is None else row.leased,
        "epochs_made": job.epochs_materialised if row is None else row.epochs_made,
    }


def item_dead_rows() -> int:
    """Dead row versions in shardline_item, from Postgres's statistics (0 before any are counted)."""
    return sql.run("item_dead_rows", {})[0].dead


def jobs_for_metrics() -> list[Job]:
    """Jobs that are not finished, and those finished in the last hour."""
    cutoff = clock.now() - timedelta(hours=1)
    return list(Job.objects.exclude(state__in=FINAL_STATES, finished_at__lte=cutoff).order_by("id"))


def timeline(job: Job, *, minutes: int = 30, limit: int = 1500) -> dict:
    """Which worker held which item when: the leases of the job's last ``minutes`` (to its end, or now).

    Each item row is its current (or last) lease, so an item read twice
    after an expiry shows its last reading. At most ``limit`` leases, the
    latest ones; ``truncated`` says when there were more.
    """
    now = sql.run("database_now", {})[0].now
    end = job.finished_at or now
    start = max(job.started_at or job.created_at, end - timedelta(minutes=minutes))
    unit_query = (
        items(job)
        .filter(leased_at__isnull=False)
        .filter(Q(completed_at__gte=start) | Q(state=ItemState.LEASED))
        .order_by("-leased_at")
    )
    rows = list(
        unit_query.values("id", "item", "worker", "state", "leased_at", "completed_at", "expires_at")[: limit + 1]
    )
    return {"start": start, "end": end, "now": now, "leases": rows[:limit], "truncated": len(rows) > limit}


def holdings(job: Job, limit: int = 200) -> list:
    """Live leases right now, by worker: what each worker is reading."""
    return list(
        items(job, state=ItemState.LEASED)
        .filter(expires_at__gt=ServiceNow())
        .order_by("worker", "leased_at")
        .values("id", "item", "worker", "leased_at", "expires_at")[:limit]
    )


# A token's state, as authentication sees it (services/accounts.py): revoked
# first, then expired, then its user deactivated; otherwise live.
TOKEN_STATES = ("live", "revoked", "expired", "inactive")


def tokens(state: str | None = None, user: str | None = None):
    """API tokens, newest first, with ``state`` (one of TOKEN_STATES) and the user; never a key or its hash."""
    from django.db.models import Case, CharField, Value, When

    from .models import ApiToken

    query = ApiToken.objects.select_related("user").annotate(
        state=Case(
            When(revoked_at__isnull=False, then=Value("revoked")),
            When(expires_at__lte=ServiceNow(), then=Value("expired")),
            When(user__is_active=False, then=Value("inactive")),
            default=Value("live"),
            output_field=CharField(),
        )
    )
    if state:
        query = query.filter(state=state)
    if user:
        query = query.filter(user__username=user)
    return query.order_by("-created_at", "-id")
