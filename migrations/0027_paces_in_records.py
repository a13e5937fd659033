"""The straggler rule's paces per record: ``shardline_worker.records_done``.

take.sql judged workers by seconds per item. Once a range is split its
pieces differ in size: a slow worker that finished a 3-record piece in
0.6 s looked faster than one that read a 150-record slice in 5 s, and the
fast ones were told to wait (bench/RESULTS.md). A worker now counts the
records of the items it finished (``shardline_item_weight``: a record
range's size, one for a work read whole), kept by the item trigger, and
take.sql compares records. Workers of running jobs get what their finished
items weigh.

``deferred_since``: since when a worker's takes are deferred. A deferral
ends once it has lasted as long as the worker's own next item would take:
plain DataLoaders whose loaders were each deferred to the others' (which
read nothing while their loops waited on a deferred sibling) held a job
for good.

The text below is this migration's copy of those definitions; schema.sql
holds the present, and a test holds the migrated database to it.
"""

from django.db import migrations, models

RULES = r"""
CREATE OR REPLACE FUNCTION shardline_item_weight(range_start bigint, range_end bigint, unit_start bigint,
                                                 unit_end bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- greatest() skips a null: a whole work, and an empty range, weigh one.
    SELECT greatest(coalesce(range_end, unit_end) - coalesce(range_start, unit_start), 1)
$$;

CREATE OR REPLACE FUNCTION shardline_item_moved() RETURNS trigger LANGUAGE plpgsql AS $$
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
        PERFORM pg_notify('shardline_job', job_id || ':pending:' || count(*))
           FROM new_items
          WHERE state = 'pending'
          GROUP BY job_id;
        RETURN NULL;
    END IF;
    -- Most UPDATEs that move nothing are heartbeats: skip the writes' planning
    -- and execution for them.
    IF NOT EXISTS (SELECT FROM old_items AS o JOIN new_items AS n ON n.id = o.id WHERE n.state <> o.state) THEN
        RETURN NULL;
    END IF;
    WITH moved AS (
        SELECT n.job_id, n.epoch, o.state AS was, n.state AS became, n.worker, n.duration,
               n.unit_idx, n.range_start, n.range_end
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
        SELECT job_id, date_trunc('minute', shardline_now()), pg_backend_pid(), count(*)
          FROM moved
         WHERE became = 'done'
         GROUP BY job_id
        ON CONFLICT (job_id, minute, shard) DO UPDATE
           SET done = t.done + EXCLUDED.done
    )
    UPDATE shardline_worker AS w
       SET items_done = w.items_done + d.n,
           records_done = w.records_done + d.records,
           busy_seconds = w.busy_seconds + d.seconds,
           last_seen = shardline_now()
      FROM (SELECT m.job_id, m.worker, count(*) AS n, sum(duration) AS seconds,
                   sum(shardline_item_weight(m.range_start, m.range_end, u.start, u."end")) AS records
              FROM moved AS m
              -- An unsplit item's range is its unit's: one key probe per item finished.
              LEFT JOIN shardline_unit AS u ON m.range_start IS NULL AND u.job_id = m.job_id AND u.idx = m.unit_idx
             WHERE m.became = 'done'
             GROUP BY m.job_id, m.worker) AS d
     WHERE w.job_id = d.job_id AND w.name = d.worker;
    -- Wake the takes waiting on these jobs (server/waiting.py): items that
    -- became pending can be leased; items finished while a worker of the
    -- job waits may end its wait. (Finished items notify nobody while no
    -- worker waits, the whole time items are pending: a notification
    -- serialises the commits of the transactions that send one, and the
    -- probe is one look at the partial index worker_waiting.)
    PERFORM pg_notify('shardline_job', c.job_id || ':' || c.kind || ':' || c.n)
       FROM (SELECT n.job_id, CASE WHEN n.state = 'pending' THEN 'pending' ELSE 'done' END AS kind, count(*) AS n
               FROM old_items AS o
               JOIN new_items AS n ON n.id = o.id
              WHERE n.state <> o.state AND n.state IN ('pending', 'done', 'failed')
              GROUP BY 1, 2) AS c
      WHERE c.kind = 'pending'
         OR EXISTS (SELECT FROM shardline_worker AS w WHERE w.job_id = c.job_id AND w.waiting_since IS NOT NULL);
    RETURN NULL;
END
$$;

UPDATE shardline_worker AS w
   SET records_done = d.records
  FROM (SELECT i.job_id, i.worker, sum(shardline_item_weight(i.range_start, i.range_end, u.start, u."end")) AS records
          FROM shardline_item AS i
          LEFT JOIN shardline_unit AS u ON i.range_start IS NULL AND u.job_id = i.job_id AND u.idx = i.unit_idx
         WHERE i.state = 'done'
         GROUP BY i.job_id, i.worker) AS d
 WHERE w.job_id = d.job_id AND w.name = d.worker;
"""

BEFORE = r"""
CREATE OR REPLACE FUNCTION shardline_item_moved() RETURNS trigger LANGUAGE plpgsql AS $$
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
        PERFORM pg_notify('shardline_job', job_id || ':pending:' || count(*))
           FROM new_items
          WHERE state = 'pending'
          GROUP BY job_id;
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
        SELECT job_id, date_trunc('minute', shardline_now()), pg_backend_pid(), count(*)
          FROM moved
         WHERE became = 'done'
         GROUP BY job_id
        ON CONFLICT (job_id, minute, shard) DO UPDATE
           SET done = t.done + EXCLUDED.done
    )
    UPDATE shardline_worker AS w
       SET items_done = w.items_done + d.n,
           busy_seconds = w.busy_seconds + d.seconds,
           last_seen = shardline_now()
      FROM (SELECT job_id, worker, count(*) AS n, sum(duration) AS seconds
              FROM moved
             WHERE became = 'done'
             GROUP BY job_id, worker) AS d
     WHERE w.job_id = d.job_id AND w.name = d.worker;
    -- Wake the takes waiting on these jobs (server/waiting.py): items that
    -- became pending can be leased; items finished while a worker of the
    -- job waits may end its wait. (Finished items notify nobody while no
    -- worker waits, the whole time items are pending: a notification
    -- serialises the commits of the transactions that send one, and the
    -- probe is one look at the partial index worker_waiting.)
    PERFORM pg_notify('shardline_job', c.job_id || ':' || c.kind || ':' || c.n)
       FROM (SELECT n.job_id, CASE WHEN n.state = 'pending' THEN 'pending' ELSE 'done' END AS kind, count(*) AS n
               FROM old_items AS o
               JOIN new_items AS n ON n.id = o.id
              WHERE n.state <> o.state AND n.state IN ('pending', 'done', 'failed')
              GROUP BY 1, 2) AS c
      WHERE c.kind = 'pending'
         OR EXISTS (SELECT FROM shardline_worker AS w WHERE w.job_id = c.job_id AND w.waiting_since IS NOT NULL);
    RETURN NULL;
END
$$;

DROP FUNCTION IF EXISTS shardline_item_weight(bigint, bigint, bigint, bigint);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0026_look_ahead"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="records_done",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="worker",
            name="deferred_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(RULES, BEFORE),
    ]
