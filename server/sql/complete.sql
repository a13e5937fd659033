-- complete: mark leases done. Each row is guarded by (state = 'leased',
-- token): a lease that was taken back (or a token that never held it) matches
-- nothing, so nothing is ever counted twice. The caller reports the ids that
-- did not match as lost, after checking for repeats of an accepted completion.
--
-- A lease past its expiry that nobody reclaimed yet still completes: its
-- token is still the newest, so no other worker can be reading the item.
WITH req AS (
    SELECT *
      FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[], %(records)s::bigint[]) AS r(id, token, records)
), done AS (
    UPDATE shardline_item AS i
       SET state = 'done',
           completed_at = now(),
           expires_at = NULL,
           duration = extract(epoch FROM now() - i.leased_at),
           records = r.records,
           seq = nextval('shardline_completion_seq')
      FROM req AS r
     WHERE i.id = r.id AND i.state = 'leased' AND i.token = r.token
 RETURNING i.id, i.job_id, i.epoch, i.worker, i.duration
), counted AS (
    INSERT INTO shardline_counter AS c (job_id, epoch, shard, pending, leased, done, failed)
    SELECT job_id, epoch, pg_backend_pid(), 0, -count(*), count(*), 0
      FROM done
     GROUP BY job_id, epoch
    ON CONFLICT (job_id, epoch, shard) DO UPDATE
       SET leased = c.leased + EXCLUDED.leased,
           done = c.done + EXCLUDED.done
), rated AS (
    -- Completions per minute, as in take.sql.
    INSERT INTO shardline_throughput AS t (job_id, minute, shard, done)
    SELECT job_id, date_trunc('minute', now()), pg_backend_pid(), count(*)
      FROM done
     GROUP BY job_id
    ON CONFLICT (job_id, minute, shard) DO UPDATE
       SET done = t.done + EXCLUDED.done
), credited AS (
    UPDATE shardline_worker AS w
       SET items_done = w.items_done + d.n,
           busy_seconds = w.busy_seconds + d.seconds,
           last_seen = now()
      FROM (SELECT job_id, worker, count(*) AS n, sum(duration) AS seconds
              FROM done
             GROUP BY job_id, worker) AS d
     WHERE w.job_id = d.job_id AND w.name = d.worker
)
SELECT id, job_id FROM done;
