-- at_end: what stands between job %(job)s and its end, for a take by
-- %(worker)s (reading for %(consumer)s) that leased nothing. With %(from)s
-- and %(upto)s, only epochs from and up to them count (a synchronous
-- training epoch's take).
--
--   has_pending         items wait to be leased (others' takes hold their
--                       rows for a moment): retry at once.
--   seconds_to_expiry   until the first live lease expires: a waiting
--                       worker need not ask again before then.
--   mine, others        live leases held under the caller's name, and not.
--   waiting_on          leases worth waiting for: held by another consumer
--                       that is not itself waiting, or expired (they come
--                       back to pending at the next take). A consumer that
--                       waits at the end of a queue may be waiting on the
--                       caller (a DataLoader taking from its loaders in
--                       turn, two queues read in lockstep), so waiting for
--                       its leases could wait forever; the caller's own
--                       consumer is reading its leases itself. For a rank of
--                       synchronous training (%(sync)s) no live lease is:
--                       the other ranks finish theirs only as this one keeps
--                       training with them.
-- Reads only the job's leased rows (item_leased_expiry) and their holders'
-- worker rows: a handful at the end of a job, when this runs.
SELECT EXISTS (SELECT 1 FROM shardline_item
                WHERE job_id = %(job)s AND state = 'pending'
                  AND shardline_in_epochs(epoch, %(from)s::integer, %(upto)s::integer)) AS has_pending,
       extract(epoch FROM min(i.expires_at) - shardline_now()) AS seconds_to_expiry,
       count(*) FILTER (WHERE i.worker = %(worker)s) AS mine,
       count(*) FILTER (WHERE i.worker IS DISTINCT FROM %(worker)s) AS others,
       count(*) FILTER (WHERE i.expires_at < shardline_now()
                           OR (NOT %(sync)s::boolean
                               AND h.consumer IS DISTINCT FROM %(consumer)s AND NOT h.waits)) AS waiting_on
  FROM shardline_item AS i
  LEFT JOIN LATERAL (
        SELECT w.consumer,
               EXISTS (SELECT FROM shardline_waiting_consumer AS v
                        WHERE v.job_id = w.job_id AND v.consumer = w.consumer) AS waits
          FROM shardline_worker AS w
         WHERE w.job_id = i.job_id AND w.name = i.worker
       ) AS h ON true
 WHERE i.job_id = %(job)s AND i.state = 'leased'
   AND shardline_in_epochs(i.epoch, %(from)s::integer, %(upto)s::integer);
