-- release: the holder of lease %(id)s (token %(token)s) gives the item back
-- unread, through no fault of the item: a rank of synchronous training whose
-- epoch stopped before it trained on the item (worker_sdk.sync). Back to
-- pending for the next take, and the attempt it used is given back too (a
-- released item never fails for being released). Guarded like complete;
-- the trigger on shardline_item counts the move and wakes a waiting take.
WITH released AS (
    UPDATE shardline_item AS i
       SET state = 'pending',
           attempts = greatest(i.attempts - 1, 0),
           expires_at = NULL
     WHERE i.id = %(id)s AND i.state = 'leased' AND i.token = %(token)s
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint AND shardline_job_in_scope(i.job_id, %(scope)s::text[])
 RETURNING i.id, i.job_id, i.worker
), events AS (
    INSERT INTO shardline_event (job_id, item_id, kind, worker, message, at)
    SELECT job_id, id, 'released', coalesce(worker, ''), %(reason)s, shardline_now()
      FROM released
)
SELECT id, job_id FROM released;
