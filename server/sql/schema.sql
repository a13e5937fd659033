-- Shardline's rules in the database: every function, view and trigger of its
-- schema, as the migrations leave them. The tables are Django's (server/models/).
--
-- schema version: 27 (migrations/0027_paces_in_records is the last to change this file)
--
-- A rule that more than one statement needs is defined here once, and the
-- statements of server/sql/ and the ORM (through Func) call it: the planner
-- inlines a one-expression SQL function and a view, so the hot path pays
-- nothing for the name. A migration copies what it changes from this file
-- (a migration's text is frozen; this file is the present), and
-- tests/server/test_the_migrated_database_matches_schema_sql.py holds a
-- migrated database to this file, as procrastinate's migration test does.
--
-- Order matters: a SQL function's body is checked when it is created.

-- The service's time: every lease, heartbeat, liveness and rate is read
-- against it, so a test moves time for all of them by replacing this one
-- function (tests/support.py, ServiceTime) instead of rewriting expires_at.
-- Inlined, it is now(): the transaction's start, and an index condition.
-- The service clock (service_clock.sql) alone reads the real now(): it
-- measures outages of the service, which moving time must not fake.
CREATE OR REPLACE FUNCTION shardline_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT now()
$$;

-- A worker is live while it was seen (a take, a heartbeat, a completion)
-- within twice its job's lease timeout, and at least 30 s: a worker holding
-- leases heartbeats every third of the timeout, an idle one waits on the
-- server in takes of a few seconds. The dashboard's "gone", the straggler
-- rule of take.sql and the split planner of propose_split.sql all use this.
CREATE OR REPLACE FUNCTION shardline_worker_live(last_seen timestamptz, lease_timeout double precision)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT last_seen > shardline_now() - make_interval(secs => greatest(2 * lease_timeout, 30))
$$;

-- An epoch is in a take's scope from from_epoch up to upto_epoch, each bound
-- only when given: a synchronous rank reads one epoch alone (from = upto),
-- an epoch-by-epoch reader the epochs up to the one it is in. A range, not
-- "bound IS NULL OR ...": inlined, it is an index condition of item_pending
-- even in a prepared statement's generic plan, which then reads the first
-- pending items in order. Spelled with ORs, a generic plan made while a new
-- job's items were not yet in the statistics sorted all of them on every
-- take: 56 ms a take on a 100,000-item job against 3 ms (bench/RESULTS.md).
CREATE OR REPLACE FUNCTION shardline_in_epochs(epoch integer, from_epoch integer, upto_epoch integer)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT epoch BETWEEN coalesce(from_epoch, 0) AND coalesce(upto_epoch, 2147483647)
$$;

-- A token's scope (server/callers.py): NULL for every job, else regular
-- expressions of job names, one of which must match. Python matches the
-- same expressions (callers.Caller), so the two cannot disagree.
CREATE OR REPLACE FUNCTION shardline_name_in_scope(name text, scope text[])
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT scope IS NULL OR name ~ ANY (scope)
$$;

CREATE OR REPLACE FUNCTION shardline_job_in_scope(job bigint, scope text[]) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN scope IS NULL OR EXISTS (SELECT FROM shardline_job AS j
                                     WHERE j.id = job AND shardline_name_in_scope(j.name, scope));
END
$$;

-- The consumers that wait at the end of a queue, one row per waiting worker:
-- a consumer waits when any of its workers does (a DataLoader's loader that
-- found nothing). A lease held by a consumer that waits is not worth waiting
-- for, since that consumer may be waiting on the caller (at_end.sql), nor is
-- its holder a pace to defer a slow worker against (take.sql).
CREATE OR REPLACE VIEW shardline_waiting_consumer AS
    SELECT job_id, consumer
      FROM shardline_worker
     WHERE waiting_since IS NOT NULL;

-- Fencing tokens: random, so a token says nothing of how many leases were made.
CREATE OR REPLACE FUNCTION shardline_fencing_token() RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
DECLARE
    u text := replace(gen_random_uuid()::text, '-', '');
BEGIN
    -- 16 hex digits of a version-4 UUID, skipping its version digit (the
    -- 13th) and its variant digit (the 17th, two fixed bits): 64 random
    -- bits, of which the sign bit is dropped.
    RETURN greatest(
        ('x' || substr(u, 1, 12) || substr(u, 14, 3) || substr(u, 18, 1))::bit(64)::bigint & 9223372036854775807,
        1);
END
$$;

-- The names of items: a slice's item is its unit's with the range it holds
-- (worker_sdk.formats.slice_item's spelling).
CREATE OR REPLACE FUNCTION shardline_item_name(unit_item text, first bigint, stop bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN first IS NULL THEN unit_item
                ELSE regexp_replace(unit_item, '([?&])start=[0-9]+&end=[0-9]+((#format=[a-z]+)?)$',
                                    '\1start=' || first || '&end=' || stop || '\2')
           END
$$;

-- What an item weighs in the straggler rule's paces (take.sql): the records
-- of its range (its own, after a split, else its unit's); a work read whole
-- weighs one. Split pieces differ in size: a worker that finished a
-- 3-record piece in 0.6 s is not faster than one that read a 150-record
-- slice in 5 s, which a pace per item said (bench/RESULTS.md).
CREATE OR REPLACE FUNCTION shardline_item_weight(range_start bigint, range_end bigint, unit_start bigint,
                                                 unit_end bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- greatest() skips a null: a whole work, and an empty range, weigh one.
    SELECT greatest(coalesce(range_end, unit_end) - coalesce(range_start, unit_start), 1)
$$;

-- Counters, throughput and the wake-ups of waiting takes follow every move
-- of an item (server/waiting.py): one statement-level trigger, so a take
-- that leases 64 items runs it once.
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
CREATE TRIGGER shardline_item_inserted AFTER INSERT ON shardline_item
    REFERENCING NEW TABLE AS new_items
    FOR EACH STATEMENT EXECUTE FUNCTION shardline_item_moved();
CREATE TRIGGER shardline_item_updated AFTER UPDATE ON shardline_item
    REFERENCING OLD TABLE AS old_items NEW TABLE AS new_items
    FOR EACH STATEMENT EXECUTE FUNCTION shardline_item_moved();

-- A job's state changed: its waiting takes answer at once.
CREATE OR REPLACE FUNCTION shardline_job_state_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('shardline_job', NEW.id || ':state:' || NEW.state);
    RETURN NULL;
END
$$;
CREATE TRIGGER shardline_job_state AFTER UPDATE OF state ON shardline_job
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION shardline_job_state_changed();

-- A consumer started or stopped waiting: the waits that counted its leases end.
CREATE OR REPLACE FUNCTION shardline_worker_waiting_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
