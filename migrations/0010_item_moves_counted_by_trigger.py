"""Item state changes are counted by one statement-level trigger, not by each statement.

Every statement that moves items between states (take, complete, fail,
restore, retry_failed, materialise_epoch) used to write the same side effects
itself: the per-epoch counter deltas, the completions per minute and the
completing worker's credit. The trigger writes them once per statement from
its transition tables (the rows before and after), so a statement only says
what it does to items and the watermarks cannot drift from the items whatever
writes them.

- Counters: for each (job, epoch), +1 for the state an item moved to and -1
  for the one it left, in the row of this backend (pg_backend_pid), as the
  statements did: concurrent takers never share a counter row.
- Throughput: items that became done, per minute, sharded the same way.
- Worker credit: items that became done count for the worker that held them
  (items_done, busy_seconds from their duration, last_seen).
Postgres allows no column list (UPDATE OF state) on a trigger with
transition tables, so it runs for every UPDATE of the table; one that changes
no state (a heartbeat) returns after one join of its rows and writes nothing.
Items are only inserted as pending, by materialise_epoch, and deleted only
with their job, whose counters go with it.
"""

from django.db import migrations

INSTALL = """
CREATE FUNCTION shardline_item_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO shardline_counter AS c (job_id, epoch, shard, pending, leased, done, failed)
        SELECT job_id, epoch, pg_backend_pid(),
               count(*) FILTER (WHERE state = 'pending'),
               count(*) FILTER (WHERE state = 'leased'),
               count(*) FILTER (WHERE state = 'done'),
               count(*) FILTER (WHERE state = 'failed')
          FROM new_items
         GROUP BY job_id, epoch
        ON CONFLICT (job_id, epoch, shard) DO UPDATE
           SET pending = c.pending + EXCLUDED.pending,
               leased = c.leased + EXCLUDED.leased,
               done = c.done + EXCLUDED.done,
               failed = c.failed + EXCLUDED.failed;
        RETURN NULL;
    END IF;
    -- Most UPDATEs that move nothing are heartbeats: skip the writes' planning
    -- and execution for them.
    IF NOT EXISTS (SELECT FROM old_items AS o JOIN new_items AS n ON n.id = o.id WHERE n.state <> o.state) THEN
        RETURN NULL;
    END IF;
    WITH moved AS (
        SELECT n.job_id, n.epoch, o.state AS was, n.state AS became, n.worker, n.duration
          FROM old_items AS o
          JOIN new_items AS n ON n.id = o.id
         WHERE n.state <> o.state
    ), counted AS (
        INSERT INTO shardline_counter AS c (job_id, epoch, shard, pending, leased, done, failed)
        SELECT job_id, epoch, pg_backend_pid(),
               count(*) FILTER (WHERE became = 'pending') - count(*) FILTER (WHERE was = 'pending'),
               count(*) FILTER (WHERE became = 'leased') - count(*) FILTER (WHERE was = 'leased'),
               count(*) FILTER (WHERE became = 'done') - count(*) FILTER (WHERE was = 'done'),
               count(*) FILTER (WHERE became = 'failed') - count(*) FILTER (WHERE was = 'failed')
          FROM moved
         GROUP BY job_id, epoch
        ON CONFLICT (job_id, epoch, shard) DO UPDATE
           SET pending = c.pending + EXCLUDED.pending,
               leased = c.leased + EXCLUDED.leased,
               done = c.done + EXCLUDED.done,
               failed = c.failed + EXCLUDED.failed
    ), rated AS (
        INSERT INTO shardline_throughput AS t (job_id, minute, shard, done)
        SELECT job_id, date_trunc('minute', now()), pg_backend_pid(), count(*)
          FROM moved
         WHERE became = 'done'
         GROUP BY job_id
        ON CONFLICT (job_id, minute, shard) DO UPDATE
           SET done = t.done + EXCLUDED.done
    )
    UPDATE shardline_worker AS w
       SET items_done = w.items_done + d.n,
           busy_seconds = w.busy_seconds + d.seconds,
           last_seen = now()
      FROM (SELECT job_id, worker, count(*) AS n, sum(duration) AS seconds
              FROM moved
             WHERE became = 'done'
             GROUP BY job_id, worker) AS d
     WHERE w.job_id = d.job_id AND w.name = d.worker;
    RETURN NULL;
END
$$;
CREATE TRIGGER shardline_item_inserted AFTER INSERT ON shardline_item
    REFERENCING NEW TABLE AS new_items
    FOR EACH STATEMENT EXECUTE FUNCTION shardline_item_moved();
CREATE TRIGGER shardline_item_updated AFTER UPDATE ON shardline_item
    REFERENCING OLD TABLE AS old_items NEW TABLE AS new_items
    FOR EACH STATEMENT EXECUTE FUNCTION shardline_item_moved();
"""

UNINSTALL = """
DROP TRIGGER IF EXISTS shardline_item_updated ON shardline_item;
DROP TRIGGER IF EXISTS shardline_item_inserted ON shardline_item;
DROP FUNCTION IF EXISTS shardline_item_moved();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0009_take_request_keys"),
    ]

    operations = [migrations.RunSQL(INSTALL, UNINSTALL)]
