-- already_done: which of these (id, token) pairs are completions that were
-- already accepted? A client that lost the response to a complete retries it;
-- the retry must succeed, not look like a lost lease.
SELECT i.id
  FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token)
  JOIN shardline_item AS i ON i.id = r.id
 WHERE i.state = 'done' AND i.token = r.token
   AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint AND shardline_job_in_scope(i.job_id, %(scope)s::text[]);
