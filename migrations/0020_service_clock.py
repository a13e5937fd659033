"""The service's clock (issue 25): when the web service last reached the database, so that an outage costs no lease.

One row, touched by every web process about once a second and before the
requests that could take leases back (server/clock.py, server/sql/service_clock.sql).
A silence in it is a time when the database or every web process was down;
the first request after it gives the leases that were live the time the
silence took from them.

A table of its own rather than a model: nothing but that statement reads or
writes it, and Django's flush (tests) leaves it and its one row in place.
"""

from django.db import migrations

INSTALL = """
CREATE TABLE shardline_service_clock (
    id smallint PRIMARY KEY CHECK (id = 1),
    touched_at timestamptz NOT NULL
);
INSERT INTO shardline_service_clock (id, touched_at) VALUES (1, now());
"""

UNINSTALL = "DROP TABLE IF EXISTS shardline_service_clock;"


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0019_lease_holders"),
    ]

    operations = [migrations.RunSQL(INSTALL, UNINSTALL)]
