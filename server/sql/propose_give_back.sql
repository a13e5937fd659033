-- propose_give_back: worker %(worker)s (reading for %(consumer)s) found
-- nothing to lease in job %(job)s; ask a holder of an item taken ahead of
-- its consumer, and not started, to give it back (services/give_back.py).
-- Nothing moves here: only the holder knows whether its consumer has
-- started the item. It learns of the request with its heartbeat (which
-- waits on the server, and is woken by the notification) and gives the item
-- back unread (release.sql), or refuses by starting it (take.sql's
-- `started`, which wakes the asker).
--
--   asked      a request this worker made that is still unanswered: it waits
--              for that one rather than asking a second holder.
--   victim     the live lease taken ahead the longest ago (its holder is
--              the slowest to start it; of several taken together, the
--              one it would start last), not of the asker's own consumer
--              (it reads its own), not asked in the last %(stale)s seconds.
--   proposed   the request: split_for and split_asked_at, no split_at.
--   notified   wakes the holder's heartbeat if it waits on the server.
-- Reads the job's leased rows (item_leased_expiry): a few per worker.
WITH job AS (
    SELECT id
      FROM shardline_job
     WHERE id = %(job)s AND state IN ('ready', 'running')
), asked AS (
    SELECT count(*) AS n
      FROM shardline_item AS i, job AS j
     WHERE i.job_id = j.id AND i.state = 'leased' AND i.ahead AND i.split_for = %(worker)s
       AND i.split_asked_at > shardline_now() - make_interval(secs => %(stale)s)
), victim AS (
    SELECT i.id
      FROM job AS j
      JOIN shardline_item AS i ON i.job_id = j.id AND i.state = 'leased' AND i.expires_at > shardline_now()
                              AND i.ahead
                              AND (i.split_asked_at IS NULL
                                   OR i.split_asked_at < shardline_now() - make_interval(secs => %(stale)s))
     WHERE (SELECT n FROM asked) = 0
       AND NOT EXISTS (SELECT FROM shardline_worker AS h
                        WHERE h.job_id = j.id AND h.name = i.worker AND h.consumer = %(consumer)s)
     -- Of the leases one take ahead brought together, the one its holder
     -- would start last (they are handed out in this order, reversed).
     ORDER BY i.leased_at, i.epoch DESC, i.position DESC
     LIMIT 1
       FOR UPDATE OF i SKIP LOCKED
), proposed AS (
    UPDATE shardline_item AS i
       SET split_for = %(worker)s,
           split_asked_at = shardline_now()
      FROM victim AS v
     WHERE i.id = v.id
 RETURNING i.id, i.worker
), notified AS (
    SELECT pg_notify('shardline_job', %(job)s || ':split:' || coalesce(worker, '')) FROM proposed
)
SELECT (SELECT n FROM asked) > 0 AS asked, (SELECT id FROM proposed) AS proposed,
       (SELECT count(*) FROM notified) AS notified;
