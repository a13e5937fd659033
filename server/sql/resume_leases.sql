-- resume_leases: a restarted worker takes back at once the leases its
-- previous process held on job %(job)s under the same worker name (a
-- LocalWorkMgr's stable "job_name:task_index"), instead of waiting for their
-- expiry and seeing them go to another worker. Each gets a new fencing
-- token, so whatever the old process might still send for it is refused,
-- and a new expiry. Only the caller's own leases, of a job in its scope.
-- Where the old process had read to is not known: a record range is read
-- again from its start (a split cut before stays cut), and a split asked of
-- it is forgotten (the idle worker asks again).
WITH resumed AS (
    UPDATE shardline_item AS i
       SET token = shardline_fencing_token(),
           leased_at = shardline_now(),
           expires_at = shardline_now() + make_interval(secs => j.lease_timeout),
           read_to = NULL,
           read_at = NULL,
           split_at = NULL,
           split_for = NULL,
           split_asked_at = NULL,
           split_pieces = NULL,
           ahead = false  -- handed to the restart first: not one to ask back
      FROM shardline_job AS j
     WHERE i.job_id = %(job)s AND i.state = 'leased' AND i.worker = %(worker)s AND j.id = i.job_id
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint AND shardline_job_in_scope(i.job_id, %(scope)s::text[])
 RETURNING i.id, i.token, i.epoch, i.position, i.unit_idx, i.expires_at, i.range_start, i.range_end
), events AS (
    INSERT INTO shardline_event (job_id, item_id, kind, worker, message, at)
    SELECT %(job)s, id, 'resumed', %(worker)s, 'lease taken back by a restarted worker of the same name (new token)', shardline_now()
      FROM resumed
)
SELECT l.id, l.token, shardline_item_name(u.item, l.range_start, l.range_end) AS item, l.epoch, l.position,
       l.expires_at, u."offset", l.range_start, l.range_end, u.start AS unit_start, u."end" AS unit_end, u.source
  FROM resumed AS l
  LEFT JOIN LATERAL (SELECT item, "offset", start, "end", source
                       FROM shardline_unit
                      WHERE job_id = %(job)s AND idx = l.unit_idx
                      LIMIT 1) AS u ON true
 ORDER BY l.epoch, l.position;
