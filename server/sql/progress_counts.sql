-- progress_counts: per (job, epoch) of the jobs %(ids)s that have item rows,
-- the counter shards summed (see server/sql/schema.sql for who writes them) and the
-- leases past their expiry that no take has reclaimed yet (the partial index
-- item_leased_expiry), which progress.py counts as pending.
SELECT c.job_id, c.epoch,
       sum(c.pending)::bigint AS pending, sum(c.leased)::bigint AS leased,
       sum(c.done)::bigint AS done, sum(c.failed)::bigint AS failed,
       coalesce(max(x.expired), 0)::bigint AS expired
  FROM shardline_counter AS c
  LEFT JOIN (SELECT job_id, epoch, count(*) AS expired
               FROM shardline_item
              WHERE job_id = ANY(%(ids)s::bigint[]) AND state = 'leased' AND expires_at < shardline_now()
              GROUP BY job_id, epoch) AS x ON x.job_id = c.job_id AND x.epoch = c.epoch
 WHERE c.job_id = ANY(%(ids)s::bigint[])
 GROUP BY c.job_id, c.epoch;
