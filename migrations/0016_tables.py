"""Tables as works: a slice's key source on its unit, the tables a job reads (pinned versions) on the job.

A Postgres table's slice is ``postgresql://...?table=...&as_of=...&start=S&end=E``:
the piece's range follows ``&``, not ``?``, so the item-name function keeps
the separator it finds (worker_sdk.formats.slice_item's spelling).
"""

from django.db import migrations, models

ITEM_NAME = r"""
CREATE OR REPLACE FUNCTION shardline_item_name(unit_item text, first bigint, stop bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN first IS NULL THEN unit_item
                ELSE regexp_replace(unit_item, '([?&])start=[0-9]+&end=[0-9]+((#format=[a-z]+)?)$',
                                    '\1start=' || first || '&end=' || stop || '\2')
           END
$$;
"""

OLD_ITEM_NAME = r"""
CREATE OR REPLACE FUNCTION shardline_item_name(unit_item text, first bigint, stop bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN first IS NULL THEN unit_item
                ELSE regexp_replace(unit_item, '\?start=[0-9]+&end=[0-9]+((#format=[a-z]+)?)$',
                                    '?start=' || first || '&end=' || stop || '\1')
           END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0015_take_request_backend"),
    ]

    operations = [
        migrations.AddField(
            model_name="unit",
            name="source",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="tables",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunSQL(ITEM_NAME, OLD_ITEM_NAME),
    ]
