-- service_clock: the service says it is up (server/clock.py), and after a
-- silence of over %(gap)s seconds (the database or every web process was
-- down) gives back to the leases that were live when it last spoke the time
-- the silence took from them, before any take can reclaim them.
--
--   previous  when the service last spoke. FOR UPDATE: the web processes
--             that end one outage queue here; the first shifts, and the
--             others (their row re-read when the lock is theirs) find it
--             touched just now and shift nothing.
--   shifted   each lease live at that moment keeps the time it had left
--             then: expires_at + silence. A lease that had expired before it
--             is not brought back, and one whose holder died gains at most
--             the time it had left, however long the silence. A silence
--             under %(gap)s seconds is the service's own rhythm (every
--             process touches at least once a second): shifting then would
--             keep every lease alive for ever.
--   touched   now(): the start of this statement, even if it waited on the
--             lock behind a later one; the clock then goes back by that
--             wait at most, which only makes the next silence look longer.
--
-- Scans the partial index of live leases (item_leased_expiry) only after a
-- silence; otherwise one row is read and written.
WITH previous AS (
    SELECT touched_at
      FROM shardline_service_clock
     WHERE id = 1
       FOR UPDATE
), silence AS (
    SELECT touched_at, now() - touched_at AS length
      FROM previous
     WHERE touched_at < now() - make_interval(secs => %(gap)s)
), shifted AS (
    -- EXISTS first: a one-time test, so that without a silence no lease is read.
    UPDATE shardline_item AS i
       SET expires_at = i.expires_at + (SELECT length FROM silence)
     WHERE EXISTS (SELECT FROM silence)
       AND i.state = 'leased' AND i.expires_at > (SELECT touched_at FROM silence)
 RETURNING i.id
), touched AS (
    -- From `previous`, so that the row is locked and read before it is
    -- written (sub-statements of one statement run in no given order).
    UPDATE shardline_service_clock AS c
       SET touched_at = now()
      FROM previous
     WHERE c.id = 1
)
SELECT (SELECT count(*) FROM shifted) AS shifted,
       (SELECT extract(epoch FROM length) FROM silence) AS silence;
