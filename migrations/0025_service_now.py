"""The service's time, one function: ``shardline_now()`` (server/sql/schema.sql).

Every statement that reads the time of a lease, a heartbeat, a worker's
liveness or a rate now calls it, where each said ``now()``; inlined, it is
``now()``. Tests move time for all of them by replacing this one function,
where they rewrote leases' ``expires_at`` by hand. The rules that read the
time (worker liveness, the item trigger's minute and last_seen) are
replaced here to call it.

The text below is this migration's copy of those definitions; schema.sql
holds the present, and a test holds the migrated database to it.
"""

from django.db import migrations

RULES = r"""
CREATE OR REPLACE FUNCTION shardline_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT now()
$$;

CREATE OR REPLACE FUNCTION shardline_worker_live(last_seen timestamptz, lease_timeout double precision)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT last_seen > shardline_now() - make_interval(secs => greatest(2 * lease_timeout, 30))
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
"""

BEFORE = r"""
CREATE OR REPLACE FUNCTION shardline_worker_live(last_seen timestamptz, lease_timeout double precision)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT last_seen > now() - make_interval(secs => greatest(2 * lease_timeout, 30))
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

DROP FUNCTION IF EXISTS shardline_now();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("shardline", "0024_data_stall"),
    ]

    operations = [migrations.RunSQL(RULES, BEFORE)]
