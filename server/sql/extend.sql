-- extend: heartbeat. Pushes the expiry of live leases forward by the job's
-- lease timeout; guarded by (state = 'leased', token), so a heartbeat for a
-- lease that was taken back extends nothing and reports it lost.
UPDATE shardline_item AS i
   SET expires_at = now() + make_interval(secs => j.lease_timeout)
  FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token),
       shardline_job AS j
 WHERE i.id = r.id AND i.state = 'leased' AND i.token = r.token AND j.id = i.job_id
RETURNING i.id, i.expires_at;
