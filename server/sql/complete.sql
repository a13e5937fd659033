-- complete: mark leases done. Each row is guarded by (state = 'leased',
-- token, holder, scope): a lease that was taken back (or a token that never
-- held it, or another user's) matches nothing, so nothing is ever counted
-- twice, and nobody completes a lease they do not hold. The caller reports the ids that
-- did not match as lost, after checking for repeats of an accepted completion.
--
-- A lease past its expiry that nobody reclaimed yet still completes: its
-- token is still the newest, so no other worker can be reading the item.
-- Counters, completions per minute and the worker's credit: the trigger on
-- shardline_item (server/sql/schema.sql).
WITH req AS (
    SELECT *
      FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[], %(records)s::bigint[]) AS r(id, token, records)
), done AS (
    UPDATE shardline_item AS i
       SET state = 'done',
           completed_at = shardline_now(),
           expires_at = NULL,
           duration = extract(epoch FROM shardline_now() - i.leased_at),
           records = r.records,
           seq = nextval('shardline_completion_seq'),
           -- Done is past started: a lease taken ahead and read whole before any
           -- request said it was started is taken ahead of nothing now.
           ahead = false
      FROM req AS r
     WHERE i.id = r.id AND i.state = 'leased' AND i.token = r.token
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint AND shardline_job_in_scope(i.job_id, %(scope)s::text[])
 RETURNING i.id, i.job_id
)
SELECT id, job_id FROM done;
