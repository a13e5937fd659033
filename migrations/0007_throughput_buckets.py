"""Counter shards hold any backend pid; completions per minute get their own rows.

The new table starts with the last 30 minutes of completions (shard 0, which
no backend has), so the job page's throughput chart and the watermark rate
stay continuous across the upgrade.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0006_item_vacuum_settings"),
    ]

    operations = [
        migrations.AlterField(
            model_name="counter",
            name="shard",
            field=models.PositiveIntegerField(),
        ),
        migrations.CreateModel(
            name="Throughput",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "job", "minute", "shard", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("minute", models.DateTimeField()),
                ("shard", models.PositiveIntegerField()),
                ("done", models.BigIntegerField(default=0)),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="shardline.job",
                    ),
                ),
            ],
            options={
                "db_table": "shardline_throughput",
            },
        ),
        migrations.RunSQL(
            """
            INSERT INTO shardline_throughput (job_id, minute, shard, done)
            SELECT job_id, date_trunc('minute', completed_at), 0, count(*)
              FROM shardline_item
             WHERE completed_at > now() - interval '30 minutes' AND state = 'done'
             GROUP BY 1, 2
            """,
            migrations.RunSQL.noop,
        ),
    ]
