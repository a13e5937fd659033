"""Each training loop's data stall on a job, as its heartbeats report it (server/sql/extend.sql writes it).

A table of its own rather than columns of the worker: the loop is the
consumer its workers lease for, and a DataLoader's main process, whose
loaders hold the leases, has no worker row.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0023_job_queue_and_run"),
    ]

    operations = [
        migrations.CreateModel(
            name="DataStall",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("worker", models.CharField(max_length=255)),
                (
                    "waited",
                    models.FloatField(default=0.0, help_text="Seconds the loop waited for its next record or batch."),
                ),
                (
                    "total",
                    models.FloatField(default=0.0, help_text="Seconds the loop ran: its waits and its own work."),
                ),
                ("clock", models.CharField(help_text="The reporting process's clock.", max_length=32)),
                ("clock_waited", models.FloatField(default=0.0)),
                ("clock_busy", models.FloatField(default=0.0)),
                ("first_reported", models.DateTimeField()),
                ("reported_at", models.DateTimeField()),
                (
                    "job",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="data_stalls",
                        to="shardline.job",
                    ),
                ),
            ],
            options={
                "db_table": "shardline_data_stall",
                "ordering": ["worker"],
                "constraints": [models.UniqueConstraint(fields=("job", "worker"), name="data_stall_job_worker")],
            },
        ),
    ]
