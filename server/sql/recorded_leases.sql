-- recorded_leases: the leases that request %(key)s on job %(job)s made (its
-- take.sql statement recorded ids and tokens) and that are still held with
-- those tokens, as take.sql returns leases: the answer of a repeat.
SELECT i.id, i.token, shardline_item_name(u.item, i.range_start, i.range_end) AS item, i.epoch, i.position,
       i.expires_at, u."offset",
       i.range_start, i.range_end, u.start AS unit_start, u."end" AS unit_end, u.source
  FROM shardline_take_request AS r
 CROSS JOIN unnest(r.leases, r.tokens) AS l(id, token)
  JOIN shardline_item AS i ON i.id = l.id AND i.token = l.token AND i.state = 'leased'
  LEFT JOIN LATERAL (SELECT item, "offset", start, "end", source
                       FROM shardline_unit
                      WHERE job_id = %(job)s AND idx = i.unit_idx
                      LIMIT 1) AS u ON true
 WHERE r.job_id = %(job)s AND r.holder = coalesce(%(holder)s::bigint, 0) AND r.key = %(key)s
 ORDER BY i.epoch, i.position;
