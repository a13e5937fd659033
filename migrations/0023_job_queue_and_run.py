"""A job's queue and run as fields, not read back from its name.

Until now the dashboard split a job's name on its last ".": a job named
``ctr.v2`` showed as run ``v2`` of queue ``ctr`` though nobody said so. The
API now takes the run beside the name (the SDK sends SHARDLINE_RUN), and the
job keeps both. Jobs created before this read their names once, the way the
dashboard did, so that their pages group as they did.
"""

from django.db import migrations, models


def read_old_names(apps, schema_editor):
    Job = apps.get_model("shardline", "Job")
    for job in Job.objects.only("id", "name").iterator():
        queue, dot, run = job.name.rpartition(".")
        if not (dot and queue):
            queue, run = job.name, ""
        Job.objects.filter(id=job.id).update(queue=queue, run=run[:100])


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0022_rules_defined_once"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="queue",
            field=models.CharField(
                default="", help_text="The WorkQueue's name: the dashboard groups its runs.", max_length=200
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="job",
            name="run",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The training run this job serves (SHARDLINE_RUN), if any.",
                max_length=100,
            ),
        ),
        migrations.RunPython(read_old_names, migrations.RunPython.noop),
    ]
