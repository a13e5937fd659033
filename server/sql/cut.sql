-- cut: the holder of lease %(id)s (token %(token)s) answers a split request:
-- it will stop reading at record %(at)s. Below the lease's end, the lease
-- keeps [start, at) and [at, end) becomes new pending items of the same
-- epoch and unit, whose parent is this one: as many pieces as the request
-- asked (split_pieces), fewer when the holder stopped past the point asked
-- and the rest is too short for pieces of the size planned; at the end (or
-- past it), the holder refused and only the request is cleared. One statement, so the lease's new end and its
-- remainder commit together or not at all.
--
--   target     the lease, held with this token, and its range (its own
--              after an earlier split, else its unit's); locked, so that a
--              cut and a take never interleave on it.
--   again      the same cut sent twice (the holder's retry of a request
--              whose answer was lost): its remainder's first piece, unchanged.
--   cut        the lease's range shrinks. Never below the position the
--              holder reported (read_to): records it said it has read stay
--              its own. The request is answered either way.
--   numbered   the job's count of pieces split off: a piece's position in
--              its epoch is units_count + its number, after every unit of
--              the epoch, so positions stay unique and in order.
--   remainder  the new items, in record order; the item trigger counts them
--              pending and wakes as many waiting takes.
--   refused    a refusal wakes the take that asked, if it waits.
--   events     the split in the audit trail: 'split' on the cut item,
--              'remainder' on each new one.
-- Returns one row when the lease is held with the token (none when it is
-- not: the caller says lost), with the range before the cut, whether the
-- cut was made now (made) or now or before (split), the remainder's first
-- piece and the number of pieces made now.
WITH target AS (
    SELECT i.id, i.job_id, i.epoch, i.unit_idx, i.worker, i.split_for, i.read_to, i.split_at, i.split_pieces,
           coalesce(i.range_start, u.start) AS first,
           coalesce(i.range_end, u."end") AS stop
      FROM shardline_item AS i
      JOIN shardline_unit AS u ON u.job_id = i.job_id AND u.idx = i.unit_idx
     WHERE i.id = %(id)s AND i.token = %(token)s AND i.state = 'leased'
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint AND shardline_job_in_scope(i.job_id, %(scope)s::text[])
       FOR UPDATE OF i
), again AS (
    SELECT r.id
      FROM target AS t
      JOIN shardline_item AS r ON r.job_id = t.job_id AND r.parent_id = t.id AND r.range_start = %(at)s
     WHERE t.stop = %(at)s
), cut AS (
    UPDATE shardline_item AS i
       SET range_start = CASE WHEN %(at)s < t.stop THEN t.first ELSE i.range_start END,
           range_end = CASE WHEN %(at)s < t.stop THEN %(at)s ELSE i.range_end END,
           split_at = NULL,
           split_for = NULL,
           -- A refusal is remembered for a while: the holder is not asked again
           -- at once (propose_split.sql), another one is.
           split_asked_at = CASE WHEN %(at)s >= t.stop THEN shardline_now() END,
           split_pieces = NULL
      FROM target AS t
     WHERE i.id = t.id
       AND (%(at)s >= t.stop OR (%(at)s > t.first AND %(at)s >= coalesce(t.read_to, t.first)))
       -- at >= stop: a refusal; the range is unchanged.
       AND NOT EXISTS (SELECT FROM again)
 RETURNING i.id, i.range_end
), counted AS (
    -- The pieces the request planned (propose_split.sql sized them, none
    -- under its floor), fewer when the holder stops past the point asked:
    -- as many of the planned size as the rest still holds.
    SELECT greatest(1, least(coalesce(t.split_pieces, 1),
                             (t.stop - %(at)s) / greatest(1, (t.stop - t.split_at) / nullif(t.split_pieces, 0))))::int AS pieces
      FROM target AS t
), numbered AS (
    UPDATE shardline_job AS j
       SET splits = j.splits + c.pieces
      FROM target AS t, counted AS c
     WHERE j.id = t.job_id AND %(at)s < t.stop AND EXISTS (SELECT FROM cut)
 RETURNING j.units_count + j.splits - c.pieces AS position, c.pieces
), remainder AS (
    INSERT INTO shardline_item (job_id, epoch, position, unit_idx, state, attempts, error,
                                range_start, range_end, parent_id)
    SELECT t.job_id, t.epoch, n.position + k, t.unit_idx, 'pending', 0, '',
           %(at)s + (t.stop - %(at)s) * k / n.pieces, %(at)s + (t.stop - %(at)s) * (k + 1) / n.pieces, t.id
      FROM target AS t, numbered AS n, generate_series(0, n.pieces - 1) AS k
 RETURNING id, range_start, range_end
), refused AS (
    -- The take that asked for this split may wait on the server for it: it
    -- asks another holder (server/waiting.py).
    SELECT pg_notify('shardline_job', t.job_id || ':refused:' || t.split_for)
      FROM target AS t
     WHERE %(at)s >= t.stop AND t.split_for IS NOT NULL AND EXISTS (SELECT FROM cut)
), events AS (
    -- Messages by concatenation: a % in the text would be read as a placeholder.
    INSERT INTO shardline_event (job_id, item_id, kind, worker, message, at)
    SELECT t.job_id, t.id, 'split', coalesce(t.worker, ''),
           -- Records as [a, b), items as #id, and the worker that asked
           -- (idle, not the one that will read the pieces: any taker may).
           'split at record ' || %(at)s || ': ' || coalesce(t.worker, 'the holder') || ' keeps records ['
           || t.first || ', ' || %(at)s || '); records [' || %(at)s || ', ' || t.stop || ') became pending '
           || CASE WHEN count(*) = 1 THEN 'item #' || min(r.id)
                   ELSE count(*) || ' items, #' || min(r.id) || ' to #' || max(r.id) END
           || coalesce(', asked for by idle worker ' || t.split_for, ''),
           shardline_now()
      FROM target AS t, remainder AS r
     GROUP BY t.job_id, t.id, t.worker, t.first, t.stop, t.split_for
    UNION ALL
    SELECT t.job_id, r.id, 'remainder', coalesce(t.split_for, ''),
           'made from item ' || t.id || ': records [' || r.range_start || ', ' || r.range_end
           || '), split off while ' || coalesce(t.worker, 'a worker') || ' read it',
           shardline_now()
      FROM target AS t, remainder AS r
)
SELECT t.job_id, t.first, t.stop,
       EXISTS (SELECT FROM remainder) AS made,
       EXISTS (SELECT FROM remainder) OR EXISTS (SELECT FROM again) AS split,
       coalesce((SELECT id FROM remainder WHERE range_start = %(at)s), (SELECT id FROM again)) AS remainder,
       (SELECT count(*) FROM remainder) AS pieces,
       (SELECT count(*) FROM refused) AS refused
  FROM target AS t;
