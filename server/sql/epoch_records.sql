-- epoch_records: the records of job %(job)s, for synchronous training
-- (worker_sdk.sync): how many an epoch holds, and how many epochs up to
-- %(upto)s still hold unread (pending or leased, with what epochs not yet
-- made will hold), and how many of those are leased now, beside how many
-- epochs are made (a plan worked out for the next epoch assumes none after
-- %(upto)s was, so none was started either). The counts are null while a
-- unit's records are unknown (a work read whole, or a job still slicing):
-- its ranks then agree on each step instead.
-- The unread sum reads the job's pending and leased items of those epochs
-- (item_pending, item_leased_expiry), once per training epoch.
WITH job AS (
    SELECT id, num_epochs, epochs_materialised FROM shardline_job WHERE id = %(job)s
), units AS (
    SELECT count(*) FILTER (WHERE "end" IS NULL) AS unknown, coalesce(sum("end" - start), 0) AS records
      FROM shardline_unit
     WHERE job_id = %(job)s
), unread AS (
    SELECT coalesce(sum(coalesce(i.range_end, u."end") - coalesce(i.range_start, u.start)), 0) AS records,
           coalesce(sum(coalesce(i.range_end, u."end") - coalesce(i.range_start, u.start))
                    FILTER (WHERE i.state = 'leased'), 0) AS leased
      FROM shardline_item AS i
      JOIN shardline_unit AS u ON u.job_id = i.job_id AND u.idx = i.unit_idx
     WHERE i.job_id = %(job)s AND i.state IN ('pending', 'leased') AND i.epoch <= %(upto)s
)
SELECT CASE WHEN n.unknown = 0 AND n.records > 0 THEN n.records END AS per_epoch,
       CASE WHEN n.unknown = 0 AND n.records > 0
            THEN r.records + n.records * greatest(0, least(%(upto)s + 1, j.num_epochs) - j.epochs_materialised)
       END AS unread,
       CASE WHEN n.unknown = 0 AND n.records > 0 THEN r.leased END AS leased,
       j.epochs_materialised AS epochs_made
  FROM job AS j, units AS n, unread AS r;
