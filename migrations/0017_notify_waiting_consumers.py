"""A consumer that starts or stops waiting may end the waits of other takes: the database says so.

A take that leased nothing counts as worth waiting for only the leases of
consumers that are not waiting themselves (server/sql/at_end.sql): when a
consumer that holds live leases starts waiting (one of its workers found
nothing) or stops, another worker's waiting take may have reached its end,
or may have something to wait for again. Nothing else announces that, and a
waiting take that is not woken runs again only when its wait ends (or, parked,
not at all: server/parking.py), so two DataLoaders whose loaders each wait on
the other's consumer waited on each other until a lease expired. The row
trigger below notifies ``<job>:waiting:<consumer>``; it fires only when the
mark flips, and notifies only for a consumer that holds live leases of the job
(a worker waiting with nothing in hand changes nobody's count).
"""

from django.db import migrations

INSTALL = """
CREATE FUNCTION shardline_worker_waiting_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM shardline_item AS i
                 JOIN shardline_worker AS w ON w.job_id = i.job_id AND w.name = i.worker
                WHERE i.job_id = NEW.job_id AND i.state = 'leased' AND w.consumer = NEW.consumer) THEN
        PERFORM pg_notify('shardline_job', NEW.job_id || ':waiting:' || coalesce(NEW.consumer, ''));
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER shardline_worker_waiting AFTER UPDATE OF waiting_since ON shardline_worker
    FOR EACH ROW WHEN ((OLD.waiting_since IS NULL) <> (NEW.waiting_since IS NULL))
    EXECUTE FUNCTION shardline_worker_waiting_changed();
"""

UNINSTALL = """
DROP TRIGGER IF EXISTS shardline_worker_waiting ON shardline_worker;
DROP FUNCTION IF EXISTS shardline_worker_waiting_changed();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0016_tables"),
    ]

    operations = [migrations.RunSQL(INSTALL, UNINSTALL)]
