-- claim_request: request %(key)s of worker %(worker)s on job %(job)s is about
-- to be answered, unless it was seen before. Runs in the take's transaction:
-- a repeat sent meanwhile waits here on the first one's row, which commits
-- with its answer. Returns one row: mine (true: answer it now) and, for a
-- repeat, the first request's answer, or NULL when the first committed after
-- this statement's snapshot (stored_answer.sql reads it then). The worker's
-- keys older than %(ttl)s seconds are dropped on the way (an index range of
-- its own rows).
WITH dropped AS (
    DELETE FROM shardline_take_request
     WHERE job_id = %(job)s AND worker = %(worker)s
       AND created_at < now() - make_interval(secs => %(ttl)s)
), claimed AS (
    INSERT INTO shardline_take_request (job_id, key, worker, created_at)
    VALUES (%(job)s, %(key)s, %(worker)s, now())
    ON CONFLICT (job_id, key) DO NOTHING
 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM claimed) AS mine,
       (SELECT answer FROM shardline_take_request WHERE job_id = %(job)s AND key = %(key)s) AS answer;
