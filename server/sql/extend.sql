-- extend: heartbeat. Pushes the expiry of live leases forward by the job's
-- lease timeout; guarded by (state = 'leased', token), so a heartbeat for a
-- lease that was taken back extends nothing and reports it lost.
--
-- The holders' worker rows are seen now (a worker reading one long item is
-- alive though it does not take), and when the heartbeat says so, marked
-- waiting or not: a process waiting at the end of another queue may be
-- unable to finish what it holds here (see at_end.sql).
--
-- A holder reading a record range reports the next record it will read
-- (%(positions)s, null where it has none); each lease comes back with the
-- split asked of it, if any, and whether it is asked back (an item taken
-- ahead of its consumer: services/give_back.py); so do the holders' other
-- leases of the job that a split or give-back was asked of (not requested,
-- not extended); and whether it is a record range of a job in
-- its tail (nothing pending, no epoch left to create, splitting on), where
-- its holder should heartbeat often so that a split lands soon
-- (services/splits.py).
--
-- A heartbeat may carry its holders' data stall (%(stall_clock)s and its
-- cumulative seconds, NULL without one: worker_sdk.stall). It is the
-- training loop's, counted for the consumer the extended leases are read
-- for, so a token reports only for loops whose live leases it holds.
WITH locked AS (
    -- Its leases locked in id order first (two or more), as take.sql locks
    -- the leases a request completes and starts: the two never wait on each
    -- other in a circle.
    SELECT id
      FROM shardline_item
     WHERE cardinality(%(ids)s::bigint[]) > 1 AND id = ANY (%(ids)s::bigint[]) AND state = 'leased'
       AND holder_id IS NOT DISTINCT FROM %(holder)s::bigint  -- nobody else's rows
     ORDER BY id
       FOR UPDATE
), extended AS (
    UPDATE shardline_item AS i
       SET expires_at = shardline_now() + make_interval(secs => j.lease_timeout),
           read_to = coalesce(r.position, i.read_to),
           read_at = CASE WHEN r.position IS NULL THEN i.read_at ELSE shardline_now() END,
           -- Started by its consumer (a lease taken ahead), as take.sql's started.
           ahead = i.ahead AND NOT r.started,
           leased_at = CASE WHEN i.ahead AND r.started THEN shardline_now() ELSE i.leased_at END,
           split_for = CASE WHEN i.ahead AND r.started THEN NULL ELSE i.split_for END,
           split_asked_at = CASE WHEN i.ahead AND r.started THEN NULL ELSE i.split_asked_at END
      FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[], %(positions)s::bigint[], %(started)s::boolean[])
               AS r(id, token, position, started),
           shardline_job AS j
     WHERE i.id = r.id AND i.state = 'leased' AND i.token = r.token AND j.id = i.job_id
       AND (cardinality(%(ids)s::bigint[]) <= 1 OR i.id IN (SELECT id FROM locked))
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint
       AND shardline_name_in_scope(j.name, %(scope)s::text[])
 RETURNING i.id, i.expires_at, i.job_id, i.worker, i.unit_idx, i.range_end, i.split_at,
           i.ahead AND i.split_asked_at IS NOT NULL AS give_back
), refused AS (
    -- A give-back asked of a lease its consumer had started: the asker asks elsewhere.
    SELECT pg_notify('shardline_job', i.job_id || ':refused:' || i.split_for)
      FROM shardline_item AS i, unnest(%(ids)s::bigint[], %(started)s::boolean[]) AS r(id, started)
     WHERE i.id = r.id AND r.started AND i.ahead AND i.split_for IS NOT NULL AND i.id IN (SELECT id FROM extended)
), seen AS (
    UPDATE shardline_worker AS w
       SET last_seen = shardline_now(),
           waiting_since = CASE WHEN %(waiting)s::boolean IS NULL THEN w.waiting_since
                                WHEN %(waiting)s::boolean THEN coalesce(w.waiting_since, shardline_now())
                                ELSE NULL END
      FROM (SELECT DISTINCT job_id, worker FROM extended) AS e
     WHERE w.job_id = e.job_id AND w.name = e.worker
), stalled AS (
    -- What each of the reporting clock's two counters grew since its last
    -- report is added: a repeat, or a heartbeat that arrives after a later
    -- one of the same clock, adds nothing; a new clock (a restarted
    -- process) adds its whole reading. The total is what was waited plus
    -- what was busy, so it never grows less than the waited part.
    INSERT INTO shardline_data_stall AS s (job_id, worker, waited, total, clock, clock_waited, clock_busy,
                                           first_reported, reported_at)
    SELECT DISTINCT e.job_id, coalesce(nullif(w.consumer, ''), e.worker),
           %(stall_waited)s::float8, %(stall_waited)s::float8 + %(stall_busy)s::float8, %(stall_clock)s::text,
           %(stall_waited)s::float8, %(stall_busy)s::float8, shardline_now(), shardline_now()
      FROM extended AS e
      JOIN shardline_worker AS w ON w.job_id = e.job_id AND w.name = e.worker
     WHERE %(stall_clock)s::text IS NOT NULL
    ON CONFLICT (job_id, worker) DO UPDATE
       SET waited = s.waited + CASE WHEN s.clock <> EXCLUDED.clock THEN EXCLUDED.clock_waited
                                    ELSE greatest(EXCLUDED.clock_waited - s.clock_waited, 0) END,
           total = s.total + CASE WHEN s.clock <> EXCLUDED.clock THEN EXCLUDED.clock_waited + EXCLUDED.clock_busy
                                  ELSE greatest(EXCLUDED.clock_waited - s.clock_waited, 0)
                                       + greatest(EXCLUDED.clock_busy - s.clock_busy, 0) END,
           clock_waited = CASE WHEN s.clock <> EXCLUDED.clock THEN EXCLUDED.clock_waited
                               ELSE greatest(s.clock_waited, EXCLUDED.clock_waited) END,
           clock_busy = CASE WHEN s.clock <> EXCLUDED.clock THEN EXCLUDED.clock_busy
                             ELSE greatest(s.clock_busy, EXCLUDED.clock_busy) END,
           clock = EXCLUDED.clock,
           reported_at = shardline_now()
), asked AS (
    -- Splits and give-backs asked of the holders' other leases of the job
    -- (leased after this heartbeat left, or while it waited): answered
    -- with it. Read from the job's live leases (item_leased_expiry), a few
    -- per worker.
    SELECT i.id, i.job_id, i.worker, i.expires_at, i.split_at, i.ahead AND i.split_asked_at IS NOT NULL AS give_back
      FROM (SELECT DISTINCT job_id, worker FROM extended) AS e
      JOIN shardline_item AS i ON i.job_id = e.job_id AND i.state = 'leased' AND i.worker = e.worker
     WHERE (i.split_at IS NOT NULL OR (i.ahead AND i.split_asked_at IS NOT NULL))
       AND i.id NOT IN (SELECT id FROM extended)
)
SELECT e.id, e.job_id, e.worker, e.expires_at, e.split_at, e.give_back, true AS requested, j.lease_timeout,
       (SELECT count(*) FROM refused) AS refused,
       (e.range_end IS NOT NULL OR u."end" IS NOT NULL) AS ranged,
       (j.split_tail AND j.epochs_materialised = j.num_epochs
        AND NOT EXISTS (SELECT FROM shardline_item AS p WHERE p.job_id = e.job_id AND p.state = 'pending')) AS tail
  FROM extended AS e
  JOIN shardline_job AS j ON j.id = e.job_id
  LEFT JOIN LATERAL (SELECT "end"
                       FROM shardline_unit
                      WHERE job_id = e.job_id AND idx = e.unit_idx
                      LIMIT 1) AS u ON true
 UNION ALL
SELECT id, job_id, worker, expires_at, split_at, give_back, false, NULL::float8, 0, split_at IS NOT NULL, true
  FROM asked;
