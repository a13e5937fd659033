-- restore: put job %(job)s back to the position of a snapshot taken at
-- completion %(seq)s, as restore %(restore)s. Every item completed after the
-- snapshot and every live lease go back to pending; nothing else changes.
--
-- It runs in the restore's transaction after the job row was locked FOR NO
-- KEY UPDATE, so restores of one job are serialised. Takes do not lock the
-- job row and are not stopped:
--   target    the items completed after the snapshot (seq > %(seq)s: a range
--             scan of item_completion_seq) and the live leases (the partial
--             index item_leased_expiry). FOR UPDATE, not SKIP LOCKED: every
--             such row must be re-opened, so a concurrent complete or take
--             holding one is waited for, and the row is re-checked against
--             its committed version (a lease completed meanwhile has a seq
--             above %(seq)s and is re-opened too). The columns selected are
--             the locked version's, so the history sees what was there.
--             A take that commits while this runs leased a row that was
--             pending when the statement began: it is ordered after the
--             restore and its lease stands (SKIP LOCKED in take.sql still
--             hands each row to one taker).
--   reopened  back to pending, seq cleared (the next completion gets a new
--             one; a snapshot's max(seq) never sees rolled-back work). A
--             fenced lease keeps its token but is no longer 'leased', so its
--             holder's complete / fail / extend, guarded by (state = 'leased'
--             AND token = ...), match nothing: HTTP 409, nothing counted
--             twice. The rolled-back attempt does not count against
--             max_attempts: the item did nothing wrong.
--   history   the rolled-back completions and fenced leases as they were,
--             for the audit (an item completed, rolled back and completed
--             again shows both completions).
-- The counters follow from the trigger on shardline_item (server/sql/schema.sql),
-- so watermarks stay equal to a direct count.
WITH target AS (
    SELECT id, job_id, epoch, position, state, worker, token, attempts,
           leased_at, completed_at, duration, records, seq
      FROM shardline_item
     WHERE job_id = %(job)s
       AND (state = 'leased' OR (state = 'done' AND seq > %(seq)s))
       FOR UPDATE
), reopened AS (
    UPDATE shardline_item AS i
       SET state = 'pending',
           attempts = greatest(i.attempts - 1, 0),
           expires_at = NULL,
           completed_at = NULL,
           duration = NULL,
           records = NULL,
           seq = NULL
      FROM target AS t
     WHERE i.id = t.id
 RETURNING i.id
), history AS (
    INSERT INTO shardline_item_history
           (job_id, item_id, restore_id, state, epoch, position, worker, token, attempts,
            leased_at, completed_at, duration, records, seq)
    SELECT job_id, id, %(restore)s, state, epoch, position, worker, token, attempts,
           leased_at, completed_at, duration, records, seq
      FROM target
)
SELECT count(*) FILTER (WHERE state = 'done') AS reopened,
       count(*) FILTER (WHERE state = 'leased') AS fenced
  FROM target;
