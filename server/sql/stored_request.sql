-- stored_request: the record of request %(key)s on job %(job)s, for a repeat:
-- whether take.sql's statement answered it whole, the answer stored by a take
-- that ran more statements (NULL until it was answered), its age in seconds,
-- and whether the database session answering it still lives (answering): a
-- record that stays unanswered is one whose server died, and a session of a
-- server killed mid-request ends with its connection. A session started
-- after the record is another one that got the same pid.
SELECT r.whole, r.answer, extract(epoch FROM shardline_now() - r.created_at) AS age,
       EXISTS (SELECT FROM pg_stat_activity AS a
                WHERE a.pid = r.backend AND coalesce(a.backend_start <= r.created_at, true)) AS answering
  FROM shardline_take_request AS r
 WHERE r.job_id = %(job)s AND r.holder = coalesce(%(holder)s::bigint, 0) AND r.key = %(key)s;
