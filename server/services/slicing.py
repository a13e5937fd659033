"""Slicing: turn a job's works into record-range items (``path?start=S&end=E``).

Runs in a Celery task, off the request path. It is idempotent: only a job in
``slicing`` is sliced, and the result (new units, epoch 0, state ``ready``)
is written in one transaction, so a worker killed half-way leaves nothing
behind and the redelivered task starts over cleanly.
"""

from __future__ import annotations

import heapq
import logging
import math
import time

from django.db import transaction

from worker_sdk import formats

from .. import clock, data_policy, sources, tables
from ..models import Event, EventKind, Job, JobState, Unit
from .units import UnitRow, materialise_epoch, write_units

log = logging.getLogger("shardline.slicing")

PROGRESS_EVERY = 1.0  # seconds between progress writes


def allocate(records: list[int], budget: int) -> list[int]:
    """Slices per work: proportional to records, at least 1 each, at most one per record, summing to budget when possible."""
    total = sum(records)
    budget = max(budget, len(records))
    quotas = [budget * r / total for r in records]
    counts = [max(1, min(r, math.floor(q))) for r, q in zip(records, quotas)]
    short = budget - sum(counts)
    if short > 0:
        # Largest remainders first, skipping works that have a slice per record.
        order = sorted(range(len(records)), key=lambda i: quotas[i] - counts[i], reverse=True)
        while short > 0:
            grew = False
            for i in order:
                if short == 0:
                    break
                if counts[i] < records[i]:
                    counts[i] += 1
                    short -= 1
                    grew = True
            if not grew:
                break  # every work has a slice per record: fewer items than asked
    elif short < 0:
        # The floor of 1 per work overshot: take slices back from the works
        # furthest above their quota, never below one each.
        heap = [(quotas[i] - counts[i], i) for i in range(len(records)) if counts[i] > 1]
        heapq.heapify(heap)
        while short < 0 and heap:
            _, i = heapq.heappop(heap)
            counts[i] -= 1
            short += 1
            if counts[i] > 1:
                heapq.heappush(heap, (quotas[i] - counts[i], i))
    return counts


def bounds(records: int, slices: int) -> list[tuple[int, int]]:
    """[S, E) ranges of one work; sizes differ by at most one."""
    return [(j * records // slices, (j + 1) * records // slices) for j in range(slices)]


class _Progress:
    def __init__(self, job_id: int, works_total: int):
        self.job_id = job_id
        self.state = {"works_total": works_total, "works_inspected": 0, "records_counted": 0}
        self.base = 0
        self.last = 0.0

    def records(self, counted_in_work: int) -> None:
        self.state["records_counted"] = self.base + counted_in_work
        self.flush()

    def work_done(self, records: int) -> None:
        self.base += records
        self.state["records_counted"] = self.base
        self.state["works_inspected"] += 1
        self.flush()

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= PROGRESS_EVERY:
            # Its own short statement, committed at once, so that the API and
            # the dashboard show progress while the scan goes on.
            Job.objects.filter(pk=self.job_id, state__in=(JobState.SLICING, JobState.PAUSED)).update(
                slicing_progress=dict(self.state)
            )
            self.last = now


def slice_job(job_id: int) -> str:
    """Slices one job; returns what happened (for the task's log).

    Whatever goes wrong fails the job with a message naming the work and the
    cause: a job left in ``slicing`` would make every take wait for good.
    """
    job = Job.objects.filter(pk=job_id).first()
    if job is None or not job.slicing:
        return f"job {job_id} is not waiting to be sliced"
    raw_works = list(Unit.objects.filter(job_id=job_id).order_by("idx").values_list("item", flat=True))
    expanded: list[sources.Work] = []
    current = ""  # the work in hand, for the message of an unexpected error
    try:
        # The admin's policy as it is now (server/data_policy.py), whatever it was at creation.
        roots = data_policy.file_roots()
        pinned = []
        for current in raw_works:
            if formats.table_kind(current):
                _warn_unrestricted(job, roots, formats.table_kind(current) != formats.POSTGRES)
                table_works, record = tables.expand(current, roots)
                expanded += table_works
                pinned.append(record)
            elif job.num_slices is None:
                expanded.append(sources.Work(current, None))  # sliced for its tables only: a file stays whole
            else:
                _warn_unrestricted(job, roots, True)
                sources.check_roots(formats.split_format(current)[0], roots)
                expanded += sources.expand(current)
        for work in expanded:  # a directory or glob (or a table's data files) may lead out
            current = work.path
            if work.format not in (None, formats.POSTGRES):
                sources.check_roots(work.path, roots)
        progress = _Progress(job_id, len(expanded))
        for work in expanded:
            current = work.path
            sources.count(work, progress.records)
            progress.work_done(work.records)
        progress.flush(force=True)
        current = ""
        units = plan(expanded, job.num_slices)
        if not units:
            raise sources.SourceError("every work is empty: there is nothing to hand out")
    except (sources.SourceError, formats.FormatError) as exc:
        _fail(job, str(exc))
        return f"job {job_id} failed: {exc}"
    except Exception as exc:  # noqa: BLE001  (any reader's or library's error: the job must not stay slicing)
        log.exception("slicing raised", extra={"event": "slicing_error", "job": job_id, "job_name": job.name})
        message = f"{type(exc).__name__}: {exc}"
        _fail(job, f"{current}: {message}" if current else message)
        return f"job {job_id} failed: {message}"
    finally:
        tables.release(expanded)
    return _install(job, units, pinned, [work for work in expanded if work.whole])


def plan(works: list[sources.Work], num_slices: int | None) -> list[UnitRow]:
    """(item, byte offset, start, end, source) per unit, in the works' order.

    Without ``num_slices`` (a job sliced only for its tables) files stay
    whole and each table (or lakehouse data file) is one slice.
    """
    if num_slices is None:
        num_slices = len(works)
    sliceable = [w for w in works if w.format is not None and w.records > 0]
    others = len([w for w in works if w.format is None])
    counts = (
        dict(zip(map(id, sliceable), allocate([w.records for w in sliceable], num_slices - others)))
        if sliceable
        else {}
    )
    units: list[UnitRow] = []
    for work in works:
        if work.format is None:
            units.append((work.path, None, None, None, None))  # no known format: one item, as DeepRec does for files
            continue
        if work.records == 0:
            continue
        spans = bounds(work.records, counts[id(work)])
        starts = [start for start, _end in spans]
        offsets, read = sources.offsets_of(work, starts), tables.source_of(work, starts)
        forced = work.format if work.forced else None
        units += [
            (formats.slice_item(work.path, start, end, forced), offset, start, end, key)
            for (start, end), offset, key in zip(spans, offsets, read)
        ]
    return units


def _warn_unrestricted(job: Job, roots: list[str] | None, reads_files: bool) -> None:
    if roots is None and reads_files and not getattr(job, "_warned_unrestricted", False):
        job._warned_unrestricted = True
        log.warning(
            "no SHARDLINE_DATA_ROOTS: with DEBUG on, the slicer reads any file the server can; set the roots",
            extra={"event": "data_roots_unset", "job": job.pk, "job_name": job.name},
        )


def jobs_waiting() -> list[int]:
    return list(Job.objects.filter(state=JobState.SLICING).values_list("pk", flat=True))


def _install(job: Job, units: list[UnitRow], pinned: list[dict], whole: list[sources.Work] = ()) -> str:
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if not job.slicing:
            return f"job {job.pk} was sliced (or cancelled) meanwhile"
        write_units(job.pk, units, replace=True)
        job.units_count = len(units)
        job.tables = pinned
        if job.state == JobState.PAUSED:
            job.resume_state = JobState.READY
        else:
            job.state = JobState.READY
        job.save(update_fields=["units_count", "state", "resume_state", "tables", "updated_at"])
        materialise_epoch(job.pk, 0)
        Event.objects.create(job=job, kind=EventKind.STATE, message=f"sliced into {len(units)} items per epoch")
        if whole:
            Event.objects.create(job=job, kind=EventKind.WARNING, message=whole_message(whole))
    log.info("job sliced", extra={"event": "job_sliced", "job": job.pk, "job_name": job.name, "count": len(units)})
    return f"job {job.pk} sliced into {len(units)} items"


def whole_message(works: list[sources.Work]) -> str:
    """The job's warning: which works are handed out whole instead of sliced, and why."""
    shown = "; ".join(f"{work.path}: {work.whole}" for work in works[:5])
    more = f"; and {len(works) - 5} more" if len(works) > 5 else ""
    return f"{len(works)} works handed out whole, not sliced (their records cannot be counted here): {shown}{more}"


def _fail(job: Job, message: str) -> None:
    updated = Job.objects.filter(pk=job.pk, state__in=(JobState.SLICING, JobState.PAUSED)).update(
        state=JobState.FAILED, error=message, finished_at=clock.now(), updated_at=clock.now()
    )
    if updated:
        Event.objects.create(job=job, kind=EventKind.STATE, message=f"slicing failed: {message}")
        log.warning(
            "slicing failed", extra={"event": "job_failed", "job": job.pk, "job_name": job.name, "reason": message}
        )
