-- take: lease up to %(count)s items of job %(job)s to worker %(worker)s.
--
-- One statement, one round trip, no read-then-write:
--   reclaimed  leases that expired go back to `pending`, or to `failed` once
--              they used max_attempts. SKIP LOCKED: two takers never reclaim
--              the same row and never wait on each other. CTEs share one
--              snapshot, so `picked` cannot see these rows; the next take
--              leases them (the service runs it at once when this one came
--              up short).
--   picked     the first pending items in (epoch, position) order, read from
--              the partial index item_pending; SKIP LOCKED hands concurrent
--              takers disjoint rows, so no item ever has two live leases.
--   leased     each picked row gets a fresh fencing token from a sequence.
--   counted    per-epoch counter deltas, in the row of this backend
--              (pg_backend_pid): no two transactions share a counter row, so
--              counters add no lock waits and no deadlocks to the hot path.
--   events     the audit trail of expired leases.
--   seen       the worker's last_seen.
-- The final SELECT returns one row even when nothing was leased, so the
-- caller always learns how many leases were reclaimed.
WITH reclaimed AS (
    UPDATE shardline_item AS i
       SET state = CASE WHEN i.attempts >= %(max_attempts)s THEN 'failed' ELSE 'pending' END,
           error = 'lease expired while held by ' || coalesce(i.worker, 'an unknown worker'),
           expires_at = NULL
      FROM (SELECT id
              FROM shardline_item
             WHERE job_id = %(job)s AND state = 'leased' AND expires_at < now()
             ORDER BY expires_at
             LIMIT 100
               FOR UPDATE SKIP LOCKED) AS expired
     WHERE i.id = expired.id
 RETURNING i.id, i.epoch, i.state, i.worker
), picked AS (
    SELECT id
      FROM shardline_item
     WHERE job_id = %(job)s AND state = 'pending'
     ORDER BY epoch, position
     LIMIT %(count)s
       FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE shardline_item AS i
       SET state = 'leased',
           token = nextval('shardline_token_seq'),
           worker = %(worker)s,
           attempts = i.attempts + 1,
           leased_at = now(),
           expires_at = now() + make_interval(secs => %(timeout)s),
           completed_at = NULL,
           duration = NULL,
           records = NULL
      FROM picked
     WHERE i.id = picked.id
 RETURNING i.id, i.token, i.epoch, i.position, i.unit_idx, i.expires_at
), deltas AS (
    SELECT epoch, -1 AS pending, 1 AS leased, 0 AS failed FROM leased
    UNION ALL
    SELECT epoch,
           CASE WHEN state = 'pending' THEN 1 ELSE 0 END,
           -1,
           CASE WHEN state = 'failed' THEN 1 ELSE 0 END
      FROM reclaimed
), counted AS (
    INSERT INTO shardline_counter AS c (job_id, epoch, shard, pending, leased, done, failed)
    SELECT %(job)s, epoch, pg_backend_pid(), sum(pending), sum(leased), 0, sum(failed)
      FROM deltas
     GROUP BY epoch
    ON CONFLICT (job_id, epoch, shard) DO UPDATE
       SET pending = c.pending + EXCLUDED.pending,
           leased = c.leased + EXCLUDED.leased,
           failed = c.failed + EXCLUDED.failed
), events AS (
    INSERT INTO shardline_event (job_id, item_id, kind, worker, message, at)
    SELECT %(job)s, id, 'expired', coalesce(worker, ''),
           CASE WHEN state = 'failed' THEN 'lease expired; no attempts left, item failed'
                ELSE 'lease expired; item back to pending' END,
           now()
      FROM reclaimed
), seen AS (
    INSERT INTO shardline_worker AS w (job_id, name, first_seen, last_seen, items_done, items_failed, busy_seconds)
    VALUES (%(job)s, %(worker)s, now(), now(), 0, 0, 0)
    ON CONFLICT (job_id, name) DO UPDATE SET last_seen = now()
)
SELECT r.reclaimed, l.id, l.token, u.item, l.epoch, l.position, l.expires_at
  FROM (SELECT count(*) FILTER (WHERE state = 'pending') AS reclaimed FROM reclaimed) AS r
  LEFT JOIN leased AS l ON true
  LEFT JOIN shardline_unit AS u ON u.job_id = %(job)s AND u.idx = l.unit_idx
 ORDER BY l.epoch, l.position;
