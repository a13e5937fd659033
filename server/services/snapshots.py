"""Snapshots: resumable training.

A snapshot is a job's position, the sequence number of its newest completion
(every completion takes one from ``shardline_completion_seq``). Taking one is a
single index probe and copies nothing. Restoring one puts back to pending
every item completed after it and every live lease (server/sql/restore.sql),
so that data read after a model checkpoint is read again once the model is
restored from that checkpoint. Pending items are handed out in (epoch,
position) order, so reading continues from the snapshot's position in the
same order a run without the crash would have used.

Repeated restores. Every worker of a restarted run restores the same
checkpoint, so a restore must be idempotent. A restore of snapshot S is a
no-op (nothing changes; the answer is the earlier restore's, with
``repeated: true``) when the job's last restore was of S and either

- the caller passes the same non-empty ``generation`` as that restore (a name
  of the restarted run: its completions since do not matter), or
- no item of the job has been completed since that restore (its newest
  completion is still the one recorded right after it).

Otherwise it is a new restore: a restore of S after new completions rolls
those back again (a second crash restarting from the same checkpoint), and
restoring an older snapshot after a newer one is allowed and rolls back
further. Restoring a snapshot that an earlier restore went back past re-opens
every completion with a larger sequence number, i.e. everything completed
since that snapshot was taken, including completions made after the earlier
restore; the items the earlier restore re-opened stay pending.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from .. import selectors, sql
from ..errors import NotFound
from ..models import Event, EventKind, Item, ItemHistory, Job, JobAction, JobState, Snapshot, SnapshotRestore, Unit
from . import jobs

log = logging.getLogger("shardline.snapshots")


@dataclass(frozen=True)
class RestoreResult:
    id: int
    job: int
    snapshot: int
    seq: int
    reopened: int
    fenced: int
    generation: str
    created_at: datetime
    repeated: bool
    state: str


def _newest_completion(job_id: int) -> int:
    return sql.run("newest_completion", {"job": job_id})[0].seq


def take(job_id: int, worker: str = "") -> Snapshot:
    """Records the job's current position (its newest completion). O(1): nothing is copied.

    A completion that commits while the snapshot is taken may fall on either
    side of it, as it would with a checkpoint taken a moment earlier or later.
    """
    job = jobs.get_job(job_id)
    snapshot = Snapshot.objects.create(
        job=job, seq=_newest_completion(job.id), epochs_materialised=job.epochs_materialised, worker=worker
    )
    log.info("snapshot taken", extra={"event": "snapshot", "job": job.id, "snapshot": snapshot.id, "seq": snapshot.seq})
    return snapshot


def get(job_id: int, snapshot_id: int) -> Snapshot:
    snapshot = Snapshot.objects.filter(pk=snapshot_id, job_id=job_id).first()
    if snapshot is None:
        jobs.get_job(job_id)  # 404 for the job first, when it is the job that is unknown
        raise NotFound(f"job {job_id} has no snapshot with id {snapshot_id}")
    return snapshot


def list_for(job: Job):
    """The job's snapshots, newest first (for the dashboard)."""
    return Snapshot.objects.filter(job=job).order_by("-id")


def restores_for(job: Job):
    """The job's restores, newest first."""
    return SnapshotRestore.objects.filter(job=job).select_related("snapshot").order_by("-id")


def restore(job_id: int, snapshot_id: int, *, generation: str = "", worker: str = "") -> RestoreResult:
    """Puts the job back to a snapshot: see the module docstring for repeats."""
    with transaction.atomic():
        # Serialises restores of this job (and an epoch being materialised);
        # NO KEY UPDATE leaves the foreign-key checks of item updates alone.
        job = Job.objects.select_for_update(no_key=True).filter(pk=job_id).first()
        if job is None:
            raise NotFound(f"no job with id {job_id}")
        snapshot = get(job_id, snapshot_id)
        jobs.check_allows(job, JobAction.RESTORE)

        last = SnapshotRestore.objects.filter(job=job).order_by("-id").first()
        if last is not None and last.snapshot_id == snapshot.id:
            same_generation = bool(generation) and generation == last.generation
            if same_generation or _newest_completion(job.id) == last.seq_after:
                return _result(last, snapshot, job.state, repeated=True)

        record = SnapshotRestore.objects.create(
            job=job, snapshot=snapshot, seq_after=0, generation=generation, reopened=0, fenced=0, worker=worker
        )
        reopened, fenced = sql.run("restore", {"job": job.id, "seq": snapshot.seq, "restore": record.id})[0]
        record.reopened, record.fenced = reopened, fenced
        record.seq_after = _newest_completion(job.id)
        record.save(update_fields=["reopened", "fenced", "seq_after"])

        state = job.state
        if (reopened or fenced) and state == JobState.DONE:
            Job.objects.filter(pk=job.id).update(state=JobState.RUNNING, finished_at=None)
            state = JobState.RUNNING
        Event.objects.create(
            job=job,
            kind=EventKind.RESTORED,
            worker=worker,
            message=(
                f"restored snapshot {snapshot.id} (completion {snapshot.seq}): {reopened} completed items "
                f"back to pending, {fenced} leases taken back"
                + (f"; job {job.state} -> {state}" if state != job.state else "")
            ),
        )
    log.info(
        "snapshot restored",
        extra={"event": "restored", "job": job.id, "snapshot": snapshot.id, "count": reopened, "fenced": fenced},
    )
    return _result(record, snapshot, state, repeated=False)


def _result(record: SnapshotRestore, snapshot: Snapshot, state: str, *, repeated: bool) -> RestoreResult:
    return RestoreResult(
        id=record.id,
        job=record.job_id,
        snapshot=snapshot.id,
        seq=snapshot.seq,
        reopened=record.reopened,
        fenced=record.fenced,
        generation=record.generation,
        created_at=record.created_at,
        repeated=repeated,
        state=state,
    )


def item_history(job_id: int, item_id: int) -> dict:
    """An item's whole story: rolled-back completions and leases, the restores between them, and now.

    Entries are in the order they happened: ``completed`` / ``leased`` (with
    ``rolled_back_by``: the restore that undid it, or null for the current
    one) and ``restored`` (a restore that rolled this item back).
    """
    item = Item.objects.filter(pk=item_id, job_id=job_id).first()
    if item is None:
        jobs.get_job(job_id)
        raise NotFound(f"job {job_id} has no item with id {item_id}")
    entries = []
    rows = ItemHistory.objects.filter(item_id=item.id).select_related("restore").order_by("id")
    for row in rows:
        entries.append(_attempt(row.state, row, rolled_back_by=row.restore_id))
        entries.append(
            {
                "kind": "restored",
                "restore": row.restore_id,
                "snapshot": row.restore.snapshot_id,
                "at": row.restore.created_at,
            }
        )
    if item.state in ("done", "leased"):
        entries.append(_attempt(item.state, item, rolled_back_by=None))
    unit = Unit.objects.filter(job_id=job_id, idx=item.unit_idx).values("item", "start", "end").first()
    named = selectors.items(item.job).filter(pk=item.id).values_list("item", flat=True).first()
    splits = Event.objects.filter(job_id=job_id, item_id=item.id, kind__in=[EventKind.SPLIT, EventKind.REMAINDER])
    return {
        "id": item.id,
        "job": job_id,
        "item": named,
        "epoch": item.epoch,
        "position": item.position,
        "state": item.state,
        # The record range (a split's piece has its own) and the item it was split from.
        "start": unit["start"] if item.range_start is None else item.range_start,
        "end": unit["end"] if item.range_end is None else item.range_end,
        "parent": item.parent_id,
        "history": entries,
        "splits": [
            {"kind": event.kind, "at": event.at, "worker": event.worker, "message": event.message}
            for event in splits.order_by("at", "id")
        ],
    }


def _attempt(state: str, row, *, rolled_back_by: int | None) -> dict:
    return {
        "kind": "completed" if state == "done" else "leased",
        "worker": row.worker,
        "leased_at": row.leased_at,
        "completed_at": row.completed_at,
        "duration": row.duration,
        "records": row.records,
        "seq": row.seq,
        "rolled_back_by": rolled_back_by,
    }
