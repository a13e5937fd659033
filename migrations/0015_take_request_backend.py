"""A take's request record names the database session answering it: a repeat can tell that the session is gone."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0014_split_pieces"),
    ]

    operations = [
        migrations.AddField(
            model_name="takerequest",
            name="backend",
            field=models.IntegerField(blank=True, null=True),
        ),
    ]
