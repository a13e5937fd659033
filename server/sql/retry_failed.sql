-- retry_failed: every failed item of job %(job)s goes back to pending with its
-- attempts reset (its last error stays for the audit), and a job that had
-- finished because of them is running again. The counters move those items
-- from failed to pending by the trigger on shardline_item (server/sql/schema.sql).
WITH retried AS (
    UPDATE shardline_item
       SET state = 'pending', attempts = 0, token = NULL, expires_at = NULL
     WHERE job_id = %(job)s AND state = 'failed'
 RETURNING id
), reopened AS (
    UPDATE shardline_job
       SET state = 'running', finished_at = NULL, updated_at = shardline_now()
     WHERE id = %(job)s AND state = 'done' AND EXISTS (SELECT 1 FROM retried)
)
SELECT count(*) AS retried FROM retried;
