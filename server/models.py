"""The dispatch domain: jobs, their items per epoch, leases, workers, tokens.

Words (docs/design.md, "Words", has the same table):

    work    what a job is made of, as the user wrote it (a file, a directory
            or glob, or with num_slices a file to be cut)
    unit    one entry of a job's per-epoch list: a work, or a slice of one
    slice   records [S, E) of a file, ``path?start=S&end=E`` (worker_sdk.formats)
    item    one unit in one epoch; its row is also its current lease
    lease   an item handed to a worker until it completes, fails, or expires
    token   a lease's fencing token, fresh on every lease
    epoch   one pass over the units
    worker  a name that leases items (one process); its consumer is the
            process that uses what it reads
    action  what an admin may do to a job, allowed by its state (ACTIONS)

State changes go through ``server.services``; the hot path (take, complete,
fail, extend) is SQL in ``server/sql/``. The models here define the schema and
serve reads (admin, selectors). Over 400 lines because it is the whole schema
and the facts derived from single rows (Job.actions, Worker liveness), which
belong beside their fields.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import BooleanField, F, Func, OuterRef, Q


class Role(models.TextChoices):
    VIEWER = "viewer", "viewer (read)"
    WORKER = "worker", "worker (read, create or attach jobs, lease items)"
    ADMIN = "admin", "admin (everything)"


ROLE_RANK = {Role.VIEWER: 0, Role.WORKER: 1, Role.ADMIN: 2}


class JobState(models.TextChoices):
    SLICING = "slicing"
    READY = "ready"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


# States in which a job hands out items.
ACTIVE_STATES = (JobState.READY, JobState.RUNNING)
FINAL_STATES = (JobState.DONE, JobState.CANCELLED, JobState.FAILED)


class JobAction(models.TextChoices):
    """What a person (or a restarted run) may do to a job; the API, the dashboard and the services read ACTIONS."""

    PAUSE = "pause", "Pause"
    RESUME = "resume", "Resume"
    CANCEL = "cancel", "Cancel"
    RETRY = "retry", "Retry failed items"
    RESTORE = "restore", "Restore a snapshot"


# The job's state machine: for each action, the states it is allowed from.
# Where an action leads is the services' business (resume returns to the
# state the job was paused in; retry and restore re-open a done job), but
# whether it is allowed is decided here and nowhere else. Slicing, done,
# running and failed are also reached without an action (server/services/jobs.py).
ACTIONS: dict[str, tuple[str, ...]] = {
    JobAction.PAUSE: (JobState.SLICING, JobState.READY, JobState.RUNNING),
    JobAction.RESUME: (JobState.PAUSED,),
    JobAction.CANCEL: (JobState.SLICING, JobState.READY, JobState.RUNNING, JobState.PAUSED),
    # Both need item rows to act on, and make no sense for a job that will
    # never hand anything out again.
    JobAction.RETRY: (JobState.READY, JobState.RUNNING, JobState.PAUSED, JobState.DONE),
    JobAction.RESTORE: (JobState.READY, JobState.RUNNING, JobState.PAUSED, JobState.DONE),
}


# Seconds a job may slice before its waiting takes say so (Job.slicing_stalled).
SLICING_PATIENCE = 60.0


class JobQuerySet(models.QuerySet):
    def with_warnings(self):
        """Each job with its warnings, oldest first, read in the same query (see ``Job.warnings``)."""
        return self.annotate(warning_messages=ArraySubquery(_warnings_of(OuterRef("pk")).values("message")))


class Job(models.Model):
    # ``queue.run`` when the job serves a run, else the queue's name: unique.
    name = models.CharField(max_length=200, unique=True)
    queue = models.CharField(max_length=200, help_text="The WorkQueue's name: the dashboard groups its runs.")
    run = models.CharField(
        max_length=100, blank=True, default="", help_text="The training run this job serves (SHARDLINE_RUN), if any."
    )
    # The identity of the job besides its name: works (by digest), epochs,
    # shuffle, requested seed, prefix, slices. Two creates with the same name
    # and spec are the same job.
    spec = models.JSONField()
    spec_digest = models.CharField(max_length=64)
    works_count = models.PositiveIntegerField()
    num_epochs = models.PositiveIntegerField()
    shuffle = models.BooleanField()
    seed = models.BigIntegerField(help_text="The seed in use: the requested one, or one drawn at creation.")
    prefix = models.TextField(null=True, blank=True)
    num_slices = models.PositiveIntegerField(null=True, blank=True)
    lease_timeout = models.FloatField(help_text="Seconds a lease lives without a heartbeat.")
    max_attempts = models.PositiveIntegerField()
    # Whether the unread records of leased record ranges may be split off to
    # idle workers at the end of the queue (services/splits.py).
    split_tail = models.BooleanField(default=True)
    # Pieces split off: each is a new item of its epoch, at position
    # units_count + (the piece's number).
    splits = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.READY)
    # The state a paused job resumes to.
    resume_state = models.CharField(max_length=16, choices=JobState.choices, blank=True, default="")
    error = models.TextField(blank=True, default="")
    # While slicing: {"works_total", "works_inspected", "records_counted"}.
    slicing_progress = models.JSONField(default=dict, blank=True)
    # The tables among the works, as slicing pinned them: [{"work", "kind",
    # "version" (a Postgres snapshot, a Delta version, an Iceberg snapshot
    # id), "rows", "files"}]. Every run of the job reads these versions.
    tables = models.JSONField(default=list, blank=True)
    # Items per epoch (works, or slices once slicing is done).
    units_count = models.PositiveIntegerField(default=0)
    # Epochs [0, epochs_materialised) have item rows; later ones are created
    # when the earlier ones run out of pending items.
    epochs_materialised = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        db_table = "shardline_job"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "-created_at"], name="job_state_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"

    def allows(self, action: str) -> bool:
        return self.state in ACTIONS[action]

    @property
    def actions(self) -> list[str]:
        """The actions allowed in the job's current state, in ACTIONS order."""
        return [action for action in ACTIONS if self.allows(action)]

    @property
    def warnings(self) -> list[str]:
        """What the job's owner should know (works handed out whole...), oldest first.

        A list of jobs reads them in its own query (``JobQuerySet.with_warnings``)
        instead of one more query per job.
        """
        if "warning_messages" in self.__dict__:
            return list(self.warning_messages)
        return list(_warnings_of(self.pk).values_list("message", flat=True))

    def slicing_stalled(self, now) -> str | None:
        """Why takes have waited long for slicing, once the job has been slicing for SLICING_PATIENCE; else None."""
        slicing = self.state == JobState.SLICING or (
            self.state == JobState.PAUSED and self.resume_state == JobState.SLICING
        )
        waited = (now - self.created_at).total_seconds()
        if not slicing or waited < SLICING_PATIENCE:
            return None
        progress = self.slicing_progress or {}
        return (
            f"job {self.name!r} has been slicing for {int(waited)} s ({progress.get('works_inspected', 0)} of "
            f"{progress.get('works_total', self.works_count)} works inspected, {progress.get('records_counted', 0)} "
            f"records counted); a Celery worker slices it: if this does not move, check that one is running and "
            f"reads the server's queue (manage.py serve starts one)"
        )


class Unit(models.Model):
    """One entry of a job's per-epoch list: a work, or a slice of one."""

    pk = models.CompositePrimaryKey("job", "idx")
    # No database-level constraint (db_constraint=False) here nor on Item.job:
    # a job of a million works inserts a million units and a million items in
    # one transaction, and Django's deferred foreign keys would check each
    # row at commit (about ten seconds). Rows are only ever inserted by the
    # services, for a job they have just created or locked.
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )  # the primary key covers it
    idx = models.PositiveIntegerField()
    item = models.TextField()
    # For a slice: the byte offset of its first record, so that a reader
    # seeks straight to it (handed out with every lease of the slice).
    offset = models.BigIntegerField(null=True, blank=True)
    # For a slice: its record range [start, end); null for a work read whole.
    start = models.BigIntegerField(null=True, blank=True)
    end = models.BigIntegerField(null=True, blank=True)
    # For a slice of a table, what its reader needs beyond the item: a
    # Postgres slice's key range, {"key": columns, "from": the key of its
    # first row, "to": the next slice's (null for the last), "first": its
    # first record} (values as text: a reader scans that key range of the
    # index); a partitioned Delta table's file's partition values,
    # {"columns": {name: value}} (Delta keeps them in its log, not the file).
    source = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "shardline_unit"


class ItemState(models.TextChoices):
    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"


class Item(models.Model):
    """One unit in one epoch; its row is also its current lease."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )  # see Unit.job; item_job_epoch_position covers it
    epoch = models.PositiveIntegerField()
    position = models.PositiveIntegerField()
    unit_idx = models.PositiveIntegerField()
    state = models.CharField(max_length=8, choices=ItemState.choices, default=ItemState.PENDING)
    # Fencing token of the current (or last) lease: 63 random bits drawn on
    # every lease (shardline_fencing_token, server/sql/schema.sql), so a holder
    # whose lease was taken back can never complete, fail or extend it, and
    # nobody can guess the token of a lease they were not given.
    token = models.BigIntegerField(null=True, blank=True)
    # The user whose token took the current (or last) lease: only that user
    # may complete, fail, extend, release or split it (null: the server's
    # own services). No constraint: it is written on every lease.
    holder = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    worker = models.TextField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    leased_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True, help_text="Seconds from lease to completion.")
    records = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # Job-wide completion order (a global sequence, so monotonic per job).
    seq = models.BigIntegerField(null=True, blank=True)
    # The liquid tail (services/splits.py). An item's record range is its
    # unit's unless a split changed it: a cut lease keeps [range_start,
    # range_end), its remainder is a new item with the rest, whose parent is
    # the cut one. While leased: the next record the holder will read
    # (read_to, reported with heartbeats, at read_at) and a split asked of it
    # (split_at, for the worker split_for, at split_asked_at, its remainder
    # to be cut into split_pieces items). All of these but the range are
    # cleared with every new lease.
    range_start = models.BigIntegerField(null=True, blank=True)
    range_end = models.BigIntegerField(null=True, blank=True)
    parent_id = models.BigIntegerField(null=True, blank=True)
    read_to = models.BigIntegerField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    split_at = models.BigIntegerField(null=True, blank=True)
    split_for = models.TextField(null=True, blank=True)
    split_asked_at = models.DateTimeField(null=True, blank=True)
    split_pieces = models.PositiveIntegerField(null=True, blank=True)
    # Leased ahead of its consumer, which has not started it (a take with
    # ``ahead``, until a later take of its holder names it ``started``):
    # while it is, a worker with nothing to read may ask for it back
    # (split_for, split_asked_at, no split_at; services/give_back.py), and
    # its holder gives it back unread. A default in the database too: the
    # statements that make items (a split's remainder, an epoch) leave it out.
    ahead = models.BooleanField(default=False, db_default=False)

    class Meta:
        db_table = "shardline_item"
        constraints = [
            models.UniqueConstraint(fields=["job", "epoch", "position"], name="item_job_epoch_position"),
            models.CheckConstraint(condition=Q(state__in=ItemState.values), name="item_state_valid"),
        ]
        indexes = [
            # take: the next pending items in (epoch, position) order.
            models.Index(fields=["job", "epoch", "position"], condition=Q(state="pending"), name="item_pending"),
            # take: expired leases to reclaim; also the earliest expiry for retry_after.
            models.Index(fields=["job", "expires_at"], condition=Q(state="leased"), name="item_leased_expiry"),
            # audit: completed items by time, per worker.
            models.Index(
                fields=["job", "completed_at"], condition=Q(completed_at__isnull=False), name="item_completed"
            ),
            models.Index(fields=["job", "worker"], condition=Q(worker__isnull=False), name="item_worker"),
            models.Index(fields=["job", "state"], condition=Q(state="failed"), name="item_failed"),
            # snapshots: the job's newest completion (max(seq), one index
            # probe); restore: the completions after a snapshot (a range scan).
            models.Index(fields=["job", "seq"], condition=Q(seq__isnull=False), name="item_completion_seq"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} epoch {self.epoch} #{self.position} ({self.state})"


class Counter(models.Model):
    """Per-epoch item counts, kept as deltas spread over a few shard rows.

    Every state change adds to the counter row of its epoch and of the shard of
    the connection that made it (the item trigger, server/sql/schema.sql); a watermark sums a handful of rows. Spreading
    over shards keeps concurrent takers from queueing on one hot row.
    """

    pk = models.CompositePrimaryKey("job", "epoch", "shard")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, db_index=False)
    epoch = models.PositiveIntegerField()
    # pg_backend_pid() of the connection: up to 4,194,304 on Linux hosts
    # whose pid_max is raised (the systemd default), so not a smallint.
    shard = models.PositiveIntegerField()
    pending = models.BigIntegerField(default=0)
    leased = models.BigIntegerField(default=0)
    done = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)

    class Meta:
        db_table = "shardline_counter"


class Throughput(models.Model):
    """Completions per minute, kept like Counter: one row per (job, minute, shard).

    Written by the item trigger (server/sql/schema.sql) whenever items become done,
    so the rate of a watermark and the job page's throughput chart read a
    few rows per minute instead of counting the completions themselves (a
    job completing 1,000 items a second would otherwise count 1.8 million
    rows for a 30-minute chart).
    """

    pk = models.CompositePrimaryKey("job", "minute", "shard")
    # No database-level constraint, as for Item.job: a row per completing
    # request and minute, and no FK check at each commit of the hot path.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    minute = models.DateTimeField()
    shard = models.PositiveIntegerField()
    done = models.BigIntegerField(default=0)

    class Meta:
        db_table = "shardline_throughput"


class ServiceNow(Func):
    """The service's time, ``shardline_now()`` of server/sql/schema.sql: what every lease time is written in."""

    function = "shardline_now"
    template = "%(function)s()"
    output_field = models.DateTimeField()


def _live() -> Func:
    """The liveness rule of server/sql/schema.sql (``shardline_worker_live``), which the statements share."""
    return Func(F("last_seen"), F("job__lease_timeout"), function="shardline_worker_live", output_field=BooleanField())


class WorkerQuerySet(models.QuerySet):
    def live(self):
        return self.filter(_live())

    def with_liveness(self):
        """Each worker with ``is_live``."""
        return self.annotate(is_live=_live())


class Worker(models.Model):
    """A name that leases items of a job: one process of a training run (host:pid:task by default).

    ``consumer`` is the process whose training loop uses what this worker
    reads: its own name, or for a DataLoader's loader processes the main
    process's. ``waiting_since`` is set while the worker waits at the end of
    the queue (its take found nothing, or its process is waiting on another
    queue): leases held by a consumer that waits are not worth waiting for,
    since that consumer may be waiting on us (see leases.take).
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="workers", db_index=False)
    name = models.CharField(max_length=255)
    consumer = models.CharField(max_length=255, blank=True, default="")
    waiting_since = models.DateTimeField(null=True, blank=True)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    items_done = models.BigIntegerField(default=0)
    items_failed = models.BigIntegerField(default=0)
    busy_seconds = models.FloatField(default=0.0, help_text="Sum of lease-to-completion times of its items.")

    objects = WorkerQuerySet.as_manager()

    class Meta:
        db_table = "shardline_worker"
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="worker_job_name")]
        # Whether anyone waits on a job: the item trigger's one probe before
        # it notifies completions (server/sql/schema.sql); empty while items are pending.
        indexes = [models.Index(fields=["job"], condition=Q(waiting_since__isnull=False), name="worker_waiting")]
        ordering = ["name"]

    @property
    def mean_item_seconds(self) -> float | None:
        return self.busy_seconds / self.items_done if self.items_done else None


class DataStall(models.Model):
    """One training loop's data stall on a job: seconds it waited for its next record or batch, and seconds it ran.

    ``worker`` is the loop's process: the consumer its workers lease for (a
    DataLoader's main process, whose loaders hold the leases). Written by
    heartbeats alone (server/sql/extend.sql). Each adds what its reporting
    clock (worker_sdk.stall, one per process) grew since that clock's last
    report, kept in ``clock*``: a repeated or late heartbeat adds nothing, a
    restarted process's new clock adds its whole reading. So ``waited`` and
    ``total`` (waited + busy) only grow: they are the Prometheus counters.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="data_stalls", db_index=False)
    worker = models.CharField(max_length=255)
    waited = models.FloatField(default=0.0, help_text="Seconds the loop waited for its next record or batch.")
    total = models.FloatField(default=0.0, help_text="Seconds the loop ran: its waits and its own work.")
    clock = models.CharField(max_length=32, help_text="The reporting process's clock.")
    clock_waited = models.FloatField(default=0.0)
    clock_busy = models.FloatField(default=0.0)
    first_reported = models.DateTimeField()
    reported_at = models.DateTimeField()

    class Meta:
        db_table = "shardline_data_stall"
        constraints = [models.UniqueConstraint(fields=["job", "worker"], name="data_stall_job_worker")]
        ordering = ["worker"]

    @property
    def fraction(self) -> float | None:
        """The share of its time the loop waited for data."""
        return self.waited / self.total if self.total > 0 else None


class TakeRequest(models.Model):
    """A take's answer kept under the key its client sent (``Idempotency-Key``), for the client's retries.

    A take whose answer was lost on the way (a timeout, a dropped connection)
    is sent again with the same key; the server answers it with the first
    answer instead of leasing more items, which the client would never know
    it holds. Rows live REQUEST_KEY_TTL (server/services/leases.py).

    take.sql writes the row with the leases it made; a take answered by that
    one statement (``whole``) is answered again from them. One that ran more
    statements (an epoch boundary, nothing to lease) stores its ``answer``.
    """

    # Keys are the caller's: another user sending the same key is another request.
    pk = models.CompositePrimaryKey("job", "holder", "key")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, db_constraint=False)  # see Unit.job
    # The user who sent it (0: the server's own services, for which a key is never null in the key).
    holder = models.BigIntegerField()
    key = models.CharField(max_length=64)
    worker = models.CharField(max_length=255)
    leases = ArrayField(models.BigIntegerField(), default=list)
    tokens = ArrayField(models.BigIntegerField(), default=list)
    whole = models.BooleanField(default=False)
    # Null unless the take ran more than one statement, until it was answered.
    answer = models.JSONField(null=True)
    created_at = models.DateTimeField()
    # The database session (backend pid) that answers it: while its answer is
    # not stored, a repeat waits only as long as that session lives.
    backend = models.IntegerField(null=True, blank=True)

    class Meta:
        db_table = "shardline_take_request"
        indexes = [models.Index(fields=["job", "worker", "created_at"], name="take_request_worker_age")]


class EventKind(models.TextChoices):
    CREATED = "created"
    STATE = "state"
    FAILED = "failed"
    RETRIED = "retried"
    EXPIRED = "expired"
    LOST = "lost"
    EPOCH = "epoch"
    RESTORED = "restored"
    SPLIT = "split"  # a lease was cut (on the cut item)
    REMAINDER = "remainder"  # the cut's unread records became this item
    RELEASED = "released"  # given back unread, no attempt used (a synchronous rank's epoch stopped)
    RESUMED = "resumed"  # a restarted worker of the same name took its lease back (new token)
    WARNING = "warning"  # something the job's owner should know (works handed out whole, not sliced)


class Event(models.Model):
    """The audit trail beyond the item rows: state changes and lease troubles."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events", db_index=False)
    # No database constraint: events are an append-only log, written on the hot
    # path by take.sql; an index on (job, kind, at) serves every read.
    item = models.ForeignKey(
        Item, null=True, blank=True, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False
    )
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    worker = models.TextField(blank=True, default="")
    message = models.TextField(blank=True, default="")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "shardline_event"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["job", "kind", "-at"], name="event_job_kind_at")]


def _warnings_of(job):
    """The warning events of ``job`` (an id, or an OuterRef to one), oldest first."""
    return Event.objects.filter(job_id=job, kind=EventKind.WARNING).order_by("at", "id")


class Snapshot(models.Model):
    """A job's position at a moment: its newest completion's sequence number.

    Taking one copies nothing: restoring it re-opens every item completed
    after ``seq`` (see server/sql/restore.sql).
    """

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="snapshots", db_index=False)
    # The newest completion of the job when the snapshot was taken (0: none yet).
    seq = models.BigIntegerField()
    epochs_materialised = models.PositiveIntegerField()
    worker = models.TextField(blank=True, default="", help_text="Who asked for it (the SDK's worker name).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "shardline_snapshot"
        ordering = ["-id"]
        indexes = [models.Index(fields=["job", "-id"], name="snapshot_job_id")]

    def __str__(self) -> str:
        return f"snapshot {self.id} of job {self.job_id} at seq {self.seq}"


class SnapshotRestore(models.Model):
    """One restore of a snapshot that changed something (repeats that were no-ops add no row)."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="restores", db_index=False)
    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="restores", db_index=False)
    # The job's newest completion right after the restore: a later restore of
    # the same snapshot that finds it unchanged knows nothing was completed since.
    seq_after = models.BigIntegerField()
    # Optional caller-chosen name of the restarted run: repeats with the same
    # generation are no-ops even after new completions.
    generation = models.CharField(max_length=200, blank=True, default="")
    reopened = models.BigIntegerField(help_text="Completed items put back to pending.")
    fenced = models.BigIntegerField(help_text="Live leases taken back.")
    worker = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "shardline_snapshot_restore"
        ordering = ["-id"]
        indexes = [models.Index(fields=["job", "-id"], name="restore_job_id")]


class ItemHistory(models.Model):
    """A completion (or lease) of an item that a restore rolled back, kept for the audit."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, db_index=False)
    item = models.ForeignKey(Item, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False)
    restore = models.ForeignKey(SnapshotRestore, on_delete=models.CASCADE, db_index=False)
    # 'done' (a completion rolled back) or 'leased' (a live lease fenced).
    state = models.CharField(max_length=8)
    epoch = models.PositiveIntegerField()
    position = models.PositiveIntegerField()
    worker = models.TextField(null=True, blank=True)
    token = models.BigIntegerField(null=True, blank=True)
    attempts = models.PositiveIntegerField()
    leased_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True)
    records = models.BigIntegerField(null=True, blank=True)
    seq = models.BigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "shardline_item_history"
        ordering = ["id"]
        indexes = [models.Index(fields=["item", "id"], name="item_history_item")]


class ApiToken(models.Model):
    """An API key. Only its SHA-256 is stored; the key is shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    role = models.CharField(max_length=8, choices=Role.choices)
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=12, help_text="The first characters of the key, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True)
    # Job name patterns (server/callers.py) the token is limited to; empty: every job.
    jobs = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "shardline_api_token"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.role}, {self.user})"
