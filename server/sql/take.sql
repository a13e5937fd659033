-- take: complete the caller's finished leases, then lease up to %(count)s
-- items of job %(job)s to worker %(worker)s.
--
-- One statement: one round trip and one commit per request, which in steady
-- state is one per item. No read-then-write anywhere:
--   done       the completions the request carries (ids, tokens, records),
--              each guarded by (state = 'leased', token, holder, scope)
--              exactly as in complete.sql; the ids it returns are the
--              accepted ones.
--   job        the job's state and lease settings, if the caller's scope
--              (%(scope)s, null: every job) lets it see the job; out of
--              scope it is not found, as a job that does not exist. Items
--              are picked only while it is ready or running (paused,
--              cancelled... hand out nothing), and the caller learns the
--              state from the result.
--   reclaimed  leases that expired go back to `pending`, or to `failed` once
--              they used max_attempts. SKIP LOCKED: two takers never reclaim
--              the same row and never wait on each other. CTEs share one
--              snapshot, so `picked` cannot see these rows; the next take
--              leases them (the service runs it at once when this one came
--              up short).
--   tail       straggler-aware leasing, near the end only: a worker over
--              twice as slow as the others is deferred (given nothing, told
--              to retry) when the other live workers, at their measured pace,
--              would finish every remaining record before it finishes the
--              next item's. Otherwise the job's last minutes wait on a slow
--              worker's last item. Paces are per record, as items differ
--              in size once split. Until an item of its own finishes, a
--              worker's pace is the time its consumer has held the lease
--              it is still on, over its records. A take ahead counts the
--              item in hand too, and waits for its worker's pace to be
--              measured. The scalar subqueries run only when fewer items
--              remain than TAIL_WINDOW (leases.py).
--   picked     the first pending items in (epoch, position) order, read from
--              the partial index item_pending; SKIP LOCKED hands concurrent
--              takers disjoint rows, so no item ever has two live leases.
--              Not a split's piece for a take ahead (outside synchronous
--              training): pieces are for the workers with nothing to read.
--   leased     each picked row gets a fresh random fencing token
--              (shardline_fencing_token, server/sql/schema.sql) and its holder,
--              the caller's user (%(holder)s), and forgets the last lease's
--              reading position and split request (services/splits.py);
--              its record range stays.
--              A take ``ahead`` (%(ahead)s) marks what it leases as
--              taken ahead of its consumer (worker_sdk.look_ahead).
--   started    leases taken ahead that the consumer has started
--              (%(started)s, the caller's own, not those this request
--              completes: one row is changed once per statement): no longer
--              to be asked back, their lease time counting from now (an
--              item's duration is its reading, not its wait in a buffer).
--              Their expiry stays: only a heartbeat extends a lease, and
--              holder_gone.sql tells a dead holder's leases by that.
--              A give-back asked of one meanwhile was refused: the take that
--              asked is woken to ask elsewhere (services/give_back.py).
--   events     the audit trail of expired leases.
--   seen       the worker's last_seen, its consumer, whether it waits
--              (a take ahead never does: its consumer is reading; nor a
--              take that leaves should it find nothing), and since when
--              its takes are deferred (tail).
--   claimed    with an Idempotency-Key (%(key)s, else NULL): the request's
--              record, with the leases made here, committed with them. A
--              plain INSERT: a repeat of the key fails on the primary key
--              (after the first commits, if it has not yet), and with it the
--              whole statement, completions and leases included; the service
--              then answers the repeat from this record. `whole` says that
--              this statement alone answers the request (it leased all it
--              was asked for), and the session answering it (a repeat
--              waits for its answer only while that session lives). The
--              worker's records older than %(ttl)s
--              seconds go on the way (an index range of its own rows:
--              whoever sent them, they are past use; asking for the holder
--              too made Postgres read every key the user sent in the TTL,
--              bench/RESULTS.md "Trust checks").
-- What done, reclaimed and leased change besides the items (the counters,
-- completions per minute, the completing worker's credit) is written once
-- for the whole statement by the trigger on shardline_item (server/sql/schema.sql).
-- The final SELECT returns one row even when nothing was leased (none when
-- the job does not exist), so the caller always learns the job's state, the
-- completions accepted, whether it was deferred and how many leases were
-- reclaimed.
WITH req AS (
    SELECT *
      FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[], %(records)s::bigint[]) AS r(id, token, records)
), locked AS (
    -- A request that completes or starts two of its holder's rows or more,
    -- which a heartbeat (extend.sql) changes too: both lock them in id
    -- order first, so that neither waits on the other in a circle (a
    -- deadlock, which Postgres breaks after a second with an error).
    SELECT id
      FROM shardline_item
     WHERE cardinality(%(ids)s::bigint[] || %(started)s::bigint[]) > 1
       AND id = ANY (%(ids)s::bigint[] || %(started)s::bigint[])
       AND job_id = %(job)s AND state = 'leased'
       AND holder_id IS NOT DISTINCT FROM %(holder)s::bigint  -- nobody else's rows
     ORDER BY id
       FOR UPDATE
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
     WHERE i.id = r.id AND i.job_id = %(job)s AND i.state = 'leased' AND i.token = r.token
       AND i.holder_id IS NOT DISTINCT FROM %(holder)s::bigint
       AND (cardinality(%(ids)s::bigint[] || %(started)s::bigint[]) <= 1 OR i.id IN (SELECT id FROM locked))
       -- Once per statement, not per row the plan passes on its way.
       AND (SELECT shardline_job_in_scope(%(job)s, %(scope)s::text[]))
 RETURNING i.id, i.duration, i.range_start, i.range_end, i.unit_idx
), job AS (
    SELECT id, state, lease_timeout, max_attempts, num_epochs, epochs_materialised, units_count
      FROM shardline_job
     WHERE id = %(job)s AND shardline_name_in_scope(name, %(scope)s::text[])
), remaining AS (
    SELECT coalesce(sum(c.pending), 0) + (SELECT units_count * (num_epochs - epochs_materialised) FROM job) AS items
      FROM shardline_counter AS c
     WHERE c.job_id = %(job)s
), next_item AS (
    -- The records of the item this take would lease (none in its epochs:
    -- no deferral), for a take the straggler rule looks at closely (tail).
    SELECT shardline_item_weight(i.range_start, i.range_end, u.start, u."end") AS records
      FROM shardline_item AS i
      LEFT JOIN shardline_unit AS u ON i.range_start IS NULL AND u.job_id = %(job)s AND u.idx = i.unit_idx
     WHERE i.job_id = %(job)s AND i.state = 'pending'
       AND shardline_in_epochs(i.epoch, %(from)s::integer, %(upto)s::integer)
     ORDER BY i.epoch, i.position
     LIMIT 1
), todo AS (
    -- The records left: every pending item's, and those of the epochs not
    -- made yet. Up to TAIL_WINDOW item rows, read only for a worker the
    -- straggler rule would defer were every item one record (tail).
    SELECT pending.records + coalesce(unmade.records, 0) AS records
      FROM (SELECT coalesce(sum(shardline_item_weight(i.range_start, i.range_end, u.start, u."end")), 0) AS records
              FROM shardline_item AS i
              LEFT JOIN shardline_unit AS u ON i.range_start IS NULL AND u.job_id = %(job)s AND u.idx = i.unit_idx
             WHERE i.job_id = %(job)s AND i.state = 'pending') AS pending
      LEFT JOIN (SELECT (j.num_epochs - j.epochs_materialised)
                          * sum(shardline_item_weight(NULL, NULL, u.start, u."end")) AS records
                   FROM job AS j
                   JOIN shardline_unit AS u ON u.job_id = j.id
                  WHERE j.num_epochs > j.epochs_materialised
                  GROUP BY j.num_epochs, j.epochs_materialised) AS unmade ON true
), tail AS (
    -- Paces are per record (shardline_item_weight, server/sql/schema.sql):
    -- items differ in size once split, and a worker's next item takes its
    -- records' time at its pace, the others' remaining work all pending
    -- records' at theirs.
    -- Deferred only if this worker is also over twice as slow as the
    -- others' mean pace: the fastest worker is never deferred, so workers of
    -- equal speed can never all defer to each other.
    -- Never with nothing pending (there is nothing to leave to the others),
    -- and only counting on other consumers: a DataLoader's other loaders read
    -- only when their main process gets past this one, so a loader deferred
    -- to its siblings could wait on them forever.
    -- Never a rank of synchronous training (%(sync)s): it needs its share of
    -- the epoch however slow it is, and no other rank reads more for it.
    -- A take ahead (%(ahead)s) is for the items after the one in hand and
    -- those it already holds ahead, not started (a look-ahead takes again
    -- once half its depth is left): its worker finishes the last of them
    -- that many items' time and %(count)s more after that one. Near the end
    -- it is deferred, too, while its worker's pace is not known (no item
    -- finished): a slow worker's first take ahead would otherwise decide
    -- the job's end before any rule could tell it is slow.
    SELECT coalesce(NOT %(sync)s::boolean AND r.items > 0
                    AND CASE WHEN %(ahead)s::boolean AND r.items < %(tail_window)s AND mine.seconds_per_record IS NULL
                             THEN true
                             -- CASE, not AND, is evaluated in order: `todo` is read
                             -- only where its lower bound (every item one record) defers.
                             WHEN mine.seconds_per_record > 2 * others.workers / others.records_per_second
                                  AND due.seconds > r.items / others.records_per_second
                                  -- A deferral ends once it has lasted as long as this
                                  -- worker's next item would take: the others were to
                                  -- finish everything by then. A misjudgement (others
                                  -- whose consumers wait on a deferred loader of theirs
                                  -- read nothing, however fast they were) then costs
                                  -- no more than the rule meant to save.
                                  AND coalesce(shardline_now() - due.deferred_since < make_interval(secs => due.seconds),
                                               true)
                             THEN due.seconds > (SELECT records FROM todo) / others.records_per_second
                             ELSE false
                        END, false) AS deferred
      FROM remaining AS r
      LEFT JOIN LATERAL (
            -- With the completions this request carries: the worker row
            -- shows them only after this statement (the trigger), and a slow
            -- worker's first item, acknowledged with its next take, would
            -- otherwise never count.
            -- Before any finished: at least as long as its consumer has
            -- held the oldest lease it is still on, over that lease's
            -- records (a loader takes its next range while the loop still
            -- trains on the last one's batches, which are acknowledged only
            -- once received). Not for a take ahead, which waits for a
            -- measured pace (below).
            SELECT coalesce(
                     (SELECT (w.busy_seconds + d.seconds) / nullif(w.records_done + d.records, 0)
                        FROM shardline_worker AS w,
                             (SELECT count(*) AS n, coalesce(sum(f.duration), 0) AS seconds,
                                     coalesce(sum(shardline_item_weight(f.range_start, f.range_end, u.start, u."end")), 0)
                                       AS records
                                FROM done AS f
                                LEFT JOIN shardline_unit AS u
                                  ON f.range_start IS NULL AND u.job_id = %(job)s AND u.idx = f.unit_idx) AS d
                       WHERE w.job_id = %(job)s AND w.name = %(worker)s AND w.items_done + d.n >= 1),
                     (SELECT extract(epoch FROM shardline_now() - h.leased_at)
                               / shardline_item_weight(h.range_start, h.range_end, u.start, u."end")
                        FROM shardline_item AS h
                        LEFT JOIN shardline_unit AS u
                          ON h.range_start IS NULL AND u.job_id = %(job)s AND u.idx = h.unit_idx
                       WHERE NOT %(ahead)s::boolean
                         AND h.job_id = %(job)s AND h.state = 'leased' AND NOT h.ahead
                         AND h.expires_at > shardline_now() AND h.id NOT IN (SELECT id FROM req)
                         AND h.worker IN (SELECT c.name FROM shardline_worker AS c
                                           WHERE c.job_id = %(job)s AND c.consumer = %(consumer)s
                                          UNION ALL SELECT %(worker)s)
                       ORDER BY h.leased_at
                       LIMIT 1)
                   ) AS seconds_per_record
             -- A fence: pulled up, the subquery was run once for each use of its column.
             OFFSET 0
           ) AS mine ON r.items < %(tail_window)s
      LEFT JOIN LATERAL (
            SELECT sum(w.records_done / w.busy_seconds) AS records_per_second, count(*) AS workers
              FROM shardline_worker AS w, job AS j
             WHERE w.job_id = %(job)s AND w.name <> %(worker)s AND w.consumer IS DISTINCT FROM %(consumer)s
               AND w.items_done >= 1 AND w.records_done >= 1 AND w.busy_seconds > 0
               AND shardline_worker_live(w.last_seen, j.lease_timeout)
               -- Only workers reading now (a worker that reads holds a lease
               -- all but a round trip of the time): one that died, or was
               -- fenced by a restore, finishes nothing however fast it was;
               -- nor does one whose consumer waits at the end of a queue
               -- (two queues read in lockstep: it may be waiting on this one).
               AND EXISTS (SELECT FROM shardline_item AS h
                            WHERE h.job_id = %(job)s AND h.worker = w.name AND h.state = 'leased'
                              AND h.expires_at > shardline_now())
               AND NOT EXISTS (SELECT FROM shardline_waiting_consumer AS v
                                WHERE v.job_id = %(job)s AND v.consumer = w.consumer)
            OFFSET 0
           ) AS others ON mine.seconds_per_record IS NOT NULL
      LEFT JOIN LATERAL (
            -- How long this worker would take, at its pace, to finish the
            -- item it would lease (a take ahead: and those before it), and
            -- since when its takes have been deferred.
            SELECT mine.seconds_per_record * n.records
                     * CASE WHEN %(ahead)s::boolean
                            THEN 1 + %(count)s::integer
                                 + (SELECT count(*) FROM shardline_item AS h
                                     WHERE h.job_id = %(job)s AND h.worker = %(worker)s AND h.state = 'leased'
                                       AND h.ahead AND h.id <> ALL (%(started)s::bigint[])
                                       AND h.id NOT IN (SELECT id FROM req))
                            ELSE 1 END AS seconds,
                   (SELECT w.deferred_since FROM shardline_worker AS w
                     WHERE w.job_id = %(job)s AND w.name = %(worker)s) AS deferred_since
              FROM next_item AS n
            OFFSET 0
           ) AS due ON mine.seconds_per_record IS NOT NULL
), reclaimed AS (
    UPDATE shardline_item AS i
       SET state = CASE WHEN i.attempts >= (SELECT max_attempts FROM job) THEN 'failed' ELSE 'pending' END,
           error = 'lease expired while held by ' || coalesce(i.worker, 'an unknown worker'),
           expires_at = NULL
      FROM (SELECT id
              FROM shardline_item
             WHERE job_id = %(job)s AND state = 'leased' AND expires_at < shardline_now()
               -- A lease this request completes is the caller's to complete
               -- (as a standalone complete would be); and two modifications
               -- of one row in one statement would leave only one in effect.
               AND id NOT IN (SELECT id FROM req)
               AND EXISTS (SELECT FROM job)
             ORDER BY expires_at
             LIMIT 100
               FOR UPDATE SKIP LOCKED) AS expired
     WHERE i.id = expired.id
 RETURNING i.id, i.state, i.worker
), picked AS (
    SELECT id
      FROM shardline_item
     WHERE job_id = %(job)s AND state = 'pending'
       AND shardline_in_epochs(epoch, %(from)s::integer, %(upto)s::integer)
       AND EXISTS (SELECT 1 FROM job WHERE state IN ('ready', 'running'))
       AND NOT (SELECT deferred FROM tail)
       -- A take ahead leases no piece split off a range (but a rank of
       -- synchronous training, whose quota's remainders are such pieces):
       -- the pieces are cut for the workers that have nothing to read, each
       -- sized to end with the others (propose_split.sql). Taken ahead by a
       -- worker still reading, it waited for that worker's current item, or
       -- went back to an idle one at a round trip's cost (bench/RESULTS.md).
       AND (parent_id IS NULL OR NOT %(ahead)s::boolean OR %(sync)s::boolean)
     ORDER BY epoch, position
     LIMIT %(count)s
       FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE shardline_item AS i
       SET state = 'leased',
           token = shardline_fencing_token(),
           holder_id = %(holder)s::bigint,
           worker = %(worker)s,
           attempts = i.attempts + 1,
           leased_at = shardline_now(),
           expires_at = shardline_now() + make_interval(secs => (SELECT lease_timeout FROM job)),
           completed_at = NULL,
           duration = NULL,
           records = NULL,
           -- A consumer that tracks its reading (%(tracks)s) is at its
           -- range's first record: a split may be asked of it at once.
           read_to = CASE WHEN %(tracks)s::boolean
                          THEN coalesce(i.range_start,
                                        (SELECT start FROM shardline_unit WHERE job_id = %(job)s AND idx = i.unit_idx))
                     END,
           read_at = CASE WHEN %(tracks)s::boolean THEN shardline_now() END,
           split_at = NULL,
           split_for = NULL,
           split_asked_at = NULL,
           split_pieces = NULL,
           ahead = %(ahead)s::boolean
      FROM picked
     WHERE i.id = picked.id
 RETURNING i.id, i.token, i.epoch, i.position, i.unit_idx, i.expires_at, i.range_start, i.range_end
), started AS (
    UPDATE shardline_item AS i
       SET ahead = false,
           leased_at = shardline_now(),
           split_for = NULL,
           split_asked_at = NULL
      FROM (SELECT id, split_for AS asker
              FROM shardline_item
             WHERE id = ANY (%(started)s::bigint[]) AND job_id = %(job)s AND state = 'leased' AND ahead
               AND worker = %(worker)s AND holder_id IS NOT DISTINCT FROM %(holder)s::bigint
               AND id NOT IN (SELECT id FROM req)
               -- Live: an expired one is reclaimed by this statement, which changes a row once.
               AND expires_at > shardline_now()
               AND (cardinality(%(ids)s::bigint[] || %(started)s::bigint[]) <= 1 OR id IN (SELECT id FROM locked))
               AND EXISTS (SELECT FROM job)) AS s
     WHERE i.id = s.id
 RETURNING s.asker
), refused AS (
    SELECT pg_notify('shardline_job', %(job)s || ':refused:' || asker) FROM started WHERE asker IS NOT NULL
), events AS (
    INSERT INTO shardline_event (job_id, item_id, kind, worker, message, at)
    SELECT %(job)s, id, 'expired', coalesce(worker, ''),
           CASE WHEN state = 'failed' THEN 'lease expired; no attempts left, item failed'
                ELSE 'lease expired; item back to pending' END,
           shardline_now()
      FROM reclaimed
), seen AS (
    -- The caller's own row: last seen now, and waiting (at the end of the
    -- queue, or deferred, or paused) exactly when this statement leased it
    -- nothing.
    INSERT INTO shardline_worker AS w (job_id, name, consumer, first_seen, last_seen, items_done, items_failed,
                                       busy_seconds, waiting_since, deferred_since)
    SELECT j.id, %(worker)s, %(consumer)s, shardline_now(), shardline_now(), 0, 0, 0,
           -- A take ahead that found nothing does not wait: its consumer is
           -- reading; nor does one that leaves (%(leave)s): its consumer reads
           -- through another of its loaders.
           CASE WHEN %(ahead)s::boolean OR %(leave)s::boolean OR EXISTS (SELECT 1 FROM leased)
                THEN NULL ELSE shardline_now() END,
           CASE WHEN NOT %(ahead)s::boolean AND (SELECT deferred FROM tail) THEN shardline_now() END
      FROM job AS j
    ON CONFLICT (job_id, name) DO UPDATE
       SET last_seen = shardline_now(),
           consumer = EXCLUDED.consumer,
           waiting_since = CASE WHEN EXCLUDED.waiting_since IS NULL THEN NULL
                                ELSE coalesce(w.waiting_since, EXCLUDED.waiting_since) END,
           -- Deferred since its first deferred take in a row (tail). Takes
           -- ahead leave it: their consumer is reading, not waiting on them.
           deferred_since = CASE WHEN %(ahead)s::boolean THEN w.deferred_since
                                 WHEN EXCLUDED.deferred_since IS NULL THEN NULL
                                 ELSE coalesce(w.deferred_since, EXCLUDED.deferred_since) END
), dropped AS (
    DELETE FROM shardline_take_request
     WHERE %(key)s::text IS NOT NULL AND job_id = %(job)s AND worker = %(worker)s
       AND created_at < shardline_now() - make_interval(secs => %(ttl)s)
), claimed AS (
    INSERT INTO shardline_take_request (job_id, holder, key, worker, leases, tokens, whole, created_at, backend)
    SELECT j.id, coalesce(%(holder)s::bigint, 0), %(key)s, %(worker)s,
           coalesce((SELECT array_agg(id ORDER BY epoch, position) FROM leased), '{}'),
           coalesce((SELECT array_agg(token ORDER BY epoch, position) FROM leased), '{}'),
           (SELECT count(*) FROM leased) = %(count)s,
           shardline_now(), pg_backend_pid()
      FROM job AS j
     WHERE %(key)s::text IS NOT NULL
)
SELECT j.state, j.num_epochs, j.epochs_materialised, r.reclaimed,
       (SELECT coalesce(array_agg(id), '{}') FROM done) AS completed,
       (SELECT deferred FROM tail) AS deferred, (SELECT count(*) FROM refused) AS refused,
       l.id, l.token, shardline_item_name(u.item, l.range_start, l.range_end) AS item, l.epoch, l.position,
       l.expires_at, u."offset", l.range_start, l.range_end, u.start AS unit_start, u."end" AS unit_end, u.source
  FROM job AS j
 CROSS JOIN (SELECT count(*) FILTER (WHERE state = 'pending') AS reclaimed FROM reclaimed) AS r
  LEFT JOIN leased AS l ON true
  -- One primary-key probe per lease. As a plain join, a job created since
  -- the last ANALYZE (its units not yet in the statistics, so estimated at
  -- one row) was planned as a scan of all its units filtered on idx: 100 to
  -- 300 ms per take on a new million-item job until autovacuum analysed the
  -- table. LIMIT 1 keeps the subquery a parameterised probe.
  LEFT JOIN LATERAL (SELECT item, "offset", start, "end", source
                       FROM shardline_unit
                      WHERE job_id = %(job)s AND idx = l.unit_idx
                      LIMIT 1) AS u ON true
 ORDER BY l.epoch, l.position;
