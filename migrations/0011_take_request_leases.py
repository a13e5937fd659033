"""A take's record holds the leases its statement made, so most repeats need no stored answer."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0010_item_moves_counted_by_trigger"),
    ]

    operations = [
        migrations.AddField(
            model_name="takerequest",
            name="leases",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(), default=list, size=None
            ),
        ),
        migrations.AddField(
            model_name="takerequest",
            name="tokens",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(), default=list, size=None
            ),
        ),
        migrations.AddField(
            model_name="takerequest",
            name="whole",
            field=models.BooleanField(default=False),
        ),
    ]
