-- materialise_epoch: create the item rows of epoch %(epoch)s of job %(job)s.
--
-- claimed    a guarded UPDATE of the job row is the claim: only the
--            transaction that moves epochs_materialised from %(epoch)s to
--            %(epoch)s + 1 inserts. The row is first locked with SKIP LOCKED,
--            so a second taker at the same epoch boundary returns at once
--            (and retries shortly) instead of waiting while a large epoch is
--            inserted. NO KEY UPDATE does not conflict with the KEY SHARE
--            locks that foreign-key checks of concurrent item updates take.
--            With %(drained)s, only once the epochs before it hold no
--            pending item (a synchronous rank's take makes the next epoch as
--            its own are leased out: services/leases.py); the probe reads
--            the partial index item_pending, and the row is locked only
--            when it passes.
-- created    the epoch's order is a permutation derived from (seed, epoch)
--            alone: units sorted by a 64-bit hash of the unit's index keyed
--            by (seed, epoch). hashint8extended is Postgres's hash of bigint
--            partition keys, which must not change between versions (hash
--            partitions would break), so every run, server and Postgres
--            version computes the same order, each epoch a different one.
--            It is an integer sort, and about 4x cheaper than the md5 of a
--            text key (1.7 s of a million-item epoch's 8 s; bench/RESULTS.md).
--            Without shuffle it is the order of the works.
-- The epoch's pending counts: the trigger on shardline_item (server/sql/schema.sql).
-- Returns a row only when this call created the epoch.
WITH claimed AS (
    UPDATE shardline_job AS j
       SET epochs_materialised = %(epoch)s + 1
     WHERE j.id = (SELECT id
                     FROM shardline_job
                    WHERE id = %(job)s AND epochs_materialised = %(epoch)s AND num_epochs > %(epoch)s
                      AND NOT (%(drained)s::boolean AND EXISTS (SELECT FROM shardline_item
                                                                 WHERE job_id = %(job)s AND state = 'pending'
                                                                   AND epoch < %(epoch)s))
                      FOR NO KEY UPDATE SKIP LOCKED)
 RETURNING j.id, j.shuffle, j.seed
), created AS (
    INSERT INTO shardline_item (job_id, epoch, position, unit_idx, state, attempts, error)
    SELECT c.id,
           %(epoch)s,
           row_number() OVER (
               ORDER BY CASE WHEN c.shuffle
                             THEN hashint8extended(u.idx, hashint8extended(%(epoch)s, c.seed))
                        END,
                        u.idx) - 1,
           u.idx,
           'pending',
           0,
           ''
      FROM claimed AS c
      JOIN shardline_unit AS u ON u.job_id = c.id
 RETURNING 1
)
SELECT count(*) AS created FROM created HAVING count(*) > 0;
