"""The processes that lease a job's items: their liveness, data stall, and takes kept for retries."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import BooleanField, F, Func, Q

from .jobs import Job


def _live() -> Func:
    """The liveness rule of server/sql/schema.sql (``shardline_worker_live``), which the statements share."""
    return Func(
        F("last_seen"),
        F("job__lease_timeout"),
        function="shardline_worker_live",
        output_field=BooleanField(),
    )


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
    # Since its first take in a row that the straggler rule deferred (take.sql):
    # a deferral lasts no longer than the worker's own next item would.
    deferred_since = models.DateTimeField(null=True, blank=True)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    items_done = models.BigIntegerField(default=0)
    # The records of the items it finished (a work read whole counts one;
    # shardline_item_weight): the straggler rule's paces are per record.
    records_done = models.BigIntegerField(default=0, db_default=0)
    items_failed = models.BigIntegerField(default=0)
    busy_seconds = models.FloatField(default=0.0, help_text="Sum of lease-to-completion times of its items.")

    objects = WorkerQuerySet.as_manager()

    class Meta:
        db_table = "shardline_worker"
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="worker_job_name")]
        # Whether anyone waits on a job: the item trigger's one probe before
        # it notifies completions (server/sql/schema.sql); empty while items are pending.
        indexes = [
            models.Index(
                fields=["job"],
                condition=Q(waiting_since__isnull=False),
                name="worker_waiting",
            )
        ]
        ordering = ["name"]

    @property
    def mean_item_seconds(self) -> float | None:
        return self.busy_seconds / self.items_done if self.items_done else None

    @property
    def record_seconds(self) -> float | None:
        """Its pace: seconds per record of what it finished (the straggler rule's, server/sql/take.sql)."""
        return self.busy_seconds / self.records_done if self.records_done else None


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
