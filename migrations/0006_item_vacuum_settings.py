"""Autovacuum settings for the item table, so dead rows do not slow the take.

Every lease and every completion writes a new version of an item row. A
lease also leaves behind the row's entry in the partial index item_pending,
which take reads in (epoch, position) order from its start: until vacuum
removes them, the entries of every item already leased are walked past on
each take (about 13 ms per take after 900,000 leases of one job, against
0.1 ms when clean; bench/RESULTS.md). Postgres's defaults vacuum a table once
20% of it is dead (200,000 rows of a million-item table, far more for a table
holding many jobs) and then pace the vacuum slowly. So, for this table only:

  * vacuum once 10,000 rows plus 2% of the table are dead;
  * a cost limit ten times the default, so the vacuum finishes in seconds;
  * index cleanup always on: by default a vacuum may skip the indexes when
    few heap pages hold dead rows, which is exactly the case of one job's
    leased items in a large table, and would leave item_pending as it was.

The server-wide autovacuum_naptime (how often autovacuum looks, 1 minute by
default) still bounds how much accumulates between passes; README
"Operating" recommends 10 s, and the embedded Postgres uses it.
"""

from django.db import migrations

SETTINGS = (
    "autovacuum_vacuum_threshold = 10000",
    "autovacuum_vacuum_scale_factor = 0.02",
    "autovacuum_vacuum_cost_limit = 2000",
    "vacuum_index_cleanup = on",
)


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0005_bulk_tables_without_fk_checks"),
    ]

    operations = [
        migrations.RunSQL(
            f"ALTER TABLE shardline_item SET ({', '.join(SETTINGS)})",
            "ALTER TABLE shardline_item RESET (" + ", ".join(setting.split(" = ")[0] for setting in SETTINGS) + ")",
        ),
    ]
