"""Leases taken ahead of their consumer (worker_sdk.look_ahead): the item's ``ahead`` mark.

A consumer leases its next item while it reads the current one, so its
training loop never waits on a take. Until it starts that item, a worker
with nothing to read may ask for it back (services/give_back.py).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0025_service_now"),
    ]

    operations = [
        migrations.AddField(
            model_name="item",
            name="ahead",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
