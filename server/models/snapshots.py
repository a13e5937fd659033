"""Snapshots of a job's position, the restores of them, and what each restore rolled back."""

from __future__ import annotations

from django.db import models

from .items import Item
from .jobs import Job


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
