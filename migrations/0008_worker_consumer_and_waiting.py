"""Workers record the consumer they read for and whether they wait at the end of the queue."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0007_throughput_buckets"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="consumer",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddField(
            model_name="worker",
            name="waiting_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
