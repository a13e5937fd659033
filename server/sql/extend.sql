-- extend: heartbeat. Pushes the expiry of live leases forward by the job's
-- lease timeout; guarded by (state = 'leased', token), so a heartbeat for a
-- lease that was taken back extends nothing and reports it lost.
--
-- The holders' worker rows are seen now (a worker reading one long item is
-- alive though it does not take), and when the heartbeat says so, marked
-- waiting or not: a process waiting at the end of another queue may be
-- unable to finish what it holds here (see at_end.sql).
WITH extended AS (
    UPDATE shardline_item AS i
       SET expires_at = now() + make_interval(secs => j.lease_timeout)
      FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token),
           shardline_job AS j
     WHERE i.id = r.id AND i.state = 'leased' AND i.token = r.token AND j.id = i.job_id
 RETURNING i.id, i.expires_at, i.job_id, i.worker
), seen AS (
    UPDATE shardline_worker AS w
       SET last_seen = now(),
           waiting_since = CASE WHEN %(waiting)s::boolean IS NULL THEN w.waiting_since
                                WHEN %(waiting)s::boolean THEN coalesce(w.waiting_since, now())
                                ELSE NULL END
      FROM (SELECT DISTINCT job_id, worker FROM extended) AS e
     WHERE w.job_id = e.job_id AND w.name = e.worker
)
SELECT id, expires_at FROM extended;
