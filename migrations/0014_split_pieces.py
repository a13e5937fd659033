"""A split asked of a lease says into how many pieces its remainder is cut (services/splits.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0013_notify_waiting_takes"),
    ]

    operations = [
        migrations.AddField(
            model_name="item",
            name="split_pieces",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
