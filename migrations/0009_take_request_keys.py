"""Takes keep their answer under the client's Idempotency-Key, for its retries."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0008_worker_consumer_and_waiting"),
    ]

    operations = [
        migrations.CreateModel(
            name="TakeRequest",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "job", "key", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("key", models.CharField(max_length=64)),
                ("worker", models.CharField(max_length=255)),
                ("answer", models.JSONField(null=True)),
                ("created_at", models.DateTimeField()),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to="shardline.job"
                    ),
                ),
            ],
            options={
                "db_table": "shardline_take_request",
                "indexes": [models.Index(fields=["job", "worker", "created_at"], name="take_request_worker_age")],
            },
        ),
    ]
