"""Per-epoch item counts and completions per minute, kept by the item trigger (server/sql/schema.sql)."""

from __future__ import annotations

from django.db import models

from .jobs import Job


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
