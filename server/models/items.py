"""A job's units (its per-epoch list) and items (a unit in one epoch, and its current lease)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Func, Q

from .jobs import Job


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
            models.Index(
                fields=["job", "epoch", "position"],
                condition=Q(state="pending"),
                name="item_pending",
            ),
            # take: expired leases to reclaim; also the earliest expiry for retry_after.
            models.Index(
                fields=["job", "expires_at"],
                condition=Q(state="leased"),
                name="item_leased_expiry",
            ),
            # audit: completed items by time, per worker.
            models.Index(
                fields=["job", "completed_at"],
                condition=Q(completed_at__isnull=False),
                name="item_completed",
            ),
            models.Index(
                fields=["job", "worker"],
                condition=Q(worker__isnull=False),
                name="item_worker",
            ),
            models.Index(fields=["job", "state"], condition=Q(state="failed"), name="item_failed"),
            # snapshots: the job's newest completion (max(seq), one index
            # probe); restore: the completions after a snapshot (a range scan).
            models.Index(
                fields=["job", "seq"],
                condition=Q(seq__isnull=False),
                name="item_completion_seq",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} epoch {self.epoch} #{self.position} ({self.state})"


class ServiceNow(Func):
    """The service's time, ``shardline_now()`` of server/sql/schema.sql: what every lease time is written in."""

    function = "shardline_now"
    template = "%(function)s()"
    output_field = models.DateTimeField()
