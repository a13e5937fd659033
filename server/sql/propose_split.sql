-- propose_split: worker %(worker)s (reading for %(consumer)s) found nothing
-- to lease in job %(job)s; ask the holder of a record range that is expected
-- to finish last to split off its unread records (services/splits.py).
-- Nothing is cut here: the holder learns of the request with its next
-- heartbeat and answers with the point it will stop at (cut.sql).
--
--   recent     each worker's pace on the record range it completed last,
--              within %(recent)s seconds (its records over its lease's time).
--   held       the job's live leases with their record ranges (an item's
--              own range after a split, else its unit's), the next record
--              the holder reported (read_to: only holders that track their
--              reading report it) and its pace so far; until a report tells
--              it, its pace on its last range (recent), counted from when it
--              began this one. Not the leases of the asker's own consumer
--              (as at_end.sql does not wait for them): that consumer reads
--              them itself, and a DataLoader asks a loader's sibling for
--              more only once that loader returns, so a loader waiting for
--              its sibling's split waited for good (the sibling, not asked,
--              read no further than the split's floor).
--   asked      a request this worker made that is still unanswered: it waits
--              for that one rather than splitting a second lease.
--   estimated  where each holder is now: its report plus its pace since,
--              plus %(lead)s seconds for the request to reach it; askable
--              when it was not asked in the last %(stale)s seconds (a request
--              is pending, or the holder just refused).
--   idle_paces the recent paces of the job's workers that hold no lease.
--              The tail begins as the fast workers finish their ranges, and
--              from the held leases alone the mean pace was the slow
--              holders' own: a slow holder was left seconds of reading that
--              the idle workers would finish in a fraction of one
--              (bench/shapes.py).
--   plan       how long the unread records of all leases take if the job's
--              workers (seen lately: holders and waiting takers, this one
--              included) share them from now on: left = unread / the sum
--              of their paces (a worker whose pace is not known yet counts
--              at the mean pace).
--   chosen     the lease that would finish last (unread records over its
--              pace, an unknown one the mean; then the most unread), if it has
--              at least twice its floor left. Its floor: the fewest records
--              a split leaves to either side, %(floor)s, or what the holder
--              reads in %(piece_seconds)s seconds if fewer (at the mean pace
--              while its own is not known). A floor in records alone kept a
--              slow holder of expensive records reading seconds of them
--              after every other worker was done (2 x 16 records at its
--              pace); a lease just taken, judged by it, kept its whole rest
--              as one piece for one idle worker while others had none. Its holder keeps what
--              it reads in `left` seconds, and never more than its share
--              with this one taker (unread * r / (r + m), r its pace, m the
--              mean; half when r is not known): then every worker ends
--              together, not only these two, and the holder of a slow
--              lease is not left with seconds of reading that the others
--              would finish in a fraction of one. The remainder keeps at
--              least the floor.
--   victim     it, and the other leases of its holder's consumer and user
--              (a plain DataLoader's loaders, a dataset's slots) that would
--              also finish after `left`, each asked at its own point in this
--              request: the loaders of a slow process read in turn, and cut
--              one request apart, its last lease was left reading alone a
--              second after every other worker was done (bench/RESULTS.md).
--              The consumer is a name the client picks: another user's
--              leases under it are not asked with these.
--   locked     the victims' rows, locked in id order as a heartbeat
--              (extend.sql) locks a holder's rows, before they change.
--   pieces     the remainder is cut into pieces of what a worker at the mean
--              pace reads in `left` seconds (at least the floor each,
--              at most one per other worker): one answer from the holder
--              hands work to every idle worker at once, instead of a chain
--              of splits, one round trip each.
--   proposed   guarded by the same conditions, so two idle workers never
--              ask one holder at once; a request unanswered for %(stale)s
--              seconds (its holder died, or refused silently) may be replaced.
--   notified   wakes the holder's heartbeat if it waits on the server.
-- Returns one row: whether this worker has a request pending (asked), and
-- the lease asked now that would finish last (null when none qualifies).
WITH job AS (
    SELECT id, lease_timeout
      FROM shardline_job
     WHERE id = %(job)s AND split_tail AND state IN ('ready', 'running')
), recent AS (
    SELECT DISTINCT ON (i.worker) i.worker,
           (coalesce(i.range_end, u."end") - coalesce(i.range_start, u.start))
               / nullif(extract(epoch FROM i.completed_at - i.leased_at), 0) AS rate
      FROM job AS j
      JOIN shardline_item AS i ON i.job_id = j.id AND i.state = 'done'
                              AND i.completed_at > shardline_now() - make_interval(secs => %(recent)s)
      JOIN LATERAL (SELECT start, "end"
                      FROM shardline_unit
                     WHERE job_id = j.id AND idx = i.unit_idx
                     LIMIT 1) AS u ON true
     ORDER BY i.worker, i.completed_at DESC, i.id DESC
), held AS (
    SELECT i.id, i.split_at, i.split_for, i.split_asked_at, i.read_to, i.holder_id, h.consumer,
           coalesce(i.range_start, u.start) AS first,
           coalesce(i.range_end, u."end") AS stop,
           -- Unknown (null) until a report says it read something: one sent
           -- as it began says nothing of its pace, and a pace of 0 put the
           -- lease last in line for a split for as long as a held heartbeat
           -- kept the next report (seconds), when it was a slow holder's.
           -- Meanwhile the holder's pace on its last range stands in, from
           -- when it began this one (a lease taken ahead: when its consumer
           -- started it; not at all before). Without it every lease of the
           -- job's last round looked unread until its next report, and idle
           -- workers asked holders about to finish first, each refusing in
           -- turn, while the last range waited (bench/RESULTS.md).
           own.rate AS own_rate,
           coalesce(own.rate, CASE WHEN NOT i.ahead THEN r.rate END) AS rate,
           extract(epoch FROM shardline_now() - CASE WHEN own.rate IS NULL
                                                     THEN greatest(i.read_at, i.leased_at)
                                                     ELSE i.read_at END) AS since_read
      FROM job AS j
      -- Only leases whose holder reports positions: it tracks its reading
      -- (a plain item string's reader cannot stop at a record).
      JOIN shardline_item AS i ON i.job_id = j.id AND i.state = 'leased' AND i.expires_at > shardline_now()
                              AND i.read_to IS NOT NULL
      LEFT JOIN shardline_worker AS h ON h.job_id = j.id AND h.name = i.worker
      JOIN LATERAL (SELECT start, "end"
                      FROM shardline_unit
                     WHERE job_id = j.id AND idx = i.unit_idx
                     LIMIT 1) AS u ON true
     CROSS JOIN LATERAL (SELECT nullif(i.read_to - coalesce(i.range_start, u.start), 0)
                                    / nullif(extract(epoch FROM i.read_at - i.leased_at), 0) AS rate) AS own
      LEFT JOIN recent AS r ON r.worker = i.worker
     WHERE h.consumer IS DISTINCT FROM %(consumer)s
), asked AS (
    SELECT count(*) AS n
      FROM held
     WHERE split_for = %(worker)s AND split_asked_at > shardline_now() - make_interval(secs => %(stale)s)
), estimated AS (
    SELECT id, stop, rate, holder_id, consumer,
           split_asked_at IS NULL OR split_asked_at < shardline_now() - make_interval(secs => %(stale)s) AS askable,
           least(stop, read_to + coalesce(rate, 0) * (since_read + %(lead)s)) AS here,
           -- Where its own reports put it: a pace borrowed from the range
           -- before orders the leases, and never takes one out of the
           -- running (read slower than that one, it would wait unasked).
           least(stop, read_to + coalesce(own_rate, 0) * (since_read + %(lead)s)) AS reported
      FROM held
     WHERE stop IS NOT NULL
), idle_paces AS (
    SELECT r.rate
      FROM recent AS r
     WHERE NOT EXISTS (SELECT FROM shardline_item AS h
                        WHERE h.job_id = %(job)s AND h.worker = r.worker AND h.state = 'leased')
), plan AS (
    SELECT p.mean,
           u.unread / nullif(p.known + greatest(w.n - p.rated, 0) * p.mean, 0) AS left,
           greatest(w.n - 1, 1) AS others
      FROM (SELECT avg(rate) AS mean, coalesce(sum(rate), 0) AS known, count(*) AS rated
              FROM (SELECT rate FROM estimated UNION ALL SELECT rate FROM idle_paces) AS r
             WHERE rate > 0) AS p,
           (SELECT sum(stop - here) AS unread FROM estimated) AS u,
           (SELECT count(*) AS n
              FROM shardline_worker AS w, job AS j
             WHERE w.job_id = j.id AND shardline_worker_live(w.last_seen, j.lease_timeout)) AS w
), candidates AS (
    -- least() skips nulls: with no pace known, the holder keeps half.
    SELECT e.id, e.stop, e.holder_id, e.consumer, f.floor,
           least(ceil(e.here + least((e.stop - e.here) * coalesce(e.rate / nullif(e.rate + p.mean, 0), 0.5),
                                     coalesce(e.rate, p.mean) * p.left)),
                 e.stop - f.floor)::bigint AS point,
           (e.stop - e.here) / coalesce(e.rate, p.mean) AS finish,
           e.stop - e.here AS unread,
           p.left
      FROM estimated AS e
     CROSS JOIN plan AS p
     CROSS JOIN LATERAL (
           SELECT least(%(floor)s,
                        greatest(1, coalesce(ceil(coalesce(nullif(e.rate, 0), p.mean) * %(piece_seconds)s),
                                             %(floor)s)))::bigint AS floor) AS f
     WHERE e.askable AND (SELECT n FROM asked) = 0 AND e.stop - e.reported >= 2 * f.floor
), chosen AS (
    SELECT id, holder_id, consumer
      FROM candidates
     ORDER BY finish DESC NULLS LAST, unread DESC
     LIMIT 1
), victim AS (
    SELECT c.id, c.stop, c.floor, c.point
      FROM candidates AS c, chosen AS k
     WHERE c.id = k.id
        OR (c.consumer = k.consumer AND c.holder_id IS NOT DISTINCT FROM k.holder_id AND c.finish > c.left)
), locked AS (
    -- In id order, as a heartbeat (extend.sql) and a take that completes
    -- several leases lock a holder's rows: a dataset's slots share one
    -- worker, and rows updated in the scan's order could wait on the
    -- heartbeat while it waits on them (a deadlock).
    SELECT i.id
      FROM shardline_item AS i
     WHERE i.id IN (SELECT id FROM victim) AND i.job_id = %(job)s
     ORDER BY i.id
       FOR UPDATE
), pieces AS (
    SELECT v.id, v.point,
           greatest(1, least(round((v.stop - v.point) / nullif(p.mean * p.left, 0)),
                             (v.stop - v.point) / v.floor,
                             p.others))::int AS n
      FROM victim AS v
      JOIN locked AS l ON l.id = v.id
     CROSS JOIN plan AS p
), proposed AS (
    UPDATE shardline_item AS i
       SET split_at = c.point,
           split_pieces = c.n,
           split_for = %(worker)s,
           split_asked_at = shardline_now()
      FROM pieces AS c
     WHERE i.id = c.id AND i.state = 'leased'
       AND (i.split_asked_at IS NULL OR i.split_asked_at < shardline_now() - make_interval(secs => %(stale)s))
 RETURNING i.id, i.worker
), notified AS (
    -- The holder's heartbeat may be waiting for exactly this (server/waiting.py).
    SELECT pg_notify('shardline_job', %(job)s || ':split:' || coalesce(worker, '')) FROM proposed
)
SELECT (SELECT n FROM asked) > 0 AS asked,
       -- The lease chosen, or another of its consumer's when another idle
       -- worker asked that one first: a split is coming for this one either way.
       coalesce((SELECT p.id FROM proposed AS p, chosen AS k WHERE p.id = k.id), (SELECT min(id) FROM proposed)) AS proposed,
       (SELECT count(*) FROM notified) AS notified;
