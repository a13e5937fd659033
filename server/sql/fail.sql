-- fail: the holder gives an item up with an error. It goes back to pending
-- for another attempt, or to failed once it used the job's max_attempts; the
-- job goes on either way. Guarded by (state = 'leased', token) like complete.
WITH failed AS (
    UPDATE shardline_item AS i
       SET state = CASE WHEN i.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
           error = %(error)s,
           expires_at = NULL
      FROM shardline_job AS j
     WHERE i.id = %(id)s AND i.state = 'leased' AND i.token = %(token)s AND j.id = i.job_id
 RETURNING i.id, i.job_id, i.epoch, i.state, i.worker, i.attempts, j.max_attempts
), counted AS (
    INSERT INTO shardline_counter AS c (job_id, epoch, shard, pending, leased, done, failed)
    SELECT job_id, epoch, pg_backend_pid(),
           CASE WHEN state = 'pending' THEN 1 ELSE 0 END, -1, 0,
           CASE WHEN state = 'failed' THEN 1 ELSE 0 END
      FROM failed
    ON CONFLICT (job_id, epoch, shard) DO UPDATE
       SET pending = c.pending + EXCLUDED.pending,
           leased = c.leased + EXCLUDED.leased,
           failed = c.failed + EXCLUDED.failed
), events AS (
    INSERT INTO shardline_event (job_id, item_id, kind, worker, message, at)
    SELECT job_id, id, CASE WHEN state = 'failed' THEN 'failed' ELSE 'retried' END,
           coalesce(worker, ''), %(error)s, now()
      FROM failed
), credited AS (
    UPDATE shardline_worker AS w
       SET items_failed = w.items_failed + 1, last_seen = now()
      FROM failed AS f
     WHERE w.job_id = f.job_id AND w.name = f.worker
)
SELECT id, job_id, state, attempts, max_attempts FROM failed;
