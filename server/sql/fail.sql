-- fail: the holder gives an item up with an error. It goes back to pending
-- for another attempt, or to failed once it used the job's max_attempts; the
-- job goes on either way. Guarded by (state = 'leased', token) like complete.
-- The counters follow from the trigger on shardline_item (server/sql/schema.sql);
-- the failure is credited here, since only this statement fails items on a
-- worker's word (an expired lease, reclaimed by take.sql, is not its failure).
WITH failed AS (
    UPDATE shardline_item AS i
       SET state = CASE WHEN i.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
           error = %(error)s,
           expires_at = NULL
      FROM shardline_job AS j
     WHERE i.id = %(id)s AND i.state = 'leased' AND i.token = %(token)s AND j.id = i.job_id
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint
       AND shardline_name_in_scope(j.name, %(scope)s::text[])
 RETURNING i.id, i.job_id, i.state, i.worker, i.attempts, j.max_attempts
), events AS (
    INSERT INTO shardline_event (job_id, item_id, kind, worker, message, at)
    SELECT job_id, id, CASE WHEN state = 'failed' THEN 'failed' ELSE 'retried' END,
           coalesce(worker, ''), %(error)s, shardline_now()
      FROM failed
), credited AS (
    UPDATE shardline_worker AS w
       SET items_failed = w.items_failed + 1, last_seen = shardline_now()
      FROM failed AS f
     WHERE w.job_id = f.job_id AND w.name = f.worker
)
SELECT id, job_id, state, attempts, max_attempts FROM failed;
