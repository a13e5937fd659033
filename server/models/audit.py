"""The audit trail beyond the item rows: state changes, lease troubles, warnings to the job's owner."""

from __future__ import annotations

from django.db import models


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
    job = models.ForeignKey("Job", on_delete=models.CASCADE, related_name="events", db_index=False)
    # No database constraint: events are an append-only log, written on the hot
    # path by take.sql; an index on (job, kind, at) serves every read.
    item = models.ForeignKey(
        "Item",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_index=False,
        db_constraint=False,
    )
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    worker = models.TextField(blank=True, default="")
    message = models.TextField(blank=True, default="")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "shardline_event"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["job", "kind", "-at"], name="event_job_kind_at")]


def warnings_of(job):
    """The warning events of ``job`` (an id, or an OuterRef to one), oldest first."""
    return Event.objects.filter(job_id=job, kind=EventKind.WARNING).order_by("at", "id")
