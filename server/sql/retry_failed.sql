-- retry_failed: every failed item of job %(job)s goes back to pending with its
-- attempts reset (its last error stays for the audit), the counters move
-- those items from failed to pending, and a job that had finished because of
-- them is running again.
WITH retried AS (
    UPDATE shardline_item
       SET state = 'pending', attempts = 0, token = NULL, expires_at = NULL
     WHERE job_id = %(job)s AND state = 'failed'
 RETURNING epoch
), counted AS (
    INSERT INTO shardline_counter AS c (job_id, epoch, shard, pending, leased, done, failed)
    SELECT %(job)s, epoch, pg_backend_pid(), count(*), 0, 0, -count(*)
      FROM retried
     GROUP BY epoch
    ON CONFLICT (job_id, epoch, shard) DO UPDATE
       SET pending = c.pending + EXCLUDED.pending,
           failed = c.failed + EXCLUDED.failed
), reopened AS (
    UPDATE shardline_job
       SET state = 'running', finished_at = NULL, updated_at = now()
     WHERE id = %(job)s AND state = 'done' AND EXISTS (SELECT 1 FROM retried)
)
SELECT count(*) FROM retried;
